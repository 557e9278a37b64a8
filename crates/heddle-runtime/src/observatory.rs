//! What the launcher knows of the job it runs, for the dashboard, its JSON API and
//! `/metrics`: the job's name, attempt and state, each worker (where it runs, when it was
//! last heard from, its last two metric snapshots, from which rates come) and the tail
//! of the workers' output.
//!
//! A launcher runs one job, so this is one process-wide record ([`global`]): the job
//! master writes what workers report, the output forwarders write lines, and the
//! dashboard reads.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::Instant;

use heddle_comm::metrics::{Snapshot, LATENCY_BUCKETS};
use serde_json::{json, Value};

use crate::control::PeerInfo;

/// Lines of worker output kept for the dashboard, and the bytes kept of each.
const LOG_LINES: usize = 400;
const LOG_LINE_BYTES: usize = 4096;

/// Back-pressure ratios at or below this are OK, and above [`HIGH`] HIGH (as Flink).
const OK: f64 = 0.10;
const HIGH: f64 = 0.50;

/// One worker as the launcher sees it.
#[derive(Debug)]
pub(crate) struct Worker {
    pub(crate) rank: usize,
    pub(crate) host: String,
    pub(crate) pid: u32,
    pub(crate) state: &'static str,
    pub(crate) heard: Instant,
    /// The newest snapshot and the one before, with when they came.
    pub(crate) last: Option<(Instant, Snapshot)>,
    pub(crate) prev: Option<(Instant, Snapshot)>,
}

/// The job as the launcher sees it.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) name: String,
    pub(crate) started: Instant,
    pub(crate) ended: Option<Instant>,
    pub(crate) attempt: u32,
    pub(crate) state: &'static str,
    pub(crate) failure: Option<String>,
    pub(crate) size: usize,
    pub(crate) workers: BTreeMap<usize, Worker>,
    logs: VecDeque<(usize, bool, String)>,
}

/// The launcher's record of its job.
#[derive(Debug)]
pub(crate) struct Observatory(Mutex<State>);

/// This process's record.
pub(crate) fn global() -> &'static Observatory {
    static GLOBAL: OnceLock<Observatory> = OnceLock::new();
    GLOBAL.get_or_init(|| {
        Observatory(Mutex::new(State {
            name: String::new(),
            started: Instant::now(),
            ended: None,
            attempt: 0,
            state: "starting",
            failure: None,
            size: 0,
            workers: BTreeMap::new(),
            logs: VecDeque::new(),
        }))
    })
}

impl Observatory {
    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Job `name` of `size` workers starts.
    pub(crate) fn begin_job(&self, name: &str, size: usize) {
        let mut s = self.lock();
        s.name = name.to_string();
        s.size = size;
        s.started = Instant::now();
    }

    /// Attempt `attempt` starts (its workers join afresh).
    pub(crate) fn begin_attempt(&self, attempt: u32) {
        let mut s = self.lock();
        s.attempt = attempt;
        s.state = "starting";
        s.failure = None;
        s.ended = None;
        s.workers.clear();
    }

    /// Every worker joined: the job runs.
    pub(crate) fn running(&self, peers: &[PeerInfo]) {
        let mut s = self.lock();
        s.state = "running";
        let now = Instant::now();
        for p in peers {
            s.workers.insert(
                p.rank,
                Worker {
                    rank: p.rank,
                    host: p.host.clone(),
                    pid: p.pid,
                    state: "running",
                    heard: now,
                    last: None,
                    prev: None,
                },
            );
        }
    }

    /// Rank `rank` was heard from, with `snapshot` if it sent one.
    pub(crate) fn heard(&self, rank: usize, snapshot: Option<Snapshot>) {
        let now = Instant::now();
        let mut s = self.lock();
        if let Some(w) = s.workers.get_mut(&rank) {
            w.heard = now;
            if let Some(snapshot) = snapshot {
                w.prev = w.last.replace((now, snapshot));
            }
        }
    }

    /// Rank `rank` is now `state` (`exited`, `failed`, `silent`).
    pub(crate) fn worker_state(&self, rank: usize, state: &'static str) {
        if let Some(w) = self.lock().workers.get_mut(&rank) {
            w.state = state;
        }
    }

    /// The job ended: `failure` says why it failed, `None` if it succeeded.
    pub(crate) fn ended(&self, failure: Option<String>) {
        let mut s = self.lock();
        s.state = if failure.is_some() { "failed" } else { "finished" };
        s.failure = failure;
        s.ended = Some(Instant::now());
    }

    /// A line (without its newline) rank `rank` wrote to stdout or (`is_err`) stderr.
    pub(crate) fn log(&self, rank: usize, is_err: bool, line: &[u8]) {
        // The page shows a line's start: a worker printing megabytes a line must not
        // make the launcher keep hundreds of them.
        let line = &line[..line.len().min(LOG_LINE_BYTES)];
        let text = String::from_utf8_lossy(line).trim_end_matches(['\n', '\r']).to_string();
        let mut s = self.lock();
        if s.logs.len() >= LOG_LINES {
            s.logs.pop_front();
        }
        s.logs.push_back((rank, is_err, text));
    }
}

