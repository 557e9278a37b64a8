//! Checkpoints of streaming jobs, exactly once (Chandy–Lamport, as Flink's asynchronous
//! barrier snapshots):
//!
//! 1. Rank 0 (the coordinator) triggers checkpoint `n` on every worker at an interval.
//! 2. Each source snapshots its position and sends barrier `n` after what it emitted.
//! 3. A task snapshots once barrier `n` has arrived on every input (aligned: an input
//!    past the barrier waits meanwhile), then forwards it; a task that already ended
//!    snapshots its final state at once.
//! 4. The states are written to the state backend (`store`) off the executor, and each
//!    worker acknowledges once all of its tasks' states are written.
//! 5. With every acknowledgement in, rank 0 writes the commit file and tells every
//!    worker: each task's [`crate::Compute::committed`] runs (two-phase sinks publish).
//!
//! When every source has ended a last checkpoint is taken, so a job that finished
//! commits everything it wrote, and a restarted job resumes from its last complete
//! checkpoint: every task gets its state back ([`crate::Compute::restore`]) and sources
//! replay from their positions.

mod coordinator;
mod protocol;
mod store;
mod writer;

use std::path::PathBuf;
use std::time::Duration;

pub(crate) use coordinator::Checkpoints;

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
}

impl Checkpointing {
    /// Checkpoints of job `job` in `dir`, every `interval`.
    pub fn new(dir: impl Into<PathBuf>, job: impl Into<String>, interval: Duration) -> Self {
        Checkpointing { dir: dir.into(), job: job.into(), interval: Some(interval) }
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
}

/// The graph and its placement, one line per item: a checkpoint of another graph is
/// refused, naming the first line that differs.
pub(crate) fn describe(graph: &TaskGraph, plan: &Plan) -> String {
    let mut lines = vec![format!("{} workers", plan.world.len())];
    for (i, v) in graph.vertices.iter().enumerate() {
        lines.push(format!("vertex {i} '{}' x{}", v.name, v.parallelism));
    }
    for (i, e) in graph.edges.iter().enumerate() {
        let name = |v: usize| &graph.vertices[v].name;
        lines.push(format!("edge {i} '{}' -> '{}' ({:?})", name(e.from), name(e.to), e.kind));
    }
    lines.join("\n")
}
