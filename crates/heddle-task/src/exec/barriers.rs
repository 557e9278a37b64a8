//! What a worker's task instances and its checkpoint coordination share: the checkpoint
//! last triggered (sources inject its barrier) and since when, the last completed (tasks
//! are told, and two-phase sinks commit), and the snapshots taken and not yet written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use heddle_dataflow::TaskId;

use super::inbox::lock;

/// One task's checkpoint: its state (`None`: it keeps none) and the records in flight it
/// stored (`None`: the checkpoint was aligned where it is).
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) checkpoint: u64,
    pub(crate) task: TaskId,
    pub(crate) state: Option<Vec<u8>>,
    pub(crate) inflight: Option<Vec<u8>>,
    /// Why the checkpoint could not be taken here (it fails; the job goes on).
    pub(crate) error: Option<String>,
}

/// Checkpoint progress on one worker, shared by its executor threads.
#[derive(Debug, Default)]
pub(crate) struct Barriers {
    triggered: AtomicU64,
    completed: AtomicU64,
    /// When the checkpoint triggered last was triggered on this worker.
    triggered_at: Mutex<Option<Instant>>,
    /// Alignment longer than this goes on unaligned.
    alignment_timeout: Option<Duration>,
    taken: Mutex<Vec<Taken>>,
}

impl Barriers {
    /// Checkpoint progress, unaligned once a checkpoint is older than `alignment_timeout`.
    pub(crate) fn new(alignment_timeout: Option<Duration>) -> Barriers {
        Barriers { alignment_timeout, ..Barriers::default() }
    }

    /// The last checkpoint triggered on this worker (0: none).
    pub(crate) fn triggered(&self) -> u64 {
        self.triggered.load(Ordering::Acquire)
    }

    /// Checkpoint `id` starts: sources snapshot and inject its barrier.
    pub(crate) fn trigger(&self, id: u64) {
        if self.triggered.fetch_max(id, Ordering::AcqRel) < id {
            *lock(&self.triggered_at) = Some(Instant::now());
        }
    }

    /// Whether the checkpoint under way has aligned longer than the alignment timeout, so
    /// that it goes on unaligned.
    pub(crate) fn overdue(&self) -> bool {
        let Some(timeout) = self.alignment_timeout else { return false };
        self.triggered() > self.completed()
            && lock(&self.triggered_at).is_some_and(|at| at.elapsed() >= timeout)
    }

    /// The last checkpoint completed on every task of the job (0: none).
    pub(crate) fn completed(&self) -> u64 {
        self.completed.load(Ordering::Acquire)
    }

    /// Checkpoint `id` completed.
    pub(crate) fn complete(&self, id: u64) {
        self.completed.fetch_max(id, Ordering::AcqRel);
    }

    /// A task took its snapshot.
    pub(crate) fn push(&self, taken: Taken) {
        lock(&self.taken).push(taken);
    }

    /// The snapshots taken since the last call.
    pub(crate) fn take(&self) -> Vec<Taken> {
        std::mem::take(&mut *lock(&self.taken))
    }
}
