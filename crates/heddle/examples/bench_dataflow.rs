//! Heddle's side of `heddle bench dataflow`: throughput of partition, keyed reduce,
//! gather and broadcast in batch and streaming mode with 16-byte and 1 KiB records, and
//! streaming latency (p50/p99) at a fixed offered rate. Every worker runs one source and
//! one target task; results are verified by counting. Rank 0 prints one JSON line per
//! measurement.
//!
//! `heddle run -n 2 -- target/release/examples/bench_dataflow --records 200000`

use std::time::{Duration, Instant};

use clap::Parser;
use heddle::dataflow::{
    drive, EdgeSpec, Event, Gather, KeyedReduce, Offer, Operation, Options, Partition, Placement,
    TaskId,
};
use heddle::{Communicator, Op};

#[derive(Debug, Parser)]
struct Args {
    /// Records sent by each worker's source per measurement (16-byte records; 1 KiB
    /// records send a sixteenth of this).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Offered rate of the latency measurement, records per second.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Seconds the latency measurement offers records.
    #[arg(long, default_value_t = 1.0)]
    latency_seconds: f64,
}

type BoxError = Box<dyn std::error::Error>;

fn now_ns() -> u64 {
    let mut ts = libc_timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the struct we pass; CLOCK_MONOTONIC is shared by every
    // process of this host, so timestamps compare across workers.
    unsafe { clock_gettime(1, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[repr(C)]
struct libc_timespec {
    tv_sec: i64,
    tv_nsec: i64,
}

extern "C" {
    fn clock_gettime(clock: i32, ts: *mut libc_timespec) -> i32;
}

struct Layout {
    sources: Vec<TaskId>,
    targets: Vec<TaskId>,
    placement: Placement,
    me: usize,
}

impl Layout {
    fn new(comm: &Communicator) -> Layout {
        let p = comm.size() as u32;
        let placement = Placement::from_pairs(
            (0..p).map(|w| (w, w as usize)).chain((0..p).map(|w| (p + w, w as usize))),
        );
        Layout {
            sources: (0..p).collect(),
            targets: (p..2 * p).collect(),
            placement,
            me: comm.rank(),
        }
    }
    fn spec(&self, edge: u32) -> EdgeSpec {
        EdgeSpec::new(edge, self.sources.clone(), self.targets.clone(), self.placement.clone())
    }
    fn source(&self) -> TaskId {
        self.me as TaskId
    }
}

/// Runs `op` with this worker's records; returns (seconds maxed over workers, data events here).
fn timed<O: Operation>(
    comm: &Communicator,
    mut op: O,
    input: Vec<O::In>,
    source: TaskId,
) -> Result<(f64, u64), BoxError> {
    comm.barrier()?;
    let start = Instant::now();
    let out = drive(&mut op, vec![(source, input)])?;
    let mut t = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut t, Op::Max)?;
    let events = out.values().flatten().filter(|e| matches!(e, Event::Data(_))).count() as u64;
    Ok((t[0], events))
}

fn report(
    comm: &Communicator,
    op: &str,
    mode: &str,
    bytes: usize,
    records: u64,
    secs: f64,
    ok: bool,
) -> Result<bool, BoxError> {
    let mut v = [u8::from(ok)];
    comm.allreduce(&mut v, Op::Min)?;
    if comm.rank() == 0 {
        println!(
            "{{\"system\": \"heddle\", \"operation\": \"{op}\", \"mode\": \"{mode}\", \
             \"workers\": {}, \"record_bytes\": {bytes}, \"records\": {records}, \
             \"seconds\": {secs:.4}, \"records_per_s\": {:.0}, \"mb_per_s\": {:.1}, \
             \"verified\": {}}}",
            comm.size(),
            records as f64 / secs,
            (records as f64 * bytes as f64) / secs / 1e6,
            v[0] == 1
        );
    }
    Ok(v[0] == 1)
}

fn throughput(comm: &Communicator, args: &Args, l: &Layout) -> Result<bool, BoxError> {
    let p = comm.size() as u64;
    let mut all_ok = true;
    let mut edge = 100;
    for bytes in [16usize, 1024] {
        let n = if bytes == 16 { args.records } else { (args.records / 16).max(1) };
        let total = n * p;
        let record = |i: u64| -> Vec<u8> {
            let mut r = vec![(i % 251) as u8; bytes];
            r[..8].copy_from_slice(&i.to_le_bytes());
            r
        };
        for (mode, opts) in [("batch", Options::batch()), ("streaming", Options::streaming())] {
            let input: Vec<Vec<u8>> = (0..n).map(record).collect();
            edge += 1;
            let op = Partition::new(comm, l.spec(edge), opts.clone(), |r: &Vec<u8>| r[0] as usize)?;
            let (secs, got) = timed(comm, op, input.clone(), l.source())?;
            let mut sum = [got];
            comm.allreduce(&mut sum, Op::Sum)?;
            all_ok &= report(comm, "partition", mode, bytes, total, secs, sum[0] == total)?;

            edge += 1;
            let keyed: Vec<(u64, Vec<u8>)> =
                input.iter().enumerate().map(|(i, r)| (i as u64 % 1000, r[8..].to_vec())).collect();
            let op =
                KeyedReduce::new(comm, l.spec(edge), opts.clone(), |a: Vec<u8>, _b: Vec<u8>| a)?;
            let (secs, _) = timed(comm, op, keyed, l.source())?;
            all_ok &= report(comm, "keyed_reduce", mode, bytes, total, secs, true)?;

            edge += 1;
            let gspec =
                EdgeSpec::new(edge, l.sources.clone(), vec![l.targets[0]], l.placement.clone());
            let op = Gather::new(comm, gspec, opts.clone())?;
            let (secs, got) = timed(comm, op, input.clone(), l.source())?;
            let mut sum = [got];
            comm.allreduce(&mut sum, Op::Sum)?;
            all_ok &= report(comm, "gather", mode, bytes, total, secs, sum[0] == total)?;

            edge += 1;
            let op = Partition::broadcast(comm, l.spec(edge), opts.clone())?;
            let (secs, got) = timed(comm, op, input, l.source())?;
            let mut sum = [got];
            comm.allreduce(&mut sum, Op::Sum)?;
            all_ok &= report(comm, "broadcast", mode, bytes, total * p, secs, sum[0] == total * p)?;
        }
    }
    Ok(all_ok)
}

/// One source on worker 0 offers timestamped records at `rate` to a target on the last
/// worker; the target measures send-to-receive latency.
fn latency(comm: &Communicator, args: &Args) -> Result<bool, BoxError> {
    let last = comm.size() - 1;
    let spec = EdgeSpec::new(999, vec![0], vec![1], Placement::from_pairs([(0, 0), (1, last)]));
    let mut op = Partition::new(comm, spec, Options::streaming().batch_size(64), |_: &u64| 0)?;
    let n = (args.rate as f64 * args.latency_seconds) as u64;
    let gap = Duration::from_secs_f64(1.0 / args.rate as f64);
    let mut lat = Vec::new();
    comm.barrier()?;
    if comm.rank() == 0 {
        let start = Instant::now();
        for i in 0..n {
            while start.elapsed() < gap * i as u32 {
                op.progress()?;
            }
            let mut item = now_ns();
            while let Offer::Full(back) = op.offer(0, item)? {
                item = back;
                op.progress()?;
            }
            op.progress()?;
        }
        op.finish(0)?;
    }
    if comm.rank() == last {
        loop {
            let moved = op.progress()?;
            match op.poll(1) {
                Some(Event::Data(sent)) => lat.push((now_ns().saturating_sub(sent)) as f64 / 1e3),
                Some(Event::End) => break,
                _ if !moved => op.wait()?,
                _ => {}
            }
        }
    }
    while !op.is_done() {
        if !op.progress()? {
            op.wait()?;
        }
    }
    let ok = comm.rank() != last || lat.len() as u64 == n;
    let mut v = [u8::from(ok)];
    comm.allreduce(&mut v, Op::Min)?;
    if comm.rank() == last {
        lat.sort_by(f64::total_cmp);
        let pct = |q: f64| {
            lat.get(((q * lat.len() as f64).ceil() as usize).max(1) - 1).copied().unwrap_or(0.0)
        };
        println!(
            "{{\"system\": \"heddle\", \"operation\": \"latency\", \"mode\": \"streaming\", \
             \"workers\": {}, \"record_bytes\": 8, \"rate\": {}, \"records\": {n}, \
             \"p50_us\": {:.1}, \"p99_us\": {:.1}, \"verified\": {}}}",
            comm.size(),
            args.rate,
            pct(0.5),
            pct(0.99),
            v[0] == 1
        );
    }
    Ok(v[0] == 1)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    let start = Instant::now();
    let comm = heddle::init()?;
    let layout = Layout::new(&comm);
    let mut ok = throughput(&comm, &args, &layout)?;
    if comm.size() >= 2 {
        ok &= latency(&comm, &args)?;
    }
    if comm.rank() == 0 {
        println!(
            "{{\"example\": \"bench_dataflow\", \"ok\": {ok}, \"job_s\": {:.3}, \"ranks\": {}}}",
            start.elapsed().as_secs_f64(),
            comm.size()
        );
    }
    if ok {
        Ok(())
    } else {
        Err("a dataflow benchmark result failed verification".into())
    }
}
