//! A network contract on Heddle's own channels: one sender per worker, each with
//! `net_bytes_per_s` in its contract, sends `--send` bytes of 16 KiB records through a
//! hash edge to receivers on every worker, which count the bytes and check every record.
//! The token bucket in front of each sender's edges holds it to its rate, as a thread or
//! (`--isolated`) as an isolated process alike. Rank 0 prints a JSON line: the bytes each
//! sender was allowed per second, the rate it got (bytes over the job's seconds), and
//! whether every record arrived intact; it exits 1 when one did not.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/net_contract --net-bytes-per-s 8MiB --send 24MiB
//! heddle run -n 2 -- target/release/examples/net_contract --net-bytes-per-s 8MiB --send 24MiB --isolated
//! heddle run -n 2 -- target/release/examples/net_contract --send 24MiB      # no contract
//! ```

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Parser;
use heddle::dataflow::Options;
use heddle::task::{
    parse_bytes, Compute, Context, Edge, Isolation, Job, Plan, Produced, Resources,
    Result as TaskResult, RoundRobin, Source, TaskGraph, WorkerSpec,
};

type BoxError = Box<dyn std::error::Error>;

/// Bytes of one record.
const RECORD: usize = 16 << 10;

#[derive(Debug, Parser)]
struct Args {
    /// Each sender's contract: bytes per second on its edges (with a unit or not; none:
    /// no contract).
    #[arg(long, value_parser = |s: &str| parse_bytes(s))]
    net_bytes_per_s: Option<u64>,
    /// Bytes each sender sends.
    #[arg(long, value_parser = |s: &str| parse_bytes(s), default_value = "24MiB")]
    send: u64,
    /// Run the senders as isolated processes.
    #[arg(long)]
    isolated: bool,
}

/// Starts every sender once.
struct Go(bool);
impl Source for Go {
    type Out = u64;
    fn next(&mut self, ctx: &mut Context<'_, u64>) -> TaskResult<Produced> {
        if !std::mem::replace(&mut self.0, true) {
            ctx.emit(0);
        }
        Ok(Produced::Done)
    }
}

/// The record number `n` of sender `s`: its first 16 bytes say who and which, the rest
/// follows from them.
fn record(s: u32, n: u64) -> Vec<u8> {
    let mut r = vec![(n as u8) ^ (s as u8); RECORD];
    r[..4].copy_from_slice(&s.to_le_bytes());
    r[4..12].copy_from_slice(&n.to_le_bytes());
    r
}

fn intact(r: &[u8]) -> bool {
    let s = u32::from_le_bytes(r[..4].try_into().expect("4 bytes"));
    let n = u64::from_le_bytes(r[4..12].try_into().expect("8 bytes"));
    r.len() == RECORD && r[12..].iter().all(|&b| b == (n as u8) ^ (s as u8))
}

struct Sender {
    me: u32,
    records: u64,
}
impl Compute for Sender {
    type In = u64;
    type Out = Vec<u8>;
    fn execute(&mut self, ctx: &mut Context<'_, Vec<u8>>, _: u64) -> TaskResult<()> {
        for n in 0..self.records {
            ctx.emit(record(self.me, n));
        }
        Ok(())
    }
}

/// Counts the bytes of intact records (and the damaged ones) on its worker.
struct Receiver(Arc<[AtomicU64; 2]>);
impl Compute for Receiver {
    type In = Vec<u8>;
    type Out = ();
    fn execute(&mut self, _: &mut Context<'_, ()>, r: Vec<u8>) -> TaskResult<()> {
        let at = usize::from(!intact(&r));
        self.0[at].fetch_add(r.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

fn main() {
    match run(Args::parse()) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

fn run(args: Args) -> Result<bool, BoxError> {
    let comm = heddle::init()?;
    let workers = comm.size() as u32;
    let records = args.send.div_ceil(RECORD as u64);
    let mut g = TaskGraph::new();
    let go = g.source("go", 1, |_| Go(false));
    let make = move |me| Sender { me, records };
    let sender = if args.isolated {
        g.isolated("sender", workers, make)
    } else {
        g.compute("sender", workers, make)
    };
    let mut contract = Resources::new(0.5, 0).net_bytes_per_s(args.net_bytes_per_s.unwrap_or(0));
    if args.isolated {
        contract = contract.isolation(Isolation::Process);
    }
    g.resources(&sender, contract);
    let counts = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let c = counts.clone();
    let receiver = g.compute("receiver", workers, move |_| Receiver(c.clone()));
    g.connect(&go, &sender, Edge::broadcast());
    g.connect(&sender, &receiver, Edge::hash());
    let plan = Plan::new(&g, &WorkerSpec::discover(&comm)?, &RoundRobin)?;
    let started = Instant::now();
    Job::new(&comm, &g, &plan, Options::batch())?.run()?;
    let seconds = started.elapsed().as_secs_f64();
    let mut totals = [counts[0].load(Ordering::Relaxed), counts[1].load(Ordering::Relaxed)];
    comm.allreduce(&mut totals, heddle::Op::Sum)?;
    let expected = records * RECORD as u64 * u64::from(workers);
    let ok = totals == [expected, 0];
    if comm.rank() == 0 {
        let line = serde_json::json!({
            "example": "net_contract",
            "ok": ok,
            "senders": workers,
            "isolated": args.isolated,
            "net_bytes_per_s": args.net_bytes_per_s.unwrap_or(0),
            "bytes_per_sender": records * RECORD as u64,
            "received": totals[0],
            "damaged": totals[1],
            "seconds": seconds,
            "bytes_per_s_per_sender": totals[0] as f64 / f64::from(workers) / seconds,
        });
        println!("{line}");
    }
    Ok(ok)
}
