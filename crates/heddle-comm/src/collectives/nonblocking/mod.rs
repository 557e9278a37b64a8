//! Non-blocking collectives (MPI-3's `MPI_Ibarrier`, `MPI_Iallreduce`, …): each call
//! returns a [`CollectiveRequest`] at once, holding its buffers; the collective runs as a
//! schedule of rounds of point-to-point requests ([`plan`]) that every pass of the
//! worker's engine advances — its own `test`/`wait`, and any other call of the worker
//! (a blocking collective, a send, another request's wait). Computation between the call
//! and its `wait` overlaps the collective's messages; calling [`CollectiveRequest::test`]
//! now and then keeps the rounds moving during a long computation.
//!
//! Every rank must start the same non-blocking collectives on a communicator in the same
//! order (as MPI requires); they run in a message context of their own, apart from the
//! blocking collectives and the point-to-point messages.

mod algorithms;
mod api_move;
mod api_reduce;
mod plan;

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::comm::{Communicator, Shared, COLLECTIVE_EDGE};
use crate::engine::{wait_unlocked, Awaited};
use crate::stamp::Signature;
#[cfg(doc)]
use crate::Error;
use crate::{Collective, Element, Op, Result};
pub(crate) use plan::Slot;
use plan::{Plan, Route, Running};

pub(crate) use super::Blocks;

/// A non-blocking collective under way, holding its buffers until it has finished.
///
/// [`CollectiveRequest::wait`] hands back the result buffer; [`CollectiveRequest::test`]
/// moves the links once. Dropping it unfinished lets the collective run on (the other
/// ranks need its messages) and discards its result.
#[derive(Debug)]
pub struct CollectiveRequest<T: Element> {
    shared: Arc<Shared>,
    id: u64,
    done: Option<Result<Vec<T>>>,
    _result: PhantomData<T>,
}

impl<T: Element> Drop for CollectiveRequest<T> {
    fn drop(&mut self) {
        if self.done.is_none() {
            self.shared.lock().detach_schedule(self.id);
        }
    }
}

impl<T: Element> CollectiveRequest<T> {
    /// Blocks until the collective has finished on this rank; returns its result (for
    /// calls without one, such as [`Communicator::ibarrier`], an empty vector).
    ///
    /// # Errors
    /// [`Error::Timeout`] naming the ranks awaited when nothing moved for the
    /// communicator's timeout; [`Error::CollectiveMismatch`] if another rank started a
    /// different collective at this point; [`Error::PeerLost`] or [`Error::Aborted`].
    pub fn wait(mut self) -> Result<Vec<T>> {
        if self.done.is_none() {
            let id = self.id;
            let out = wait_unlocked(&self.shared, Awaited::Schedule(id), |e| e.take_schedule(id));
            self.done = Some(out.and_then(|r| r).map(plan::output));
        }
        self.done.take().unwrap_or_else(|| Ok(Vec::new()))
    }

    /// Moves the links once; returns whether the collective has finished on this rank.
    ///
    /// # Errors
    /// As [`CollectiveRequest::wait`], except that it never times out.
    pub fn test(&mut self) -> Result<bool> {
        if self.done.is_some() {
            return Ok(true);
        }
        let mut engine = self.shared.lock();
        engine.pass()?;
        if let Some(out) = engine.take_schedule(self.id) {
            self.done = Some(out.map(plan::output));
        }
        Ok(self.done.is_some())
    }

    /// Waits for every request of `reqs`, in order; returns their results.
    ///
    /// # Errors
    /// The first error of a [`CollectiveRequest::wait`].
    pub fn wait_all(reqs: Vec<CollectiveRequest<T>>) -> Result<Vec<Vec<T>>> {
        reqs.into_iter().map(CollectiveRequest::wait).collect()
    }
}

/// The buffers and plan of one call, ready to start.
struct Call<T: Element> {
    name: &'static str,
    collective: Collective,
    /// The count every rank passes (`None`: ranks may differ, as in the v-variants).
    count: Option<usize>,
    op: Option<Op<T>>,
    plan: Plan,
    bufs: Vec<Vec<T>>,
    result: usize,
}

impl Communicator {
    /// Starts `call` as a schedule of this communicator's next non-blocking collective.
    fn start<T: Element>(&self, call: Call<T>) -> Result<CollectiveRequest<T>> {
        self.check_aborted()?;
        let code = call.op.as_ref().map_or(0, Op::code);
        let route = Route {
            members: self.members(),
            edge: self.nonblocking_context() | COLLECTIVE_EDGE,
            tag: self.nonblocking_seq().fetch_add(1, Ordering::Relaxed),
            signature: Signature::new(call.collective, T::DTYPE, call.count, code),
        };
        let running = Running::new(call.name, call.plan, call.bufs, call.result, call.op, route);
        let id = self.lock().start_schedule(Box::new(running))?;
        Ok(CollectiveRequest { shared: self.shared(), id, done: None, _result: PhantomData })
    }
}
