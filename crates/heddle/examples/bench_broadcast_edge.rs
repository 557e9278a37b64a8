//! A dataflow broadcast edge from one source to a target on every other worker, with its
//! batches through the root's shared slots (written once, copied out by each same-host
//! reader) or, with `--no-shared-slots`, through each reader's ring. Every target checks
//! what it received (every record's bytes, in order); rank 0 prints one
//! JSON line (`"ok"`, `"secs"`, `"mb_per_s"`, `"shared_messages"`) and the program exits
//! non-zero if any target's check failed.
//!
//! `heddle run -n 5 -- target/release/examples/bench_broadcast_edge --record-bytes 1048576`

use std::time::Instant;

use clap::Parser;
use heddle::dataflow::{drive, EdgeSpec, Event, Options, Partition, Placement, TaskId};
use heddle::{Communicator, Op};
use serde_bytes::ByteBuf;

#[derive(Debug, Parser)]
struct Args {
    /// Bytes of each record.
    #[arg(long, default_value_t = 1 << 20)]
    record_bytes: usize,
    /// Records the source broadcasts.
    #[arg(long, default_value_t = 200)]
    records: usize,
    /// Send through each reader's ring instead of the shared slots.
    #[arg(long)]
    no_shared_slots: bool,
    /// Runs of the broadcast (the last one is reported; earlier ones warm up).
    #[arg(long, default_value_t = 3)]
    runs: usize,
}

type BoxError = Box<dyn std::error::Error>;

/// The bytes every record carries after its index.
fn template(bytes: usize) -> Vec<u8> {
    (0..bytes.max(8)).map(|k| (k.wrapping_mul(31) >> 3) as u8).collect()
}

/// Record `i`: its index, then the template's bytes (a byte buffer, which bincode decodes
/// as one slice rather than element by element).
fn record(i: usize, template: &[u8]) -> ByteBuf {
    let mut r = template.to_vec();
    r[..8].copy_from_slice(&(i as u64).to_le_bytes());
    ByteBuf::from(r)
}

/// Whether `got` is records 0, 1, … of `template`, in order.
fn in_order<'a>(got: impl Iterator<Item = &'a ByteBuf>, template: &[u8]) -> bool {
    got.enumerate().all(|(i, r)| r[..8] == (i as u64).to_le_bytes() && r[8..] == template[8..])
}

/// Runs the broadcast once; returns (seconds, ok, shared messages) on this worker.
fn broadcast(comm: &Communicator, args: &Args, edge: u32) -> Result<(f64, bool, u64), BoxError> {
    let n = comm.size() as u32;
    // Task 0 (the source) on worker 0; target t on worker t (1..n), or on 0 alone.
    let targets: Vec<TaskId> = if n == 1 { vec![1] } else { (1..n).collect() };
    let mut pairs = vec![(0, 0)];
    pairs.extend(targets.iter().map(|&t| (t, if n == 1 { 0 } else { t as usize })));
    let spec = EdgeSpec::new(edge, vec![0], targets.clone(), Placement::from_pairs(pairs));
    let opts = Options::batch().share_slots(!args.no_shared_slots);
    let mut op = Partition::broadcast(comm, spec, opts)?;
    let template = template(args.record_bytes);
    let input: Vec<(TaskId, Vec<ByteBuf>)> = if comm.rank() == 0 {
        vec![(0, (0..args.records).map(|i| record(i, &template)).collect())]
    } else {
        Vec::new()
    };
    comm.barrier()?;
    let start = Instant::now();
    let events = drive(&mut op, input)?;
    let mut secs = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut secs, Op::Max)?;
    // Each target: every record, in order.
    let ok = events.values().all(|evs| {
        let got = evs.iter().filter_map(|e| match e {
            Event::Data(r) => Some(r),
            _ => None,
        });
        got.clone().count() == args.records && in_order(got, &template)
    });
    Ok((secs[0], ok, op.shared_messages()))
}

fn main() -> Result<(), BoxError> {
    let args = Args::parse();
    let comm = heddle::init()?;
    let mut last = (0.0, true, 0);
    for run in 0..args.runs.max(1) {
        last = broadcast(&comm, &args, 40 + run as u32)?;
    }
    let (secs, ok, shared) = last;
    let mut all = [u64::from(!ok), shared];
    comm.allreduce(&mut all, Op::Sum)?;
    let readers = comm.size().saturating_sub(1).max(1);
    let bytes = (args.records * args.record_bytes * readers) as f64;
    if comm.rank() == 0 {
        println!(
            "{}",
            serde_json::json!({
                "op": "broadcast_edge",
                "workers": comm.size(),
                "record_bytes": args.record_bytes,
                "records": args.records,
                "shared_slots": !args.no_shared_slots,
                "secs": secs,
                "mb_per_s": bytes / secs / 1e6,
                "shared_messages": all[1],
                "ok": all[0] == 0,
            })
        );
    }
    if all[0] != 0 {
        eprintln!("bench_broadcast_edge: {} target(s) received wrong records", all[0]);
        std::process::exit(1);
    }
    Ok(())
}
