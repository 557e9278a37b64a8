//! The pump of an edge through a dataflow operation: it offers each local source's
//! outbox to the operation, hands what the operation delivers to the local targets'
//! inboxes, and counts the bytes each of those tasks sent and received.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use heddle_comm::metrics::TaskCounters;
use heddle_comm::Communicator;
use heddle_dataflow::{EdgeSpec, Event, Offer, Options, TaskId};

use super::barriers::Barriers;
use super::edge_run::{EdgeRun, Target};
use super::inbox::{lock, QUEUE_CAP};
use super::outputs::Outbox;
use super::throttle::{Throttle, Throttles};
use crate::edge::{BoxedOp, MakeOp};
use crate::{Error, Result};

/// Records an inbox may take past [`QUEUE_CAP`] while an overdue checkpoint's barrier
/// overtakes them (a bound of last resort: the edge's credit window is the usual one).
const OVERTAKEN_CAP: usize = 64 * QUEUE_CAP;

/// An edge through a dataflow operation.
pub(crate) struct OpEdge<T, U> {
    pub(crate) make: MakeOp<T, U>,
    pub(crate) op: Option<BoxedOp<T, U>>,
    pub(crate) outboxes: Vec<(TaskId, Arc<Mutex<Outbox<T>>>)>,
    pub(crate) inboxes: Vec<Target<U>>,
    /// A record the operation handed back (edge full), per source (as `outboxes`).
    pub(crate) held: Vec<Option<T>>,
    /// Positions in `outboxes` of the sources whose end the operation has not been told
    /// (a pump visits only these: a graph may have thousands of sources on a worker).
    pub(crate) open: Vec<usize>,
    /// The job's checkpoints: an overdue one's barriers overtake the outboxes.
    pub(crate) barriers: Option<Arc<Barriers>>,
    /// The byte counters of the sources (as `outboxes`) and of the targets (as
    /// `inboxes`), with what this pass's operation has already added to them.
    pub(crate) sent: Vec<Counted>,
    pub(crate) received: Vec<Counted>,
    /// The token bucket of each source with a network contract (as `outboxes`), and the
    /// bytes of that source it has been charged for so far.
    pub(crate) throttles: Vec<Option<(Arc<Throttle>, u64)>>,
}

/// A task instance's byte counter on one side of an edge, and the bytes this pass's
/// operation has added to it so far.
pub(crate) type Counted = (Option<Arc<TaskCounters>>, u64);

impl<T, U> OpEdge<T, U> {
    /// Adds to each local task's byte counters what the operation moved since last time.
    fn count_bytes(&mut self) {
        let Some(op) = self.op.as_ref() else { return };
        for ((counters, seen), (s, _)) in self.sent.iter_mut().zip(&self.outboxes) {
            if let Some(c) = counters {
                let now = op.bytes_sent(*s);
                c.add_bytes_out(now - *seen);
                *seen = now;
            }
        }
        for ((counters, seen), (t, _, _)) in self.received.iter_mut().zip(&self.inboxes) {
            if let Some(c) = counters {
                let now = op.bytes_received(*t);
                c.add_bytes_in(now - *seen);
                *seen = now;
            }
        }
    }
}

impl<T, U> EdgeRun for OpEdge<T, U> {
    fn open(&mut self, comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<()> {
        self.op = Some((self.make)(comm, spec, opts)?);
        self.open = (0..self.outboxes.len()).collect();
        for (_, seen) in self.sent.iter_mut().chain(&mut self.received) {
            *seen = 0;
        }
        for (_, charged) in self.throttles.iter_mut().flatten() {
            *charged = 0; // a new operation counts from zero
        }
        for (_, o) in &self.outboxes {
            lock(o).finished = false;
        }
        Ok(())
    }

    fn pump(&mut self) -> Result<bool> {
        let op = self
            .op
            .as_mut()
            .ok_or_else(|| Error::Graph("an edge was pumped outside a pass".into()))?;
        let mut moved = false;
        let overdue = self.barriers.as_ref().is_some_and(|b| b.overdue());
        let mut k = 0;
        while k < self.open.len() {
            let at = self.open[k];
            let (s, outbox) = &self.outboxes[at];
            if overdue {
                lock(outbox).overtake();
            }
            let throttle = self.throttles.get(at).and_then(Option::as_ref).map(|t| t.0.clone());
            loop {
                if self.held[at].is_none() {
                    let due = lock(outbox).due_barrier();
                    if let Some(id) = due {
                        op.barrier(*s, id)?;
                        moved = true;
                        continue;
                    }
                }
                if throttle.as_ref().is_some_and(|t| !t.open()) {
                    break; // over its network contract: its records wait in its outbox
                }
                let next = self.held[at].take().or_else(|| lock(outbox).pop());
                let Some(record) = next else { break };
                match op.offer(*s, record)? {
                    Offer::Accepted => {
                        moved = true;
                        if let Some((t, charged)) =
                            self.throttles.get_mut(at).and_then(Option::as_mut)
                        {
                            let sent = op.bytes_sent(*s);
                            t.spend(sent.saturating_sub(*charged));
                            *charged = sent;
                        }
                    }
                    Offer::Full(back) => {
                        self.held[at] = Some(back);
                        break;
                    }
                }
            }
            let ended = lock(outbox).drained();
            if ended && self.held[at].is_none() {
                op.finish(*s)?;
                self.open.swap_remove(k);
                moved = true;
            } else {
                k += 1;
            }
        }
        moved |= op.progress()?;
        // An overdue checkpoint's barrier overtakes the records before it on this worker:
        // they are taken into the inbox past its usual bound (the edge's credit window
        // bounds them) so that the task can snapshot at once, copying them.
        let triggered = self.barriers.as_ref().map_or(0, |b| b.triggered());
        for (t, inbox, slot) in &self.inboxes {
            let mut inbox = lock(inbox);
            // Past a barrier, the target's other inputs catch up before this one goes on.
            while !inbox.blocked(*slot)
                && (inbox.items.len() < QUEUE_CAP
                    || (overdue
                        && inbox.items.len() < OVERTAKEN_CAP
                        && inbox.awaits(*slot, triggered)))
            {
                match op.poll(*t) {
                    Some(Event::Data(u)) => inbox.push(*slot, u),
                    Some(Event::End) => inbox.end(*slot),
                    Some(Event::Barrier(id)) => inbox.barrier(*slot, id),
                    None => break,
                }
                moved = true;
            }
        }
        if moved {
            self.count_bytes();
        }
        Ok(moved)
    }

    fn is_done(&self) -> bool {
        self.op.as_ref().is_none_or(|op| op.is_done()) && self.held.iter().all(Option::is_none)
    }

    fn wait(&mut self) -> Result<()> {
        match self.op.as_mut() {
            Some(op) => Ok(op.wait()?),
            None => Ok(()),
        }
    }

    fn close_pass(&mut self) {
        self.count_bytes();
        self.op = None;
    }

    fn checkpoints(&mut self, barriers: Arc<Barriers>) {
        self.barriers = Some(barriers);
    }

    fn throttle(&mut self, buckets: &Throttles) {
        self.throttles =
            self.outboxes.iter().map(|(s, _)| buckets.get(s).map(|t| (t.clone(), 0))).collect();
    }

    fn observe(&mut self, counters: &HashMap<TaskId, Arc<TaskCounters>>) {
        self.sent = self.outboxes.iter().map(|(s, _)| (counters.get(s).cloned(), 0)).collect();
        self.received =
            self.inboxes.iter().map(|(t, _, _)| (counters.get(t).cloned(), 0)).collect();
    }
}