/// Per second between two snapshots' values.
fn rate(now: u64, before: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        return 0.0;
    }
    now.saturating_sub(before) as f64 / seconds
}

impl State {
    /// The graph of the job: the first worker's that has one.
    fn graph(&self) -> Option<&heddle_comm::metrics::Graph> {
        self.workers.values().find_map(|w| w.last.as_ref()?.1.graph.as_ref())
    }

    /// `GET /api/v1/job`.
    pub(crate) fn job(&self) -> Value {
        let until = self.ended.unwrap_or_else(Instant::now);
        let checkpoints = self
            .workers
            .values()
            .filter_map(|w| w.last.as_ref()?.1.checkpoints.clone())
            .max_by_key(|c| c.count)
            .map(|c| {
                json!({"count": c.count, "last_duration_ms": c.last_duration_ms,
                       "last_bytes": c.last_bytes})
            });
        json!({
            "name": self.name,
            "state": self.state,
            "attempt": self.attempt,
            "elapsed_s": until.duration_since(self.started).as_secs_f64(),
            "workers": self.size,
            "failure": self.failure,
            "graph": self.graph(),
            "checkpoints": checkpoints,
        })
    }

    /// `GET /api/v1/tasks`: every task instance's counts and rates, and each edge's
    /// back-pressure over the last interval.
    pub(crate) fn tasks(&self) -> Value {
        let mut tasks = Vec::new();
        // Per edge: samples and blocked samples over the last interval, all workers.
        let mut edges: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
        for w in self.workers.values() {
            let Some((t1, last)) = &w.last else { continue };
            let prev = w.prev.as_ref();
            let seconds = prev.map_or(0.0, |(t0, _)| t1.duration_since(*t0).as_secs_f64());
            for t in &last.tasks {
                let before = prev.and_then(|(_, p)| {
                    p.tasks.iter().find(|b| b.task == t.task && b.index == t.index)
                });
                let b = before.unwrap_or(t);
                tasks.push(json!({
                    "task": t.task, "index": t.index, "worker": t.worker,
                    "records_in": t.records_in, "records_out": t.records_out,
                    "bytes_in": t.bytes_in, "bytes_out": t.bytes_out,
                    "records_in_per_s": rate(t.records_in, b.records_in, seconds),
                    "records_out_per_s": rate(t.records_out, b.records_out, seconds),
                    "bytes_in_per_s": rate(t.bytes_in, b.bytes_in, seconds),
                    "bytes_out_per_s": rate(t.bytes_out, b.bytes_out, seconds),
                }));
            }
            for e in &last.edges {
                let before = prev.and_then(|(_, p)| p.edges.iter().find(|b| b.edge == e.edge));
                let (s0, b0) = before.map_or((0, 0), |b| (b.samples, b.blocked));
                let sum = edges.entry(e.edge.as_str()).or_default();
                sum.0 += e.samples.saturating_sub(s0);
                sum.1 += e.blocked.saturating_sub(b0);
            }
        }
        let edges: Vec<Value> = edges
            .into_iter()
            .map(|(edge, (samples, blocked))| {
                let ratio = if samples == 0 { 0.0 } else { blocked as f64 / samples as f64 };
                json!({"edge": edge, "backpressure_ratio": ratio, "level": level(ratio)})
            })
            .collect();
        json!({"tasks": tasks, "edges": edges})
    }

    /// `GET /api/v1/workers`.
    pub(crate) fn workers(&self) -> Value {
        let workers: Vec<Value> = self
            .workers
            .values()
            .map(|w| {
                let (cpu, rss) = match (&w.last, &w.prev) {
                    (Some((t1, l)), Some((t0, p))) => {
                        let s = t1.duration_since(*t0).as_secs_f64();
                        let cpu = if s > 0.0 { (l.cpu_seconds - p.cpu_seconds) / s } else { 0.0 };
                        (cpu * 100.0, l.resident_bytes)
                    }
                    (Some((_, l)), None) => (0.0, l.resident_bytes),
                    _ => (0.0, 0),
                };
                json!({
                    "rank": w.rank, "host": w.host, "pid": w.pid, "state": w.state,
                    "cpu_percent": cpu.max(0.0), "rss_bytes": rss,
                    "heartbeat_age_s": w.heard.elapsed().as_secs_f64(),
                })
            })
            .collect();
        json!({"workers": workers})
    }

