//! Dataflow operations between sets of tasks (Twister:Net): data, not the program,
//! drives communication. Each operation connects source tasks to target tasks placed on
//! workers (several per worker; the sets may overlap) over one dataflow edge, in
//! **streaming** mode (records flow as they come, nothing waits for the end) or **batch**
//! mode (each source ends its data; combiners reduce before sending; targets receive
//! complete results).
//!
//! Every operation implements [`Operation`]: sources `offer` records (handed back when the
//! edge is full: back-pressure), `finish` their data and inject checkpoint `barrier`s;
//! targets `poll` [`Event`]s; `progress` moves bytes. [`drive`] runs an operation to the
//! end on one worker, for programs that hold all their input up front.
//!
//! ```
//! use heddle_dataflow::{drive, EdgeSpec, Event, Options, Partition, Placement};
//! use heddle_comm::{local_world, CommConfig};
//! let comms = local_world(2, CommConfig::default()).unwrap();
//! let results: Vec<Vec<u64>> = std::thread::scope(|s| {
//!     let hs: Vec<_> = comms.iter().map(|c| s.spawn(move || {
//!         // Tasks 0,1 are sources and 2,3 targets, round-robin over the two workers.
//!         let spec = EdgeSpec::new(1, vec![0, 1], vec![2, 3], Placement::round_robin(4, 2));
//!         let mut op = Partition::new(c, spec, Options::batch(), |x: &u64| *x as usize).unwrap();
//!         let src = c.rank() as u32;
//!         let out =
//!             drive(&mut op, vec![(src, vec![src as u64 * 10, src as u64 * 10 + 1])]).unwrap();
//!         let mut got: Vec<u64> = out
//!             .into_iter()
//!             .flat_map(|(_, evs)| evs)
//!             .filter_map(|e| match e {
//!                 Event::Data(x) => Some(x),
//!                 _ => None,
//!             })
//!             .collect();
//!         got.sort(); // records of different sources arrive in no set order
//!         got
//!     })).collect();
//!     hs.into_iter().map(|h| h.join().unwrap()).collect()
//! });
//! // Even numbers went to target 2 (worker 0), odd ones to target 3 (worker 1).
//! assert_eq!(results, vec![vec![0, 10], vec![1, 11]]);
//! ```

mod arrivals;
mod codec;
mod drive;
mod edge_core;
mod error;
mod gather;
mod join;
mod keyed_gather;
mod keyed_reduce;
mod partition;
mod reduce;
pub mod semantics;
mod shared_relay;
mod sort;
mod spec;
pub mod spill;
mod tree;

pub use arrivals::Incoming;
pub use drive::drive;
pub use edge_core::EdgeCore;
pub use error::{Error, ErrorVariant, Result};
pub use gather::Gather;
pub use join::{Join, JoinAlgorithm, JoinKind, JoinOn, Joined, Side};
pub use keyed_gather::KeyedGather;
pub use keyed_reduce::KeyedReduce;
pub use partition::Partition;
pub use reduce::Reduce;
pub use sort::Sort;
pub use spec::{EdgeSpec, Mode, Options, Placement, TaskId};
pub use tree::BroadcastTree;

/// What a target receives.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<T> {
    /// A record (or a result, in batch mode).
    Data(T),
    /// Checkpoint barrier `id`: every source has sent it, and everything each source
    /// sent before it has been delivered.
    Barrier(u64),
    /// Every source has finished; nothing more will come.
    End,
}

/// The answer to an offer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Offer<T> {
    /// The record was taken.
    Accepted,
    /// The edge is full (a target is slow): the record is handed back; call `progress`
    /// (or `wait`) and offer it again.
    Full(T),
}

/// The interface every dataflow operation offers, in every mode.
pub trait Operation {
    /// Records sources offer.
    type In;
    /// Records targets receive.
    type Out;

    /// Offers a record from local source task `source`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidArgument`] if `source` is not a source on this worker or
    /// has finished; serialization errors.
    fn offer(&mut self, source: TaskId, item: Self::In) -> Result<Offer<Self::In>>;

    /// Declares that local source `source` has no more data.
    ///
    /// # Errors
    /// As [`Operation::offer`].
    fn finish(&mut self, source: TaskId) -> Result<()>;

    /// Injects checkpoint barrier `id` after everything `source` offered so far.
    ///
    /// # Errors
    /// As [`Operation::offer`].
    fn barrier(&mut self, source: TaskId, id: u64) -> Result<()>;

    /// Moves data: flushes batches, sends what credit allows, takes what arrived.
    /// Returns whether anything moved.
    ///
    /// # Errors
    /// A lost peer or a malformed message.
    fn progress(&mut self) -> Result<bool>;

    /// The next event for local target `target`.
    fn poll(&mut self, target: TaskId) -> Option<Event<Self::Out>>;

    /// Whether every local target has seen [`Event::End`] and every local message has left.
    fn is_done(&self) -> bool;

    /// The targets of this operation that run on this worker.
    fn local_targets(&self) -> Vec<TaskId>;

    /// Waits a little after a `progress` that moved nothing (spin, yield, then sleep).
    ///
    /// # Errors
    /// [`heddle_comm::Error::Timeout`] (inside [`Error::Comm`]) after the configured time without
    /// progress, or a lost peer.
    fn wait(&mut self) -> Result<()>;

    /// Serialized bytes (records with their length prefixes) local source `source` has
    /// queued on this edge since it opened: what Flink calls a task's bytes out.
    fn bytes_sent(&self, source: TaskId) -> u64;

    /// Serialized bytes local target `target` has taken from this edge since it opened.
    fn bytes_received(&self, target: TaskId) -> u64;
}
