//! What a worker's task instances and its checkpoint coordination share: the checkpoint
//! last triggered (sources inject its barrier), the last completed (tasks are told, and
//! two-phase sinks commit), and the snapshots taken and not yet written.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use heddle_dataflow::TaskId;

use super::inbox::lock;

/// One task's state at one checkpoint (`None`: the task keeps none).
#[derive(Debug)]
pub(crate) struct Taken {
    pub(crate) checkpoint: u64,
    pub(crate) task: TaskId,
    pub(crate) state: Option<Vec<u8>>,
}

/// Checkpoint progress on one worker, shared by its executor threads.
#[derive(Debug, Default)]
pub(crate) struct Barriers {
    triggered: AtomicU64,
    completed: AtomicU64,
    taken: Mutex<Vec<Taken>>,
}

impl Barriers {
    /// The last checkpoint triggered on this worker (0: none).
    pub(crate) fn triggered(&self) -> u64 {
        self.triggered.load(Ordering::Acquire)
    }

    /// Checkpoint `id` starts: sources snapshot and inject its barrier.
    pub(crate) fn trigger(&self, id: u64) {
        self.triggered.fetch_max(id, Ordering::AcqRel);
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
