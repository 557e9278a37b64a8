//! Heddle's runtime: the job master, worker bootstrap and the local launcher.
//!
//! A job is N worker processes running the same program. `heddle run` ([`run_local`])
//! starts a [`JobMaster`] in the launching process and the workers on this machine;
//! each worker calls [`init`], which registers with the master (proving it knows the
//! job token), receives the peer table, connects directly to every peer, and returns
//! the world [`heddle_comm::Communicator`]. A program started without a launcher is a
//! world of one.

mod bootstrap;
pub mod control;
mod env;
mod error;
mod guardian;
mod job_files;
mod launcher;
mod master;
mod output;

pub use bootstrap::{init, init_with};
pub use env::{check_environment, check_heartbeat, check_known_keys, WorkerEnv};
pub use error::{Error, ErrorVariant, Result};
pub use launcher::{run_local, JobOutcome, LaunchSpec};
pub use master::{JobMaster, MasterConfig};
