//! What this worker process has done so far, for the job master's dashboard and its
//! Prometheus endpoint: the task graph it runs, each task instance's records in and out,
//! how long the senders of each dataflow edge waited for credit, every collective's
//! calls, bytes and latency, the bytes each transport sent, and the process's CPU time
//! and memory.
//!
//! Counters are process-wide and only grow; [`snapshot`] reads them all. The worker's
//! heartbeat thread sends a snapshot to the master every interval, where rates are the
//! differences of two snapshots.
//!
//! ```
//! use heddle_comm::metrics;
//! let t = metrics::task("map", 0, 0);
//! t.add_in(10);
//! t.add_out(7);
//! let s = metrics::snapshot();
//! let m = s.tasks.iter().find(|t| t.task == "map").unwrap();
//! assert!(m.records_in >= 10 && m.records_out >= 7);
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde::{Deserialize, Serialize};

mod progress;

pub use progress::{bytes_read, expect_bytes, expect_records, records_done, ProgressSample};

/// Upper bounds (seconds) of the collective latency histogram's buckets; the last bucket,
/// above them all, is `+Inf`.
pub const LATENCY_BUCKETS: [f64; 14] =
    [1e-6, 5e-6, 1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 1e-2, 5e-2, 0.1, 0.5, 1.0, 5.0];

/// One task instance's live counters.
#[derive(Debug, Default)]
pub struct TaskCounters {
    records_in: AtomicU64,
    records_out: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
}

impl TaskCounters {
    /// `n` more records taken in (executed by a compute task).
    pub fn add_in(&self, n: u64) {
        self.records_in.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more records given out (emitted).
    pub fn add_out(&self, n: u64) {
        self.records_out.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more serialized bytes taken from the task's input edges.
    pub fn add_bytes_in(&self, n: u64) {
        self.bytes_in.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more serialized bytes sent on the task's output edges.
    pub fn add_bytes_out(&self, n: u64) {
        self.bytes_out.fetch_add(n, Ordering::Relaxed);
    }
}

/// One dataflow edge's senders on this worker: sampled as waiting for credit or not.
#[derive(Debug, Default)]
pub struct EdgeCounters {
    /// Senders of the edge with records they cannot hand on now.
    waiting: AtomicU64,
    samples: AtomicU64,
    blocked_samples: AtomicU64,
}

impl EdgeCounters {
    /// A sender of the edge starts (`true`) or stops (`false`) waiting for room; `was`
    /// is the sender's own flag.
    pub fn set_waiting(&self, waiting: bool, was: &mut bool) {
        if std::mem::replace(was, waiting) != waiting {
            if waiting {
                self.waiting.fetch_add(1, Ordering::Relaxed);
            } else {
                self.waiting.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A vertex of the task graph a worker runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Vertex {
    /// The vertex's name.
    pub name: String,
    /// Its task instances.
    pub parallelism: u32,
}

/// An edge of the task graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphEdge {
    /// The sending vertex.
    pub from: String,
    /// The receiving vertex.
    pub to: String,
    /// How records move (`direct`, `partition`, `broadcast`, ...).
    pub operation: String,
}

/// The task graph of the job a worker runs now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Graph {
    /// Its vertices.
    pub vertices: Vec<Vertex>,
    /// Its edges.
    pub edges: Vec<GraphEdge>,
}

/// One task instance's counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSample {
    /// The vertex's name.
    pub task: String,
    /// The instance's index.
    pub index: u32,
    /// The worker (world rank) running it.
    pub worker: usize,
    /// Records taken in so far.
    pub records_in: u64,
    /// Records given out so far.
    pub records_out: u64,
    /// Serialized bytes taken from input edges so far (chained edges move records
    /// without serializing them and count none).
    #[serde(default)]
    pub bytes_in: u64,
    /// Serialized bytes sent on output edges so far.
    #[serde(default)]
    pub bytes_out: u64,
}

/// One edge's back-pressure samples on this worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeSample {
    /// `FROM -> TO`.
    pub edge: String,
    /// Samples taken.
    pub samples: u64,
    /// Samples that found a sender waiting for credit.
    pub blocked: u64,
}

/// One collective operation and algorithm's calls.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CollectiveSample {
    /// The operation (`allreduce`, ...).
    pub operation: String,
    /// The algorithm that ran.
    pub algorithm: String,
    /// Calls.
    pub calls: u64,
    /// Bytes of the calls' buffers.
    pub bytes: u64,
    /// Seconds in all calls.
    pub seconds: f64,
    /// Calls per latency bucket ([`LATENCY_BUCKETS`], then `+Inf`), not cumulative.
    pub buckets: Vec<u64>,
}

/// Everything a worker reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The graph of the job running now, once one started.
    pub graph: Option<Graph>,
    /// Task instances.
    pub tasks: Vec<TaskSample>,
    /// Dataflow edges' back-pressure.
    pub edges: Vec<EdgeSample>,
    /// Collectives by operation and algorithm.
    pub collectives: Vec<CollectiveSample>,
    /// Bytes sent per transport (`shm`, `tcp`, `mpi`, `local`).
    pub bytes_sent: BTreeMap<String, u64>,
    /// CPU seconds (user and system) this process used.
    pub cpu_seconds: f64,
    /// Resident memory, bytes.
    pub resident_bytes: u64,
    /// Checkpoints this worker saw complete (rank 0: all of the job's), with the last's
    /// duration (ms) and size.
    pub checkpoints: Option<CheckpointSample>,
    /// The stage running now, once one started.
    pub progress: Option<ProgressSample>,
}

/// Completed checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointSample {
    /// How many completed.
    pub count: u64,
    /// Durations (seconds) per latency bucket ([`LATENCY_BUCKETS`], then `+Inf`).
    pub buckets: Vec<u64>,
    /// Seconds of all.
    pub seconds: f64,
    /// The last one's duration, ms.
    pub last_duration_ms: f64,
    /// The last one's size, bytes.
    pub last_bytes: u64,
}