    /// Every worker's collective samples summed by operation and algorithm.
    pub(crate) fn collective_totals(&self) -> Vec<heddle_comm::metrics::CollectiveSample> {
        let mut all: BTreeMap<(String, String), heddle_comm::metrics::CollectiveSample> =
            BTreeMap::new();
        for w in self.workers.values() {
            let Some((_, last)) = &w.last else { continue };
            for c in &last.collectives {
                let sum =
                    all.entry((c.operation.clone(), c.algorithm.clone())).or_insert_with(|| {
                        heddle_comm::metrics::CollectiveSample {
                            operation: c.operation.clone(),
                            algorithm: c.algorithm.clone(),
                            buckets: vec![0; c.buckets.len()],
                            ..Default::default()
                        }
                    });
                sum.calls += c.calls;
                sum.bytes += c.bytes;
                sum.seconds += c.seconds;
                for (s, b) in sum.buckets.iter_mut().zip(&c.buckets) {
                    *s += b;
                }
            }
        }
        all.into_values().collect()
    }

    /// `GET /api/v1/collectives`.
    pub(crate) fn collectives(&self) -> Value {
        let rows: Vec<Value> = self
            .collective_totals()
            .iter()
            .map(|c| {
                json!({
                    "operation": c.operation, "algorithm": c.algorithm,
                    "calls": c.calls, "bytes": c.bytes,
                    "p50_ms": quantile(&c.buckets, 0.5) * 1e3,
                    "p99_ms": quantile(&c.buckets, 0.99) * 1e3,
                })
            })
            .collect();
        json!({"collectives": rows})
    }

    /// `GET /api/v1/logs`.
    pub(crate) fn logs(&self) -> Value {
        let lines: Vec<Value> = self
            .logs
            .iter()
            .map(|(rank, is_err, line)| {
                json!({"rank": rank, "stream": if *is_err { "stderr" } else { "stdout" },
                       "line": line})
            })
            .collect();
        json!({"lines": lines})
    }
}

/// How far the newest stage is, over every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StageProgress {
    /// Its number and name.
    pub(crate) stage: u64,
    pub(crate) name: String,
    /// Bytes its file sources read, when every worker's sources read files (else records
    /// its sources gave out).
    pub(crate) bytes: bool,
    /// Done so far, and in all (`None`: unknown).
    pub(crate) done: u64,
    pub(crate) total: Option<u64>,
}

impl State {
    /// The newest stage any worker runs: what its sources did on every worker at that
    /// stage, of how much in all (known once every worker has said).
    pub(crate) fn progress(&self) -> Option<StageProgress> {
        let samples: Vec<&heddle_comm::metrics::ProgressSample> =
            self.workers.values().filter_map(|w| w.last.as_ref()?.1.progress.as_ref()).collect();
        let newest = samples.iter().max_by_key(|p| p.stage)?;
        let at: Vec<_> = samples.iter().filter(|p| p.stage == newest.stage).collect();
        let everyone = at.len() == self.workers.len();
        let records: Option<u64> = at.iter().map(|p| p.total).sum();
        let bytes: Option<u64> = at.iter().map(|p| p.bytes_total).sum();
        let (bytes, done, total) = match (records, bytes) {
            (None, Some(total)) => (true, at.iter().map(|p| p.bytes_done).sum(), Some(total)),
            (records, _) => (false, at.iter().map(|p| p.done).sum(), records),
        };
        // Every worker must have said, or the total is not known yet.
        let total = total.filter(|_| everyone);
        Some(StageProgress { stage: newest.stage, name: newest.name.clone(), bytes, done, total })
    }
}

/// Flink's back-pressure levels.
fn level(ratio: f64) -> &'static str {
    if ratio <= OK {
        "OK"
    } else if ratio <= HIGH {
        "LOW"
    } else {
        "HIGH"
    }
}

/// The upper bound (seconds) of the bucket holding quantile `q` of a latency histogram
/// ([`LATENCY_BUCKETS`], then `+Inf`, given as the last bound); 0 when empty.
pub(crate) fn quantile(buckets: &[u64], q: f64) -> f64 {
    let total: u64 = buckets.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let want = (q * total as f64).ceil().max(1.0) as u64;
    let mut seen = 0;
    for (i, n) in buckets.iter().enumerate() {
        seen += n;
        if seen >= want {
            return LATENCY_BUCKETS
                .get(i)
                .copied()
                .unwrap_or(LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1]);
        }
    }
    LATENCY_BUCKETS[LATENCY_BUCKETS.len() - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_bounds() {
        let mut b = vec![0; LATENCY_BUCKETS.len() + 1];
        b[2] = 98; // ≤ 10 µs
        b[6] = 2; // ≤ 1 ms
        assert_eq!(quantile(&b, 0.5), 1e-5);
        assert_eq!(quantile(&b, 0.99), 1e-3);
        assert_eq!(quantile(&[0; 3], 0.5), 0.0);
    }

    #[test]
    fn levels_follow_flink() {
        assert_eq!((level(0.05), level(0.3), level(0.9)), ("OK", "LOW", "HIGH"));
    }
}
