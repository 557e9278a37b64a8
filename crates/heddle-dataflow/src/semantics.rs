//! The one implementation of [`Operation`] that every dataflow operation shares: an
//! operation supplies only its [`Semantics`] — how a source's record is routed and
//! encoded, and how a target turns incoming messages into events.
//!
//! Each operation at the crate root is this [`Dataflow`] over its semantics, one type
//! per operation, named for what it does to the records: [`Partition`](crate::Partition)
//! is `Dataflow<Routing>`, [`Reduce`](crate::Reduce) `Dataflow<Reduction>`,
//! [`Gather`](crate::Gather) `Dataflow<Gathering>`, [`KeyedGather`](crate::KeyedGather)
//! `Dataflow<Grouping>`, [`KeyedReduce`](crate::KeyedReduce) `Dataflow<KeyedReduction>`,
//! [`Sort`](crate::Sort) `Dataflow<Sorting>` and [`Join`](crate::Join) `Dataflow<Joining>`.
//! Programs name the operations; the semantics are named here only to implement a new one.

pub use crate::gather::Gathering;
pub use crate::join::Joining;
pub use crate::keyed_gather::Grouping;
pub use crate::keyed_reduce::KeyedReduction;
pub use crate::partition::Routing;
pub use crate::reduce::Reduction;
pub use crate::sort::Sorting;

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::alignment::Incoming;
use super::edge_core::EdgeCore;
use super::{Event, Mode, Offer, Operation, TaskId};
use crate::{Error, Result};

/// Results handed out per refill.
pub(crate) const REFILL: usize = 4096;

/// How long a target that is about to compute its results keeps sending what peers
/// wait for first.
const FLUSH_BEFORE_RESULTS: Duration = Duration::from_millis(50);

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

/// A dataflow operation on one worker: the shared machinery plus its semantics `S`.
pub struct Dataflow<S: Semantics> {
    pub(crate) core: EdgeCore,
    pub(crate) sem: S,
    out: HashMap<TaskId, VecDeque<Event<S::Out>>>,
    error: Option<Error>,
    /// Events handed out since the last `progress`.
    polled: usize,
}

impl<S: Semantics> std::fmt::Debug for Dataflow<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataflow")
            .field("edge", &self.core.spec.edge)
            .field("mode", &self.core.mode)
            .finish_non_exhaustive()
    }
}

impl<S: Semantics> Dataflow<S> {
    pub(crate) fn from_parts(core: EdgeCore, sem: S) -> Self {
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Dataflow { core, sem, out, error: None, polled: 0 }
    }

    /// Bytes held in this worker's receive buffer for the edge, now and at most so far.
    pub fn buffered_bytes(&self) -> (u64, u64) {
        self.core.buffered()
    }
}

impl<S: Semantics> Operation for Dataflow<S> {
    type In = S::In;
    type Out = S::Out;

    fn offer(&mut self, source: TaskId, item: S::In) -> Result<Offer<S::In>> {
        self.core.check_source(source)?;
        self.sem.offer(&mut self.core, source, item)
    }

    fn finish(&mut self, source: TaskId) -> Result<()> {
        self.core.check_source(source)?;
        self.sem.finish(&mut self.core, source)
    }

    fn barrier(&mut self, source: TaskId, id: u64) -> Result<()> {
        self.core.barrier(source, id)
    }

    fn progress(&mut self) -> Result<bool> {
        self.polled = 0;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let folds = self.sem.folds(self.core.mode);
        let sem = &mut self.sem;
        let moved = self.core.progress(folds, &mut |p| sem.combine(p))?;
        if moved {
            self.core.moved();
        }
        Ok(moved)
    }

    fn poll(&mut self, target: TaskId) -> Option<Event<S::Out>> {
        self.polled += 1;
        if self.polled >= REFILL {
            // A program may drain a long output without calling `progress`: keep this
            // worker's messages moving meanwhile, or peers waiting for them stall until
            // the output ends. A failure resurfaces from the next `progress` call.
            if let Err(e) = self.progress() {
                self.error = Some(e);
            }
        }
        loop {
            if let Some(e) = self.out.get_mut(&target)?.pop_front() {
                return Some(e);
            }
            let out = self.out.get_mut(&target)?;
            if let Err(e) = self.sem.refill(target, out) {
                self.error = Some(e);
                return None;
            }
            if !out.is_empty() {
                continue;
            }
            let incoming = self.core.next(target)?;
            if matches!(incoming, Incoming::End) {
                // Batch results may take long to compute (a sort): first send off what
                // peers wait for, such as this worker's own end of stream, giving them a
                // little time to make room.
                let deadline = Instant::now() + FLUSH_BEFORE_RESULTS;
                while self.core.has_outgoing() && Instant::now() < deadline {
                    match self.progress() {
                        Ok(true) => {}
                        Ok(false) => std::thread::yield_now(),
                        Err(e) => {
                            self.error = Some(e);
                            break;
                        }
                    }
                }
            }
            let out = self.out.get_mut(&target)?;
            if let Err(e) = self.sem.take(&self.core, target, incoming, out) {
                self.error = Some(e);
                return None;
            }
        }
    }

    fn is_done(&self) -> bool {
        self.core.is_done() && self.out.values().all(VecDeque::is_empty) && !self.sem.has_results()
    }

    fn local_targets(&self) -> Vec<TaskId> {
        self.core.local_targets.clone()
    }

    fn wait(&mut self) -> Result<()> {
        self.core.wait()
    }
}