#[derive(Default)]
struct Registry {
    graph: Mutex<Option<Graph>>,
    tasks: Mutex<Vec<(String, u32, usize, Arc<TaskCounters>)>>,
    edges: Mutex<BTreeMap<String, Arc<EdgeCounters>>>,
    collectives: Mutex<BTreeMap<(&'static str, &'static str), CollectiveSample>>,
    bytes_sent: Mutex<BTreeMap<&'static str, Arc<AtomicU64>>>,
    checkpoints: Mutex<Option<CheckpointSample>>,
    /// The batch stage running now.
    stage: progress::Stage,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The variable that turns counting off in a worker: `HEDDLE_METRICS=off` (or `0`,
/// `false`, `no`). The dashboard then shows the workers (CPU, memory, heartbeats, logs)
/// but no graph, tasks, edges, collectives or transports.
pub const METRICS_ENV: &str = "HEDDLE_METRICS";

/// Whether this process counts (read once from [`METRICS_ENV`]; on unless turned off).
///
/// ```
/// // On unless HEDDLE_METRICS says otherwise.
/// assert_eq!(heddle_comm::metrics::enabled(), std::env::var("HEDDLE_METRICS").is_err());
/// ```
pub fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let value = std::env::var(METRICS_ENV).unwrap_or_default();
        switch(&value).unwrap_or_else(|| {
            tracing::warn!("{METRICS_ENV}={value:?} is neither on nor off: metrics stay on");
            true
        })
    })
}

/// A value of [`METRICS_ENV`]: `Some(true)` for on (also empty, `1`, `true`, `yes`),
/// `Some(false)` for off (`0`, `false`, `no`), `None` for anything else.
///
/// ```
/// use heddle_comm::metrics::switch;
/// assert_eq!((switch("off"), switch("ON"), switch("maybe")), (Some(false), Some(true), None));
/// ```
pub fn switch(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "" | "on" | "1" | "true" | "yes" => Some(true),
        "off" | "0" | "false" | "no" => Some(false),
        _ => None,
    }
}

/// The job now running on this worker has `graph`: a new stage starts.
pub fn set_graph(graph: Graph) {
    if !enabled() {
        return;
    }
    let r = registry();
    let name: Vec<&str> = graph.vertices.iter().map(|v| v.name.as_str()).collect();
    r.stage.start(name.join(" → "));
    *lock(&r.graph) = Some(graph);
}

/// The counters of instance `index` of vertex `task` on `worker` (new ones each call:
/// a task of a later job counts afresh).
pub fn task(task: &str, index: u32, worker: usize) -> Arc<TaskCounters> {
    let counters = Arc::new(TaskCounters::default());
    let mut tasks = lock(&registry().tasks);
    tasks.retain(|(t, i, w, _)| !(t == task && *i == index && *w == worker));
    tasks.push((task.to_string(), index, worker, counters.clone()));
    counters
}

/// The back-pressure counters of edge `name` (`FROM -> TO`), shared by its senders on
/// this worker; starts the sampler thread the first time.
pub fn edge(name: &str) -> Arc<EdgeCounters> {
    start_sampler();
    lock(&registry().edges).entry(name.to_string()).or_default().clone()
}

/// The counter of bytes sent over `transport`.
pub fn bytes_sent(transport: &'static str) -> Arc<AtomicU64> {
    lock(&registry().bytes_sent).entry(transport).or_default().clone()
}

/// The bucket of `seconds` in [`LATENCY_BUCKETS`] (the last, `+Inf`, when above all).
fn bucket(seconds: f64) -> usize {
    LATENCY_BUCKETS.iter().position(|&b| seconds <= b).unwrap_or(LATENCY_BUCKETS.len())
}

