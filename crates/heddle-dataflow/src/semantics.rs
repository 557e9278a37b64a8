//! What distinguishes one dataflow operation from another: its [`Semantics`] — how a
//! source's record is routed and encoded, and how a target turns incoming messages into
//! events. Everything else is the one implementation of [`Operation`](crate::Operation)
//! every operation shares, [`Dataflow`] (in `edge_core.rs`).
//!
//! Each operation at the crate root is this [`Dataflow`] over its semantics, one type
//! per operation, named for what it does to the records: [`Partition`](crate::Partition)
//! is `Dataflow<Routing>`, [`Reduce`](crate::Reduce) `Dataflow<Reduction>`,
//! [`Gather`](crate::Gather) `Dataflow<Gathering>`, [`KeyedGather`](crate::KeyedGather)
//! `Dataflow<Grouping>`, [`KeyedReduce`](crate::KeyedReduce) `Dataflow<KeyedReduction>`,
//! [`Sort`](crate::Sort) `Dataflow<Sorting>` and [`Join`](crate::Join) `Dataflow<Joining>`.
//! Programs name the operations; the semantics are named here only to implement a new one.

pub use crate::edge_core::Dataflow;
pub use crate::gather::Gathering;
pub use crate::join::Joining;
pub use crate::keyed_gather::Grouping;
pub use crate::keyed_reduce::KeyedReduction;
pub use crate::partition::Routing;
pub use crate::reduce::Reduction;
pub use crate::sort::Sorting;

use std::collections::VecDeque;

use super::arrivals::Incoming;
use super::edge_core::EdgeCore;
use super::{Event, Mode, Offer, TaskId};
use crate::Result;

/// Results handed out per refill.
pub(crate) const REFILL: usize = 4096;

/// What distinguishes one operation from another.
pub trait Semantics {
    /// Records sources offer.
    type In;
    /// Records targets receive.
    type Out;

    /// Routes and encodes one record of `source` (or hands it back when the edge is full).
    fn offer(
        &mut self,
        core: &mut EdgeCore,
        source: TaskId,
        item: Self::In,
    ) -> Result<Offer<Self::In>>;

    /// Ends `source`; operations that combine before sending flush here.
    fn finish(&mut self, core: &mut EdgeCore, source: TaskId) -> Result<()> {
        core.finish(source)
    }

    /// Turns one incoming item of `target` into events.
    fn take(
        &mut self,
        core: &EdgeCore,
        target: TaskId,
        incoming: Incoming,
        out: &mut VecDeque<Event<Self::Out>>,
    ) -> Result<()>;

    /// Hands out more of a target's results, a slice at a time (operations that emit
    /// sorted results at the end stream them from their sorter instead of holding them
    /// all at once). Called whenever the target's queue of events is empty.
    ///
    /// # Errors
    /// A spill file that cannot be read back, or a record that does not decode.
    fn refill(&mut self, _target: TaskId, _out: &mut VecDeque<Event<Self::Out>>) -> Result<()> {
        Ok(())
    }

    /// Whether results remain to be handed out by [`Semantics::refill`].
    fn has_results(&self) -> bool {
        false
    }

    /// Merges the messages a worker holds for one target on their way up a tree (see
    /// [`super::BroadcastTree`]) into one; the default concatenates their records.
    ///
    /// # Errors
    /// A record that does not decode.
    fn combine(&mut self, payloads: Vec<Vec<u8>>) -> Result<Vec<u8>> {
        Ok(payloads.concat())
    }

    /// Whether targets fold records into state as they arrive (so messages are taken off
    /// the edge at once) rather than handing them out one by one.
    fn folds(&self, mode: Mode) -> bool {
        mode == Mode::Batch
    }
}
