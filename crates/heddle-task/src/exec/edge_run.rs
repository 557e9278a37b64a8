//! An edge on one worker: the outboxes of its local upstream tasks, the inboxes of its
//! local downstream tasks, and (unless chained) the dataflow operation of the current pass
//! between them.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use heddle_comm::metrics::TaskCounters;
use heddle_comm::Communicator;
use heddle_dataflow::{EdgeSpec, Options, TaskId};

use super::barriers::Barriers;
use super::inbox::{lock, SharedInbox};
use super::op_edge::OpEdge;
use super::outputs::{ChainedOutput, EdgeOutput, Outbox, TaskOutput};
use crate::edge::Edge;
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
    /// Takes part in the job's checkpoints (an overdue one's barriers overtake).
    fn checkpoints(&mut self, _barriers: Arc<Barriers>) {}
    /// Counts the bytes its local tasks send and receive, into their `counters`.
    fn observe(&mut self, _counters: &HashMap<TaskId, Arc<TaskCounters>>) {}
    /// Holds back the records of its local sources with a network contract to their rates.
    fn throttle(&mut self, _buckets: &super::throttle::Throttles) {}
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
                let slot = {
                    let mut inbox = lock(&inbox);
                    inbox.codec.get_or_insert(self.codecs.1);
                    inbox.add_slot()
                };
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
        let outboxes: Vec<(TaskId, Arc<Mutex<Outbox<T>>>)> = sources
            .iter()
            .map(|&s| (s, Arc::new(Mutex::new(Outbox::new(Some(self.codecs.0))))))
            .collect();
        let outputs = outboxes
            .iter()
            .map(|(s, o)| {
                let port: Arc<dyn TaskOutput<T>> = Arc::new(EdgeOutput(o.clone()));
                (*s, Box::new(port) as Box<dyn Any>)
            })
            .collect();
        let held = outboxes.iter().map(|_| None).collect();
        let run = OpEdge {
            make: self.make.clone(),
            op: None,
            outboxes,
            inboxes,
            held,
            open: Vec::new(),
            barriers: None,
            sent: Vec::new(),
            received: Vec::new(),
            throttles: Vec::new(),
        };
        Ok((Box::new(run), outputs))
    }
}

/// A target task of an edge on this worker: its id, its inbox, and the edge's slot in it.
pub(crate) type Target<U> = (TaskId, SharedInbox<U>, usize);

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
