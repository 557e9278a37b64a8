//! Heddle's side of `heddle bench collectives --vs mpi`: allreduce (f64 sum), broadcast,
//! allgather and alltoall at each size, 8-byte ping-pong latency and 16 MiB bandwidth.
//! The measurement is specified in the docstring of `benches/mpi/bench_collectives.py`
//! (the MPI side); this file implements the same iterations, timing, percentiles,
//! verification and JSON lines. Rank 0 prints one JSON line per measurement, then the
//! usual example summary line.
//!
//! `heddle run -n 2 -- target/release/examples/bench_collectives --quick`

use std::time::Instant;

use clap::Parser;
use heddle::{Communicator, Op, Request};

const PINGPONG_BYTES: usize = 8;
const BANDWIDTH_BYTES: usize = 16 << 20;
const WINDOW: usize = 8;

#[derive(Debug, Parser)]
struct Args {
    /// Message sizes in bytes (per rank; per peer for alltoall).
    #[arg(long, value_delimiter = ',', default_value = "8,1024,65536,1048576,16777216")]
    sizes: Vec<usize>,
    /// Which measurements to run, in this order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "allreduce,iallreduce,scan,broadcast,allgather,alltoall,ring,pingpong,bandwidth"
    )]
    collectives: Vec<String>,
    /// Untimed iterations before the timed ones (default: clamp(iters/10, 2, 100)).
    #[arg(long)]
    warmup: Option<usize>,
    /// Timed iterations (default: clamp(2e8/bytes, 20, 2000)).
    #[arg(long)]
    iters: Option<usize>,
    /// Ten times fewer iterations, for smoke tests.
    #[arg(long)]
    quick: bool,
}

type CommResult = heddle::comm::Result<()>;

struct Bench<'a> {
    comm: &'a Communicator,
    args: &'a Args,
    all_ok: bool,
}

