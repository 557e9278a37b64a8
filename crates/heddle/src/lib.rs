//! Heddle: one runtime for MPI-style collectives and big-data dataflow.
//!
//! This facade re-exports the layers. Start a job with `heddle run -n 4 -- PROGRAM`; in
//! the program, [`init`] joins the job and returns the world [`Communicator`]:
//!
//! ```
//! let world = heddle::init().unwrap(); // without a launcher: a world of one
//! let mut x = [world.rank() as f64];
//! world.allreduce(&mut x, heddle::Op::Sum).unwrap();
//! assert_eq!(world.size(), 1);
//! ```

pub use heddle_comm::{
    local_world, solo, Algorithm, CallOptions, Collective, CommConfig, Communicator, CustomOp,
    Element, Op, Request, Status, TransportChoice,
};
pub use heddle_runtime::WorkerEnv;

pub mod futures;

/// Applications from the seeds (MDS) as library entry points.
pub use heddle_apps as apps;
/// Bridged tasks in other languages (transports, diagnostics, the conformance suite).
pub use heddle_bridge as bridge;
/// Re-export of the communication crate.
pub use heddle_comm as comm;
/// Re-export of the data API.
pub use heddle_data as data;
/// Re-export of the dataflow operations.
pub use heddle_dataflow as dataflow;
/// Re-export of the runtime crate.
pub use heddle_runtime as runtime;
/// Re-export of the task system.
pub use heddle_task as task;
/// Re-export of the wire-format crate.
pub use heddle_wire as wire;

/// Joins the job this process belongs to (from `HEDDLE_*` or launcher variables) and
/// returns the world communicator; a world of one without a launcher.
///
/// # Errors
/// A bad environment or configuration, or a job that cannot start (see
/// [`heddle_runtime::Error`]).
pub fn init() -> Result<Communicator, heddle_runtime::Error> {
    heddle_runtime::init()
}
