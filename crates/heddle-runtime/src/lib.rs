//! Heddle's runtime: the job master, worker bootstrap and the local launcher.
//!
//! A job is N worker processes running the same program. `heddle run` ([`run_job`])
//! starts a [`JobMaster`] in the launching process and the workers on this machine;
//! each worker calls [`init`], which registers with the master (proving it knows the
//! job token), receives the peer table, connects directly to every peer, and returns
//! the world [`heddle_comm::Communicator`]. A program started without a launcher is a
//! world of one.

mod admission;
mod bootstrap;
mod channel;
pub mod config_file;
pub mod control;
mod dashboard;
mod env;
mod error;
mod external;
mod guardian;
mod job_files;
mod launcher;
mod local;
mod logging;
mod manual;
mod master;
mod mpi4py_shim;
mod mpi_world;
mod observatory;
mod output;
mod peer_links;
mod pmix;
mod progress;
mod rendezvous;
mod secure;
mod stdin_forward;
pub mod token_file;

pub use bootstrap::{init, init_with};
pub use dashboard::DashboardAddr;
pub use env::{check_environment, check_heartbeat, check_known_keys, Launch, WorkerEnv};
pub use error::{Error, ErrorVariant, Result};
pub use external::default_master_bind;
pub use launcher::{run_job, Allocation, JobOutcome, LaunchSpec, Launcher};
pub use logging::{install_logging, LOG_FORMAT_VAR};
pub use manual::{run_worker, serve_master};
pub use master::{JobMaster, MasterConfig};
pub use progress::ProgressMode;
pub use secure::Security;
