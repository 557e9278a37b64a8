//! Heddle's side of `heddle bench collectives --vs mpi`: times allreduce (f64 sum),
//! broadcast, allgather and alltoall at each size, 8-byte ping-pong latency and 16 MiB
//! point-to-point bandwidth, verifying every result. Same definitions as
//! `benches/mpi/bench_collectives.py`: each iteration is timed on every rank, the
//! iteration's time is the maximum over ranks, and p50/p99 are taken after warm-up.
//! Rank 0 prints one JSON line per measurement, then the usual example summary line.
//!
//! `heddle run -n 2 -- target/release/examples/bench_collectives --quick`

use std::time::Instant;

use clap::Parser;
use heddle::{Communicator, Op};

#[derive(Debug, Parser)]
struct Args {
    /// Message sizes in bytes (per rank; per peer for alltoall).
    #[arg(long, value_delimiter = ',', default_value = "8,1024,65536,1048576,16777216")]
    sizes: Vec<usize>,
    /// Which measurements to run.
    #[arg(long, value_delimiter = ',', default_value = "allreduce,broadcast,allgather,alltoall,pingpong,bandwidth")]
    collectives: Vec<String>,
    /// Warm-up iterations (default: a tenth of the timed ones, at least 5).
    #[arg(long)]
    warmup: Option<usize>,
    /// Timed iterations (default: scaled down with size, 20..=2000).
    #[arg(long)]
    iters: Option<usize>,
    /// Few iterations, for smoke tests.
    #[arg(long)]
    quick: bool,
}

struct Bench<'a> {
    comm: &'a Communicator,
    args: &'a Args,
    all_ok: bool,
}

