//! An edge on one worker: the outboxes of its local upstream tasks, the inboxes of its
//! local downstream tasks, and (unless chained) the dataflow operation of the current pass
//! between them.

use std::any::Any;
use std::sync::{Arc, Mutex};

use heddle_comm::Communicator;
use heddle_dataflow::{EdgeSpec, Event, Offer, Options, TaskId};

use super::queues::{
    lock, ChainedOutput, EdgeOutput, Inbox, Outbox, SharedInbox, TaskOutput, QUEUE_CAP,
};
use crate::edge::{BoxedOp, Edge};
use crate::{Error, Result};

/// A type-erased edge instance on one worker.
pub(crate) trait EdgeRun {
    /// Creates this pass's operation (nothing for a chained edge).
    fn open(&mut self, comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<()>;
    /// Offers waiting records, moves bytes, hands arrived records to the inboxes.
    fn pump(&mut self) -> Result<bool>;
    /// Whether this pass's operation has delivered everything (true when chained).
    fn is_done(&self) -> bool;
    /// Waits a little after a pump that moved nothing.
    fn wait(&mut self) -> Result<()>;
    /// Drops this pass's operation.
    fn close_pass(&mut self);
}

/// Builds an edge's instance on a worker: links the downstream inboxes (`Box<dyn Any>`
/// holding `SharedInbox<U>`) and returns the upstream outputs (`Box<dyn Any>` holding
/// `Arc<dyn TaskOutput<T>>`), by local source task.
pub(crate) trait EdgeFactory {
    fn instantiate(
        &self,
        sources: &[TaskId],
        targets: Vec<(TaskId, &dyn Any)>,
        chained: bool,
    ) -> Result<(Box<dyn EdgeRun>, Vec<TargetInbox>)>;
}

/// A target task and its inbox on an edge (typed by the edge's record type).
pub(crate) type TargetInbox = (TaskId, Box<dyn Any>);

impl<T: Send + 'static, U: Send + 'static> EdgeFactory for Edge<T, U> {
    fn instantiate(
        &self,
        sources: &[TaskId],
        targets: Vec<(TaskId, &dyn Any)>,
        chained: bool,
    ) -> Result<(Box<dyn EdgeRun>, Vec<TargetInbox>)> {
        let inboxes: Vec<Target<U>> = targets
            .into_iter()
            .map(|(t, any)| {
                let inbox = any.downcast_ref::<SharedInbox<U>>().cloned().ok_or_else(|| {
                    Error::Graph(format!(
                        "task {t}: its input type does not match the edge's output type"
                    ))
                })?;
                let slot = lock(&inbox).add_slot();
                Ok((t, inbox, slot))
            })
            .collect::<Result<_>>()?;
        if chained {
            let map = self
                .chain
                .ok_or_else(|| Error::Graph("only direct edges can be chained".into()))?;
            // Chained: upstream instance i feeds downstream instance i, on this worker.
            if sources.len() != inboxes.len() {
                return Err(Error::Graph(
                    "a chained edge needs its instances in pairs on each worker".into(),
                ));
            }
            let outputs = sources
                .iter()
                .zip(&inboxes)
                .map(|(&s, (_, inbox, slot))| {
                    let port: Arc<dyn TaskOutput<T>> =
                        Arc::new(ChainedOutput { inbox: inbox.clone(), slot: *slot, map });
                    (s, Box::new(port) as Box<dyn Any>)
                })
                .collect();
            return Ok((Box::new(Chained), outputs));
        }
        let outboxes: Vec<(TaskId, Arc<Mutex<Outbox<T>>>)> =
            sources.iter().map(|&s| (s, Arc::default())).collect();
        let outputs = outboxes
            .iter()
            .map(|(s, o)| {
                let port: Arc<dyn TaskOutput<T>> = Arc::new(EdgeOutput(o.clone()));
                (*s, Box::new(port) as Box<dyn Any>)
            })
            .collect();
        let held = outboxes.iter().map(|_| None).collect();
        let run =
            OpEdge { make: self.make.clone(), op: None, outboxes, inboxes, held, open: Vec::new() };
        Ok((Box::new(run), outputs))
    }
}

/// A target task of an edge on this worker: its id, its inbox, and the edge's slot in it.
type Target<U> = (TaskId, SharedInbox<U>, usize);

/// A chained edge: its outputs write into the inboxes directly.
struct Chained;

impl EdgeRun for Chained {
    fn open(&mut self, _: &Communicator, _: EdgeSpec, _: Options) -> Result<()> {
        Ok(())
    }
    fn pump(&mut self) -> Result<bool> {
        Ok(false)
    }
    fn is_done(&self) -> bool {
        true
    }
    fn wait(&mut self) -> Result<()> {
        Ok(())
    }
    fn close_pass(&mut self) {}
}

type MakeOp<T, U> = std::sync::Arc<
    dyn Fn(&Communicator, EdgeSpec, Options) -> heddle_dataflow::Result<BoxedOp<T, U>>,
>;

/// An edge through a dataflow operation.
struct OpEdge<T, U> {
    make: MakeOp<T, U>,
    op: Option<BoxedOp<T, U>>,
    outboxes: Vec<(TaskId, Arc<Mutex<Outbox<T>>>)>,
    inboxes: Vec<Target<U>>,
    /// A record the operation handed back (edge full), per source (as `outboxes`).
    held: Vec<Option<T>>,
    /// Positions in `outboxes` of the sources whose end the operation has not been told
    /// (a pump visits only these: a graph may have thousands of sources on a worker).
    open: Vec<usize>,
}

impl<T, U> EdgeRun for OpEdge<T, U> {
    fn open(&mut self, comm: &Communicator, spec: EdgeSpec, opts: Options) -> Result<()> {
        self.op = Some((self.make)(comm, spec, opts)?);
        self.open = (0..self.outboxes.len()).collect();
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
        let mut k = 0;
        while k < self.open.len() {
            let at = self.open[k];
            let (s, outbox) = &self.outboxes[at];
            loop {
                if self.held[at].is_none() {
                    let due = lock(outbox).due_barrier();
                    if let Some(id) = due {
                        op.barrier(*s, id)?;
                        moved = true;
                        continue;
                    }
                }
                let next = self.held[at].take().or_else(|| lock(outbox).pop());
                let Some(record) = next else { break };
                match op.offer(*s, record)? {
                    Offer::Accepted => moved = true,
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
        for (t, inbox, slot) in &self.inboxes {
            let mut inbox = lock(inbox);
            // Past a barrier, the target's other inputs catch up before this one goes on.
            while inbox.items.len() < QUEUE_CAP && !inbox.blocked(*slot) {
                match op.poll(*t) {
                    Some(Event::Data(u)) => inbox.items.push_back(u),
                    Some(Event::End) => inbox.end(*slot),
                    Some(Event::Barrier(id)) => inbox.barrier(*slot, id),
                    None => break,
                }
                moved = true;
            }
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
        self.op = None;
    }
}

/// A fresh inbox, type-erased, for a downstream task of input type `U`.
pub(crate) fn new_inbox<U: Send + 'static>() -> (SharedInbox<U>, Box<dyn Any>) {
    let inbox: SharedInbox<U> = Arc::new(Mutex::new(Inbox::default()));
    (inbox.clone(), Box::new(inbox))
}