impl Bench<'_> {
    /// (warmup, iters) for a measurement moving `bytes`.
    fn rounds(&self, bytes: usize) -> (usize, usize) {
        let b = bytes.max(1) as f64;
        let iters = self.args.iters.unwrap_or(if self.args.quick {
            (2e7 / b).floor().clamp(5.0, 200.0) as usize
        } else {
            (2e8 / b).floor().clamp(20.0, 2000.0) as usize
        });
        (self.args.warmup.unwrap_or((iters / 10).clamp(2, 100)), iters)
    }

    /// Barrier, warm-up, barrier, then `iters` timed runs of `op`; returns per-iteration
    /// seconds, maxed over the ranks for which `counts` holds.
    fn time<S>(
        &self,
        bytes: usize,
        state: &mut S,
        counts: bool,
        mut op: impl FnMut(&mut S) -> CommResult,
    ) -> heddle::comm::Result<Vec<f64>> {
        let (warmup, iters) = self.rounds(bytes);
        self.comm.barrier()?;
        for _ in 0..warmup {
            op(state)?;
        }
        self.comm.barrier()?;
        let mut t = vec![0.0f64; iters];
        for slot in t.iter_mut() {
            let s = Instant::now();
            op(state)?;
            *slot = s.elapsed().as_secs_f64();
        }
        if !counts {
            t.fill(0.0);
        }
        self.comm.allreduce(&mut t, Op::Max)?;
        Ok(t)
    }

    fn report(
        &mut self,
        name: &str,
        bytes: usize,
        mut t: Vec<f64>,
        verified: bool,
        gbps: bool,
    ) -> CommResult {
        let mut ok = [u8::from(verified)];
        self.comm.allreduce(&mut ok, Op::Min)?;
        self.all_ok &= ok[0] == 1;
        if self.comm.rank() != 0 {
            return Ok(());
        }
        t.sort_by(f64::total_cmp);
        let pct = |q: f64| t[((q * t.len() as f64).ceil() as usize).max(1) - 1] * 1e6;
        let extra = if gbps {
            format!(", \"gbps\": {:.3}", bytes as f64 / (pct(0.5) * 1e3))
        } else {
            String::new()
        };
        println!(
            "{{\"system\": \"heddle\", \"collective\": \"{name}\", \"ranks\": {}, \
             \"bytes\": {bytes}, \"p50_us\": {:.3}, \"p99_us\": {:.3}, \"iters\": {}, \
             \"verified\": {}{extra}}}",
            self.comm.size(),
            pct(0.5),
            pct(0.99),
            t.len(),
            ok[0] == 1
        );
        Ok(())
    }

    fn allreduce(&mut self, bytes: usize) -> CommResult {
        let p = self.comm.size();
        let want = |i: usize| (p * (p + 1) / 2 + p * (i % 7)) as f64;
        self.reduction("allreduce", bytes, |c, b| c.allreduce(b, Op::Sum), want)
    }

    /// The non-blocking allreduce, waited for at once: the cost of its schedule.
    fn iallreduce(&mut self, bytes: usize) -> CommResult {
        let p = self.comm.size();
        let want = |i: usize| (p * (p + 1) / 2 + p * (i % 7)) as f64;
        let call = |c: &Communicator, b: &mut Vec<f64>| -> CommResult {
            *b = c.iallreduce(std::mem::take(b), Op::Sum)?.wait()?;
            Ok(())
        };
        self.reduction("iallreduce", bytes, call, want)
    }

    fn scan(&mut self, bytes: usize) -> CommResult {
        let r = self.comm.rank();
        // Ranks 0..=r each add q + 1 + i % 7.
        let want = |i: usize| ((r + 1) * (r + 2) / 2 + (r + 1) * (i % 7)) as f64;
        self.reduction("scan", bytes, |c, b| c.scan(b, Op::Sum), want)
    }

    /// Times `call`, an in-place sum of `r + 1 + i % 7` (element i on rank r), and checks
    /// element i of the result against `want(i)`.
    fn reduction(
        &mut self,
        name: &str,
        bytes: usize,
        call: impl Fn(&Communicator, &mut Vec<f64>) -> CommResult,
        want: impl Fn(usize) -> f64,
    ) -> CommResult {
        let r = self.comm.rank();
        let n = (bytes / 8).max(1);
        let input: Vec<f64> = (0..n).map(|i| (r + 1 + i % 7) as f64).collect();
        // Only an in-place API: restore the input before each run (untimed, as the spec allows).
        let mut buf = input.clone();
        let (warmup, iters) = self.rounds(n * 8);
        self.comm.barrier()?;
        for _ in 0..warmup {
            buf.copy_from_slice(&input);
            call(self.comm, &mut buf)?;
        }
        self.comm.barrier()?;
        let mut t = vec![0.0f64; iters];
        for slot in t.iter_mut() {
            buf.copy_from_slice(&input);
            let s = Instant::now();
            call(self.comm, &mut buf)?;
            *slot = s.elapsed().as_secs_f64();
        }
        self.comm.allreduce(&mut t, Op::Max)?;
        buf.copy_from_slice(&input);
        call(self.comm, &mut buf)?;
        let ok = buf.iter().enumerate().all(|(i, &x)| x == want(i));
        self.report(name, n * 8, t, ok, false)
    }

    fn broadcast(&mut self, bytes: usize) -> CommResult {
        let r = self.comm.rank();
        let content: Vec<u8> = (0..bytes).map(|i| ((i * 7 + 1) % 251) as u8).collect();
        let mut buf = if r == 0 { content.clone() } else { vec![0u8; bytes] };
        let t = self.time(bytes, &mut buf, true, |b| self.comm.broadcast(b, 0))?;
        if r != 0 {
            buf.fill(0);
        }
        self.comm.broadcast(&mut buf, 0)?;
        self.report("broadcast", bytes, t, buf == content, false)
    }

    fn allgather(&mut self, bytes: usize) -> CommResult {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let block = |q: usize| -> Vec<u8> {
            (0..bytes).map(|i| ((i * 7 + q * 13 + 1) % 251) as u8).collect()
        };
        let send = block(r);
        let mut recv = vec![0u8; bytes * p];
        let t = self.time(bytes, &mut recv, true, |out| self.comm.allgather(&send, out))?;
        recv.fill(0);
        self.comm.allgather(&send, &mut recv)?;
        let ok = (0..p).all(|q| recv[q * bytes..(q + 1) * bytes] == block(q));
        self.report("allgather", bytes, t, ok, false)
    }

    fn alltoall(&mut self, bytes: usize) -> CommResult {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let block = |s: usize, d: usize| -> Vec<u8> {
            (0..bytes).map(|i| ((s * 31 + d * 17 + i) % 251) as u8).collect()
        };
        let send: Vec<u8> = (0..p).flat_map(|d| block(r, d)).collect();
        let mut recv = vec![0u8; bytes * p];
        let t = self.time(bytes, &mut recv, true, |out| self.comm.alltoall(&send, out))?;
        recv.fill(0);
        self.comm.alltoall(&send, &mut recv)?;
        let ok = (0..p).all(|s| recv[s * bytes..(s + 1) * bytes] == block(s, r));
        self.report("alltoall", bytes, t, ok, false)
    }

    fn ring(&mut self, bytes: usize) -> CommResult {
        let (p, r) = (self.comm.size(), self.comm.rank());
        let (right, left) = ((r + 1) % p, (r + p - 1) % p);
        let pattern =
            |rank: usize| -> Vec<u8> { (0..bytes).map(|i| ((i * 7 + rank) % 251) as u8).collect() };
        let mut bufs = Some((pattern(r), vec![0u8; bytes]));
        let once = |st: &mut Option<(Vec<u8>, Vec<u8>)>| -> CommResult {
            let (send, recv) = st.take().expect("the buffers come back after each round");
            let mut s = self.comm.isend(send, right, 3)?;
            let mut q = self.comm.irecv(recv, Some(left), Some(3))?;
            Request::wait_all(&mut [&mut q, &mut s])?;
            *st = Some((s.into_buffer()?, q.into_buffer()?));
            Ok(())
        };
        let t = self.time(bytes, &mut bufs, true, once)?;
        if let Some((_, recv)) = bufs.as_mut() {
            recv.fill(0);
        }
        once(&mut bufs)?;
        let ok = bufs.is_some_and(|(_, recv)| recv == pattern(left));
        self.report("ring", bytes, t, ok, false)
    }

    fn pingpong_once(
        &self,
        msg: &[u8; PINGPONG_BYTES],
        buf: &mut [u8; PINGPONG_BYTES],
    ) -> CommResult {
        match self.comm.rank() {
            0 => {
                self.comm.send(msg, 1, 0)?;
                self.comm.recv(buf, 1, 0).map(drop)
            }
            1 => {
                self.comm.recv(buf, 0, 0)?;
                self.comm.send(&buf[..], 0, 0)
            }
            _ => Ok(()),
        }
    }

    fn pingpong(&mut self) -> CommResult {
        let r = self.comm.rank();
        let msg: [u8; PINGPONG_BYTES] = std::array::from_fn(|i| ((i * 7 + 1) % 251) as u8);
        let mut buf = [0u8; PINGPONG_BYTES];
        let t = self.time(PINGPONG_BYTES, &mut buf, r == 0, |b| self.pingpong_once(&msg, b))?;
        buf = [0; PINGPONG_BYTES];
        self.pingpong_once(&msg, &mut buf)?;
        let ok = r > 1 || buf == msg;
        self.report("pingpong", PINGPONG_BYTES, t.into_iter().map(|x| x / 2.0).collect(), ok, false)
    }

    fn bandwidth_once(&self, data: &[u8], buf: &mut [u8]) -> CommResult {
        let mut ack = [0u8; 1];
        match self.comm.rank() {
            0 => {
                for _ in 0..WINDOW {
                    self.comm.send(data, 1, 1)?;
                }
                self.comm.recv(&mut ack, 1, 2).map(drop)
            }
            1 => {
                for _ in 0..WINDOW {
                    self.comm.recv(buf, 0, 1)?;
                }
                self.comm.send(&[1u8], 0, 2)
            }
            _ => Ok(()),
        }
    }

    fn bandwidth(&mut self) -> CommResult {
        let r = self.comm.rank();
        let data: Vec<u8> = (0..BANDWIDTH_BYTES).map(|i| ((i * 7 + 1) % 251) as u8).collect();
        let mut buf = vec![0u8; if r == 1 { BANDWIDTH_BYTES } else { 0 }];
        let t = self
            .time(WINDOW * BANDWIDTH_BYTES, &mut buf, r == 0, |b| self.bandwidth_once(&data, b))?;
        buf.fill(0);
        self.bandwidth_once(&data, &mut buf)?;
        let ok = r != 1 || buf == data;
        self.report(
            "bandwidth",
            BANDWIDTH_BYTES,
            t.into_iter().map(|x| x / WINDOW as f64).collect(),
            ok,
            true,
        )
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
            "allreduce" | "iallreduce" | "scan" | "broadcast" | "allgather" | "alltoall"
            | "ring" => {
                for &bytes in &args.sizes {
                    match c.as_str() {
                        "allreduce" => b.allreduce(bytes)?,
                        "iallreduce" => b.iallreduce(bytes)?,
                        "scan" => b.scan(bytes)?,
                        "broadcast" => b.broadcast(bytes)?,
                        "allgather" => b.allgather(bytes)?,
                        "ring" => b.ring(bytes)?,
                        _ => b.alltoall(bytes)?,
                    }
                }
            }
            "pingpong" if comm.size() >= 2 => b.pingpong()?,
            "bandwidth" if comm.size() >= 2 => b.bandwidth()?,
            "pingpong" | "bandwidth" => {}
            other => return Err(format!("unknown measurement {other:?}").into()),
        }
    }
    if comm.rank() == 0 {
        println!(
            "{{\"example\": \"bench_collectives\", \"ok\": {}, \"job_s\": {:.3}, \"ranks\": {}, \
             \"tcp_peers\": {}}}",
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
