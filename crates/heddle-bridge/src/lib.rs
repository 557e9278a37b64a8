//! Bridged tasks (Granules bridges, DataCutter filters): a task instance implemented by a
//! process in another language that speaks the bridge protocol (`spec/bridge.md`) over
//! anonymous pipes, named pipes, TCP or Unix domain sockets, with credit flow control,
//! diagnostics, and a transport switch while it runs.
//!
//! The SDKs for the filter side live in `sdk/` (C, C++, Java, Go, Python).
//!
//! ```no_run
//! use heddle_bridge::{Bridge, BridgeConfig, FilterCommand, Record, Transport};
//! let cmd = FilterCommand::new("python3").arg("-m").arg("heddle_bridge.examples.upper");
//! let bridge = Bridge::start(&cmd, BridgeConfig::new("upper"))?;
//! let mut out = Vec::new();
//! for word in ["a", "b"] {
//!     bridge.send(Record::text(word), &mut |r| out.push(r))?;
//! }
//! bridge.switch(Transport::Unix)?; // live, nothing lost
//! bridge.finish(&mut |r| out.push(r))?;
//! # Ok::<(), heddle_bridge::Error>(())
//! ```

mod config;
pub mod conformance;
pub mod control;
mod diagnostics;
mod error;
pub mod framing;
mod handshake;
mod host;
mod policy;
mod process;
mod reader;
mod record;
mod shm;
mod switch;
mod transport;

pub use config::BridgeConfig;
pub use diagnostics::Diagnostics;
pub use error::{Error, Result};
pub use host::{Bridge, BridgeReport};
pub use policy::{Metric, Op, Policy, Rule};
pub use process::FilterCommand;
pub use record::{FromRecord, IntoRecord, Record};
pub use shm::{ForkRings, ShmReader, ShmWriter};
pub use transport::Transport;