impl Bench<'_> {
    fn iters(&self, bytes: usize) -> (usize, usize) {
        let default = (2e8 / bytes.max(1) as f64).clamp(20.0, 2000.0) as usize;
        let iters = self.args.iters.unwrap_or(if self.args.quick { default.min(20) } else { default });
        (self.args.warmup.unwrap_or((iters / 10).max(5)), iters)
    }

    /// Runs `prepare` untimed and `op` timed for each iteration; returns per-iteration
    /// seconds, maxed over ranks.
    fn time<S>(
        &self,
        (warmup, iters): (usize, usize),
        state: &mut S,
        mut prepare: impl FnMut(&mut S),
        mut op: impl FnMut(&mut S) -> heddle::comm::Result<()>,
    ) -> Vec<f64> {
        let mut t = vec![0.0f64; iters];
        self.comm.barrier().expect("barrier");
        for i in 0..warmup + iters {
            prepare(state);
            let s = Instant::now();
            op(state).expect("collective failed");
            if i >= warmup {
                t[i - warmup] = s.elapsed().as_secs_f64();
            }
        }
        self.comm.allreduce(&mut t, Op::Max).expect("allreduce of timings");
        t
    }

    fn report(&mut self, name: &str, bytes: usize, mut t: Vec<f64>, verified: bool, extra: &str) {
        let mut ok = [u8::from(verified)];
        self.comm.allreduce(&mut ok, Op::Min).expect("allreduce of verdicts");
        self.all_ok &= ok[0] == 1;
        if self.comm.rank() != 0 {
            return;
        }
        t.sort_by(f64::total_cmp);
        let pct = |q: f64| t[((t.len() as f64 - 1.0) * q).round() as usize] * 1e6;
        println!(
            "{{\"system\": \"heddle\", \"collective\": \"{name}\", \"ranks\": {}, \"bytes\": {bytes}, \"p50_us\": {:.3}, \"p99_us\": {:.3}, \"iters\": {}, \"verified\": {}{extra}}}",
            self.comm.size(),
            pct(0.5),
            pct(0.99),
            t.len(),
            ok[0] == 1
        );
    }

    fn allreduce(&mut self, bytes: usize) {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let n = (bytes / 8).max(1);
        let mut buf = vec![0.0f64; n];
        let init: Vec<f64> = (0..n).map(|i| (r + 1) as f64 + (i % 7) as f64).collect();
        let t = self.time(self.iters(bytes), &mut buf, |b| b.copy_from_slice(&init), |b| self.comm.allreduce(b, Op::Sum));
        let ok = buf.iter().enumerate().all(|(i, &x)| x == (p * (p + 1) / 2) as f64 + (p * (i % 7)) as f64);
        self.report("allreduce", bytes, t, ok, "");
    }

    fn broadcast(&mut self, bytes: usize) {
        let r = self.comm.rank();
        let expect: Vec<u8> = (0..bytes).map(|i| (i % 251) as u8).collect();
        let mut buf = vec![0u8; bytes];
        let reset = |b: &mut Vec<u8>| if r == 0 { b.copy_from_slice(&expect) } else { b[..bytes.min(16)].fill(0) };
        let t = self.time(self.iters(bytes), &mut buf, reset, |b| self.comm.broadcast(b, 0));
        let ok = buf == expect;
        self.report("broadcast", bytes, t, ok, "");
    }

    fn allgather(&mut self, bytes: usize) {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let send = vec![r as u8 + 1; bytes];
        let mut recv = vec![0u8; bytes * p];
        let t = self.time(self.iters(bytes * p), &mut recv, |_| {}, |out| self.comm.allgather(&send, out));
        let ok = recv.chunks(bytes.max(1)).enumerate().all(|(q, c)| c.iter().all(|&x| x == q as u8 + 1));
        self.report("allgather", bytes, t, ok, "");
    }

    fn alltoall(&mut self, bytes: usize) {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let send: Vec<u8> = (0..p).flat_map(|q| std::iter::repeat((r * p + q) as u8).take(bytes)).collect();
        let mut recv = vec![0u8; bytes * p];
        let t = self.time(self.iters(bytes * p), &mut recv, |_| {}, |out| self.comm.alltoall(&send, out));
        let ok = recv.chunks(bytes.max(1)).enumerate().all(|(q, c)| c.iter().all(|&x| x == (q * p + r) as u8));
        self.report("alltoall", bytes, t, ok, "");
    }

    fn pingpong(&mut self) {
        let r = self.comm.rank();
        let rounds = if self.args.quick { (100, 1000) } else { (1000, 20000) };
        let mut buf = [0u64; 1];
        let mut ok = true;
        let t = self.time(rounds, &mut buf, |_| {}, |buf| {
            match r {
                0 => {
                    self.comm.send(&[42u64], 1, 0)?;
                    self.comm.recv(buf, 1, 0)?;
                }
                1 => {
                    self.comm.recv(buf, 0, 0)?;
                    self.comm.send(&buf[..], 0, 0)?;
                }
                _ => {}
            }
            Ok(())
        });
        if r < 2 {
            ok = buf[0] == 42;
        }
        self.report("pingpong", 8, t.into_iter().map(|x| x / 2.0).collect(), ok, "");
    }

    fn bandwidth(&mut self) {
        const BYTES: usize = 16 << 20;
        const WINDOW: usize = 4;
        let r = self.comm.rank();
        let rounds = if self.args.quick { (2, 5) } else { (5, 40) };
        let data: Vec<u8> = (0..BYTES).map(|i| (i % 253) as u8).collect();
        let mut buf = vec![0u8; BYTES];
        let mut ack = [0u8; 1];
        let t = self.time(rounds, &mut buf, |_| {}, |buf| {
            match r {
                0 => {
                    for _ in 0..WINDOW {
                        self.comm.send(&data, 1, 1)?;
                    }
                    self.comm.recv(&mut ack, 1, 2)?;
                }
                1 => {
                    for _ in 0..WINDOW {
                        self.comm.recv(buf, 0, 1)?;
                    }
                    self.comm.send(&[1u8], 0, 2)?;
                }
                _ => {}
            }
            Ok(())
        });
        let ok = r != 1 || buf == data;
        let per_msg: Vec<f64> = t.into_iter().map(|x| x / WINDOW as f64).collect();
        let mut sorted = per_msg.clone();
        sorted.sort_by(f64::total_cmp);
        let gbps = BYTES as f64 / sorted[sorted.len() / 2] / 1e9;
        self.report("bandwidth", BYTES, per_msg, ok, &format!(", \"gbps\": {gbps:.2}"));
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let start = Instant::now();
    let comm = heddle::init()?;
    let mut b = Bench { comm: &comm, args: &args, all_ok: true };
    for c in &args.collectives {
        match c.as_str() {
            "allreduce" | "broadcast" | "allgather" | "alltoall" => {
                for &bytes in &args.sizes {
                    match c.as_str() {
                        "allreduce" => b.allreduce(bytes),
                        "broadcast" => b.broadcast(bytes),
                        "allgather" => b.allgather(bytes),
                        _ => b.alltoall(bytes),
                    }
                }
            }
            "pingpong" if comm.size() >= 2 => b.pingpong(),
            "bandwidth" if comm.size() >= 2 => b.bandwidth(),
            "pingpong" | "bandwidth" => {}
            other => return Err(format!("unknown measurement {other:?}").into()),
        }
    }
    if comm.rank() == 0 {
        println!(
            "{{\"example\": \"bench_collectives\", \"ok\": {}, \"job_s\": {:.3}, \"ranks\": {}, \"tcp_peers\": {}}}",
            b.all_ok,
            start.elapsed().as_secs_f64(),
            comm.size(),
            comm.tcp_peers()
        );
    }
    if b.all_ok {
        Ok(())
    } else {
        Err("a benchmark result failed verification".into())
    }
}
