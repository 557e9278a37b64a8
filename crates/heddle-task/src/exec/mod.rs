//! Running a planned graph on a worker: the task instances, the edges between them, and
//! the loop that activates tasks when their input arrives.

pub(crate) mod barriers;
mod edge_ids;
pub(crate) mod edge_run;
mod handles;
pub(crate) mod inbox;
mod job;
mod job_checkpoints;
mod job_loops;
mod observe;
mod op_edge;
pub(crate) mod outputs;
mod pool;
#[cfg(test)]
mod queue_tests;
mod task_common;
pub(crate) mod task_run;
mod throttle;

pub use job::{AbortHandle, Job, Report, StopHandle, THREADS_ENV};
pub use outputs::Context;
pub use task_run::TaskStats;
