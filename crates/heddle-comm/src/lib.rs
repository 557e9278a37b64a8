//! Heddle's communication layer: transports, flow control and MPI-class collectives.
//!
//! A [`Communicator`] offers MPI semantics — rank and size, tagged point-to-point
//! messages, `barrier`, `broadcast`, `reduce`, `allreduce`, `gather(v)`, `scatter(v)`,
//! `allgather(v)`, `alltoall(v)`, `reduce_scatter`, `split` — on typed buffers
//! ([`Element`]: u8 … f64) with [`Op`] reductions, and on serializable objects.
//!
//! Frames ([`heddle_wire`]) move over in-process rings, shared-memory rings in
//! `/dev/shm`, or TCP, chosen per peer. Every link uses fixed-size buffers, splits large
//! messages into fragments, and is flow-controlled by credits, so a receiver never holds
//! more than its window. This crate knows nothing of tasks or datasets.
//!
//! ```
//! use heddle_comm::{local_world, CommConfig};
//! let comms = local_world(4, CommConfig::default()).unwrap();
//! std::thread::scope(|s| {
//!     for c in comms {
//!         s.spawn(move || {
//!             let mut all = vec![0u32; 4];
//!             c.allgather(&[c.rank() as u32 * 10], &mut all).unwrap();
//!             assert_eq!(all, [0, 10, 20, 30]);
//!         });
//!     }
//! });
//! ```

mod abort;
mod channels;
mod collectives;
mod comm;
mod config;
mod datatype;
mod edge_sharing;
mod element;
mod engine;
mod error;
mod idle;
pub mod metrics;
mod object;
pub mod private;
mod reassembly;
pub mod scratch;
pub mod settings;
mod stamp;
pub mod transport;
mod world;

pub use abort::{AbortCause, JobAbort, Reporter};
pub use channels::{Delivered, Envelope, DATAFLOW_EDGE};
pub use channels::{EdgeChannels, EdgeIo, EdgeLink};
pub use collectives::{Algorithm, Blocks, CallOptions, Collective, CollectiveRequest};
pub use comm::{Communicator, Request, Status, Waker};
pub use config::{closest, CommConfig, TransportChoice};
pub use datatype::Datatype;
pub use element::{CustomOp, Element, Op};
pub use error::{Error, ErrorVariant, Result};
pub use heddle_wire::{Dtype, Kind};
pub use transport::edge_slots::SharedRef;
pub use world::{local_world, local_world_on_hosts, solo, WorldBuilder};