/// A collective call ended.
pub fn collective(operation: &'static str, algorithm: &'static str, bytes: u64, took: Duration) {
    if !enabled() {
        return;
    }
    let seconds = took.as_secs_f64();
    let mut all = lock(&registry().collectives);
    let c = all.entry((operation, algorithm)).or_insert_with(|| CollectiveSample {
        operation: operation.into(),
        algorithm: algorithm.into(),
        buckets: vec![0; LATENCY_BUCKETS.len() + 1],
        ..CollectiveSample::default()
    });
    c.calls += 1;
    c.bytes += bytes;
    c.seconds += seconds;
    c.buckets[bucket(seconds)] += 1;
}

/// A checkpoint of the job completed, taking `took`, `bytes` in size.
pub fn checkpoint(took: Duration, bytes: u64) {
    if !enabled() {
        return;
    }
    let seconds = took.as_secs_f64();
    let mut c = lock(&registry().checkpoints);
    let c = c.get_or_insert_with(|| CheckpointSample {
        buckets: vec![0; LATENCY_BUCKETS.len() + 1],
        ..CheckpointSample::default()
    });
    c.count += 1;
    c.seconds += seconds;
    c.buckets[bucket(seconds)] += 1;
    c.last_duration_ms = seconds * 1e3;
    c.last_bytes = bytes;
}

/// How often the sampler looks at the edges' senders: each look counts as one sample per
/// `SAMPLE_EVERY` it covers. While no sender is held back the looks grow rarer, up to
/// `SAMPLE_AT_MOST` apart, so that an idle worker is not woken a hundred times a second.
const SAMPLE_EVERY: Duration = Duration::from_millis(10);
const SAMPLE_AT_MOST: Duration = Duration::from_millis(160);

fn start_sampler() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let sampler = || {
            let mut every = SAMPLE_EVERY;
            loop {
                std::thread::sleep(every);
                let weight = (every.as_millis() / SAMPLE_EVERY.as_millis()) as u64;
                let mut held = false;
                for e in lock(&registry().edges).values() {
                    e.samples.fetch_add(weight, Ordering::Relaxed);
                    if e.waiting.load(Ordering::Relaxed) > 0 {
                        e.blocked_samples.fetch_add(weight, Ordering::Relaxed);
                        held = true;
                    }
                }
                every = if held { SAMPLE_EVERY } else { (every * 2).min(SAMPLE_AT_MOST) };
            }
        };
        let spawned = std::thread::Builder::new().name("heddle-metrics".into()).spawn(sampler);
        if let Err(e) = spawned {
            tracing::warn!("no back-pressure sampling: cannot start its thread: {e}");
        }
    });
}

/// Everything counted so far in this process.
pub fn snapshot() -> Snapshot {
    let r = registry();
    let (cpu_seconds, resident_bytes) = process_usage();
    Snapshot {
        graph: lock(&r.graph).clone(),
        tasks: lock(&r.tasks)
            .iter()
            .map(|(task, index, worker, c)| TaskSample {
                task: task.clone(),
                index: *index,
                worker: *worker,
                records_in: c.records_in.load(Ordering::Relaxed),
                records_out: c.records_out.load(Ordering::Relaxed),
                bytes_in: c.bytes_in.load(Ordering::Relaxed),
                bytes_out: c.bytes_out.load(Ordering::Relaxed),
            })
            .collect(),
        edges: lock(&r.edges)
            .iter()
            .map(|(name, e)| EdgeSample {
                edge: name.clone(),
                samples: e.samples.load(Ordering::Relaxed),
                blocked: e.blocked_samples.load(Ordering::Relaxed),
            })
            .collect(),
        collectives: lock(&r.collectives).values().cloned().collect(),
        bytes_sent: lock(&r.bytes_sent)
            .iter()
            .map(|(k, v)| (k.to_string(), v.load(Ordering::Relaxed)))
            .collect(),
        cpu_seconds,
        resident_bytes,
        checkpoints: lock(&r.checkpoints).clone(),
        progress: r.stage.sample(),
    }
}

/// This process's CPU seconds (user + system) and resident bytes, from `/proc/self`
/// (zeros where it cannot be read).
fn process_usage() -> (f64, u64) {
    // SAFETY: sysconf has no preconditions.
    let (ticks, page) =
        unsafe { (libc::sysconf(libc::_SC_CLK_TCK), libc::sysconf(libc::_SC_PAGESIZE)) };
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) in parentheses.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of stat(5), 11 and 12 after the name.
    let cpu = (field(11) + field(12)) as f64 / ticks.max(1) as f64;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages = statm.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()).unwrap_or(0);
    (cpu, pages * page.max(0) as u64)
}

#[cfg(test)]
mod tests;
