//! A dataflow broadcast edge from one source to a target on every other worker, with its
//! batches through the root's shared slots (written once, copied out by each same-host
//! reader) or, with `--no-shared-slots`, through each reader's ring. Every target checks
//! what it received (count and checksum of every record, in order); rank 0 prints one
//! JSON line (`"ok"`, `"secs"`, `"mb_per_s"`, `"shared_messages"`) and the program exits
//! non-zero if any target's check failed.
//!
//! `heddle run -n 5 -- target/release/examples/bench_broadcast_edge --record-bytes 1048576`

use std::time::Instant;

use clap::Parser;
use heddle::dataflow::{drive, EdgeSpec, Event, Options, Partition, Placement, TaskId};
use heddle::{Communicator, Op};

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

/// Record `i`: its index, then bytes that depend on it.
fn record(i: usize, bytes: usize) -> Vec<u8> {
    let mut r: Vec<u8> = (0..bytes.max(8)).map(|k| (k.wrapping_mul(31) ^ i) as u8).collect();
    r[..8].copy_from_slice(&(i as u64).to_le_bytes());
    r
}

/// Order-sensitive checksum of records.
fn checksum<'a>(records: impl Iterator<Item = &'a [u8]>) -> u64 {
    records.fold(17u64, |h, r| {
        let s = r.iter().fold(0u64, |a, &b| a.wrapping_mul(131).wrapping_add(u64::from(b)));
        h.wrapping_mul(1_000_003).wrapping_add(s)
    })
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
    let input: Vec<(TaskId, Vec<Vec<u8>>)> = if comm.rank() == 0 {
        vec![(0, (0..args.records).map(|i| record(i, args.record_bytes)).collect())]
    } else {
        Vec::new()
    };
    comm.barrier()?;
    let start = Instant::now();
    let events = drive(&mut op, input)?;
    let got: Vec<&[u8]> = events
        .values()
        .flatten()
        .filter_map(|e| match e {
            Event::Data(r) => Some(r.as_slice()),
            _ => None,
        })
        .collect();
    let mut secs = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut secs, Op::Max)?;
    let mine = events.len();
    let want: Vec<Vec<u8>> = (0..args.records).map(|i| record(i, args.record_bytes)).collect();
    let ok = mine == 0
        || (got.len() == args.records * mine
            && checksum(got.iter().copied()) == checksum(want.iter().map(Vec::as_slice)));
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
