//! Describing an operation: its edge, source and target tasks, where tasks live, mode and
//! memory budget.

use std::collections::HashMap;
use std::time::Duration;

use crate::spill::SpillConfig;
use crate::{Error, Result};

/// A task's id, unique within a job.
pub type TaskId = u32;

/// Streaming or batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Unbounded: records are delivered as they come; results are running values.
    Streaming,
    /// Bounded: sources finish; combiners reduce before sending; targets get final results.
    Batch,
}

/// Which worker (world rank) runs each task. Every worker must use the same placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    worker: HashMap<TaskId, usize>,
}

impl Placement {
    /// Tasks `0..tasks` dealt round-robin over `workers` workers.
    pub fn round_robin(tasks: u32, workers: usize) -> Placement {
        Placement { worker: (0..tasks).map(|t| (t, t as usize % workers.max(1))).collect() }
    }

    /// An explicit task → worker map.
    pub fn from_pairs(pairs: impl IntoIterator<Item = (TaskId, usize)>) -> Placement {
        Placement { worker: pairs.into_iter().collect() }
    }

    /// The worker running `task`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a task the placement does not know.
    pub fn worker(&self, task: TaskId) -> Result<usize> {
        self.worker.get(&task).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("task {task} has no worker in the placement"))
        })
    }
}

/// The tasks an operation connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeSpec {
    /// Edge id, unique per operation within a job (below 2^30).
    pub edge: u32,
    /// Source task ids.
    pub sources: Vec<TaskId>,
    /// Target task ids.
    pub targets: Vec<TaskId>,
    /// Where every task runs.
    pub placement: Placement,
}

impl EdgeSpec {
    /// An edge from `sources` to `targets`.
    pub fn new(
        edge: u32,
        sources: Vec<TaskId>,
        targets: Vec<TaskId>,
        placement: Placement,
    ) -> EdgeSpec {
        EdgeSpec { edge, sources, targets, placement }
    }
}

/// How an operation runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Streaming or batch.
    pub mode: Mode,
    /// Bytes of received messages an operation may hold per receiving worker; split
    /// evenly into credit windows among the workers that send to it.
    pub budget_bytes: u64,
    /// Records to one target are packed into messages of about this many bytes.
    pub batch_bytes: usize,
    /// Longest wait without progress (None: the communicator's timeout).
    pub timeout: Option<Duration>,
    /// Batch operations that hold records (keyed gather, sort, join) keep up to
    /// `spill.budget_bytes` in memory per target and spill sorted runs to `spill.dirs`
    /// beyond it.
    pub spill: SpillConfig,
    /// A broadcast's batches of 16 KiB and more go to two or more same-host workers
    /// through the sender's shared slots (written once, copied out by each) rather than
    /// through each one's ring (default: on).
    pub shared_slots: bool,
}

impl Options {
    /// Batch mode with default sizes: an 8 MiB receive budget.
    pub fn batch() -> Options {
        Options { mode: Mode::Batch, budget_bytes: 8 << 20, ..Options::streaming() }
    }

    /// Streaming mode with default sizes: a 1 MiB receive budget, so that a checkpoint
    /// barrier waits behind (or, unaligned, copies) little of the records in flight; its
    /// throughput was the same as with 8 MiB (docs/fault-tolerance.md).
    pub fn streaming() -> Options {
        Options {
            mode: Mode::Streaming,
            budget_bytes: 1 << 20,
            batch_bytes: 32 << 10,
            timeout: None,
            spill: SpillConfig::default(),
            shared_slots: true,
        }
    }

    /// Sets the receive budget.
    pub fn budget(mut self, bytes: u64) -> Options {
        self.budget_bytes = bytes;
        self
    }

    /// Sets the memory budget per target for held records, and where to spill beyond it.
    pub fn spill(mut self, budget_bytes: usize, dirs: Vec<std::path::PathBuf>) -> Options {
        self.spill = SpillConfig { dirs, budget_bytes };
        self
    }

    /// Whether broadcasts use the workers' shared slots ([`Options::shared_slots`]).
    ///
    /// ```
    /// let opts = heddle_dataflow::Options::batch().share_slots(false);
    /// assert!(!opts.shared_slots);
    /// ```
    pub fn share_slots(mut self, on: bool) -> Options {
        self.shared_slots = on;
        self
    }

    /// Sets the message size records are packed into.
    pub fn batch_size(mut self, bytes: usize) -> Options {
        self.batch_bytes = bytes;
        self
    }
}
