//! Checkpoints of streaming jobs, exactly once (Chandy–Lamport, as Flink's asynchronous
//! barrier snapshots):
//!
//! 1. Rank 0 (the coordinator) triggers checkpoint `n` on every worker at an interval.
//! 2. Each source snapshots its position and sends barrier `n` after what it emitted.
//! 3. A task snapshots once barrier `n` has arrived on every input (aligned: an input
//!    past the barrier waits meanwhile), then forwards it; a task that already ended
//!    snapshots its final state at once. When a checkpoint has been under way longer than
//!    [`Checkpointing::alignment_timeout`] (back-pressure), it goes on unaligned, as
//!    Flink's does: a task snapshots as soon as the barrier arrives on one input and its
//!    barrier overtakes the records in its outboxes; the records it overtook, those its
//!    input queue held and those its other inputs deliver before their barriers are
//!    stored with its state (`inflight.rs`) and given back first on restore.
//! 4. The states are written to the state backend (`store.rs`) off the executor, and each
//!    worker acknowledges once all of its tasks' states are written.
//! 5. With every acknowledgement in, rank 0 writes the commit file and tells every
//!    worker: each task's [`crate::Compute::committed`] runs (two-phase sinks publish).
//!
//! When every source has ended a last checkpoint is taken, so a job that finished
//! commits everything it wrote, and a restarted job resumes from its last complete
//! checkpoint: every task gets its state back ([`crate::Compute::restore`]) and sources
//! replay from their positions.

mod coordinator;
mod inflight;
mod protocol;
mod store;
mod writer;

use std::path::PathBuf;
use std::time::Duration;

pub(crate) use coordinator::{agree_latest, Checkpoints};
pub(crate) use inflight::{Codec, Inflight};
pub(crate) use store::{Commit, Store};

use crate::graph::TaskGraph;
use crate::plan::Plan;

/// Where and how often a streaming job checkpoints.
///
/// ```
/// use std::time::Duration;
/// let c = heddle_task::Checkpointing::new("/tmp/ckpt", "word counts", Duration::from_secs(1));
/// assert_eq!(c.interval, Some(Duration::from_secs(1)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpointing {
    /// The state backend: a directory (shared by the hosts, or each host's own: a
    /// worker reads back only its own tasks' states).
    pub dir: PathBuf,
    /// The job's name: a checkpoint of another job is refused.
    pub job: String,
    /// Time between two checkpoints (`None`: only the last one, when the sources end).
    pub interval: Option<Duration>,
    /// How long a checkpoint aligns its barriers before it goes on unaligned, storing the
    /// records in flight (`None`: always aligned; default
    /// [`Checkpointing::DEFAULT_ALIGNMENT_TIMEOUT`]).
    pub alignment_timeout: Option<Duration>,
}

impl Checkpointing {
    /// The default [`Checkpointing::alignment_timeout`].
    pub const DEFAULT_ALIGNMENT_TIMEOUT: Duration = Duration::from_millis(5);

    /// Checkpoints of job `job` in `dir`, every `interval`, unaligned after the default
    /// alignment timeout.
    pub fn new(dir: impl Into<PathBuf>, job: impl Into<String>, interval: Duration) -> Self {
        Checkpointing {
            dir: dir.into(),
            job: job.into(),
            interval: Some(interval),
            alignment_timeout: Some(Self::DEFAULT_ALIGNMENT_TIMEOUT),
        }
    }

    /// Goes on unaligned once a checkpoint has aligned for `timeout` (`None`: never).
    pub fn with_alignment_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.alignment_timeout = timeout;
        self
    }
}

/// Where and how often a job run in passes ([`crate::Job::iterate_checkpointed`])
/// checkpoints its tasks' states between passes.
///
/// ```
/// let c = heddle_task::LoopCheckpointing::new("/tmp/ckpt", "pagerank", 5);
/// assert_eq!(c.every, 5);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopCheckpointing {
    /// The directory (rank 0 commits there; each worker writes its tasks' states).
    pub dir: PathBuf,
    /// The job's name: a checkpoint of another job is refused.
    pub job: String,
    /// Passes between two checkpoints (at least 1).
    pub every: u64,
}

impl LoopCheckpointing {
    /// Checkpoints of job `job` in `dir`, every `every` passes.
    pub fn new(dir: impl Into<PathBuf>, job: impl Into<String>, every: u64) -> Self {
        LoopCheckpointing { dir: dir.into(), job: job.into(), every }
    }
}

/// What one completed checkpoint took (reported by rank 0).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CheckpointStats {
    /// Its id.
    pub checkpoint: u64,
    /// Milliseconds from the trigger to the last acknowledgement.
    pub duration_ms: f64,
    /// Bytes of state over all tasks.
    pub bytes: u64,
    /// Taken when every source had ended.
    pub last: bool,
    /// Tasks that stored records in flight (the checkpoint went on unaligned).
    pub unaligned_tasks: usize,
}

/// The edges whose operations keep state of their own in streaming mode (a reduction, a
/// keyed reduction or gathering, a sort), which checkpoints cannot cover, described.
pub(crate) fn stateful_edges(graph: &TaskGraph) -> Vec<String> {
    use crate::EdgeKind as K;
    let name = |v: usize| &graph.vertices[v].name;
    graph
        .edges
        .iter()
        .filter(|e| matches!(e.kind, K::Reduce | K::KeyedReduce | K::KeyedGather | K::Sort))
        .map(|e| format!("{} -> {} ({:?})", name(e.from), name(e.to), e.kind))
        .collect()
}

/// The graph and its placement, one line per item: a checkpoint of another graph is
/// refused, naming the first line that differs.
pub(crate) fn describe(graph: &TaskGraph, plan: &Plan) -> String {
    let mut lines = vec![format!("{} workers", plan.world.len())];
    for (i, v) in graph.vertices.iter().enumerate() {
        lines.push(format!("vertex {i}: {} x{}", v.name, v.parallelism));
    }
    for (i, e) in graph.edges.iter().enumerate() {
        let name = |v: usize| &graph.vertices[v].name;
        lines.push(format!("edge {i}: {} -> {} ({:?})", name(e.from), name(e.to), e.kind));
    }
    lines.join("\n")
}
