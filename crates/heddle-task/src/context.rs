//! What a running task sees of the system.

use heddle_comm::Communicator;

use crate::{Error, Result, Strategy};

/// Identity of one task instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskInfo {
    /// The vertex's name.
    pub name: String,
    /// The instance's index among the vertex's `parallelism` instances.
    pub index: u32,
    /// Instances of the vertex.
    pub parallelism: u32,
    /// The instance's global task id (unique in the job).
    pub task: u32,
    /// Rank of the worker running it.
    pub worker: usize,
}

impl std::fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.name, self.index)
    }
}

/// Handed to every task call: emit records, see who and where it is, call collectives
/// on its vertex's communicator, change its strategy.
pub struct Context<'a, O> {
    pub(crate) out: &'a mut Vec<O>,
    pub(crate) info: &'a TaskInfo,
    pub(crate) comm: Option<&'a Communicator>,
    pub(crate) strategy: &'a mut Strategy,
    pub(crate) iteration: &'a [u64],
}

impl<O> std::fmt::Debug for Context<'_, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("task", self.info)
            .field("iteration", &self.iteration)
            .finish_non_exhaustive()
    }
}

impl<O> Context<'_, O> {
    /// Sends `record` on every outgoing edge of the task.
    #[inline]
    pub fn emit(&mut self, record: O) {
        self.out.push(record);
    }

    /// Records emitted in this call and not yet moved to the edges.
    pub fn emitted(&self) -> usize {
        self.out.len()
    }

    /// Who this task instance is.
    pub fn info(&self) -> &TaskInfo {
        self.info
    }

    /// This instance's index among its vertex's instances.
    pub fn index(&self) -> u32 {
        self.info.index
    }

    /// The vertex's number of instances.
    pub fn parallelism(&self) -> u32 {
        self.info.parallelism
    }

    /// The communicator of the vertex's instances (rank = instance index), for BSP
    /// collectives inside the task. Only for vertices marked
    /// [`crate::TaskGraph::collective`].
    ///
    /// # Errors
    /// [`Error::Graph`] for a vertex not marked collective.
    pub fn comm(&self) -> Result<&Communicator> {
        self.comm.ok_or_else(|| {
            Error::Graph(format!(
                "task {} called comm() but its vertex is not marked collective \
                 (TaskGraph::collective)",
                self.info
            ))
        })
    }

    /// The current strategy.
    pub fn strategy(&self) -> Strategy {
        *self.strategy
    }

    /// Changes when the task runs from now on.
    pub fn set_strategy(&mut self, strategy: Strategy) {
        *self.strategy = strategy;
    }

    /// The iteration counters, outermost first (empty outside iterations).
    pub fn iteration(&self) -> &[u64] {
        self.iteration
    }
}
