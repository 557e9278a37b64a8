//! What arrives on an edge at one worker: relayed and climbing messages passed on, the
//! rest handed to each local target in order (records, source ends, and barriers aligned
//! across every live source: [`TargetState`]), then turned into events by the
//! operation's semantics.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use heddle_comm::{Delivered, Envelope, Kind, SharedRef};

use super::edge_core::{Dataflow, EdgeCore, Msg, RELAY};
use super::semantics::Semantics;
use super::shared_relay::RELAY_SHARED;
use super::spec::TaskId;
use super::{Event, Operation};
use crate::{Error, Result};

/// How long a target that is about to compute its results keeps sending what peers
/// wait for first.
const FLUSH_BEFORE_RESULTS: Duration = Duration::from_millis(50);

/// What a target's receive side hands its operation, in order.
#[derive(Debug)]
pub enum Incoming {
    /// A message of packed records.
    Records {
        /// The source task that sent them.
        source: TaskId,
        /// Length-prefixed records.
        payload: Vec<u8>,
    },
    /// `source` has finished (everything it sent came before this).
    SourceEnded(TaskId),
    /// A barrier every live source has sent.
    Barrier(u64),
    /// Every source has finished.
    End,
}

/// One local target's receive side: the items ready for it, the sources that have
/// ended, and the barrier being aligned.
#[derive(Debug, Default)]
pub(crate) struct TargetState {
    ended: HashSet<TaskId>,
    ready: VecDeque<Incoming>,
    /// Barrier being aligned and the sources that have sent it.
    aligning: Option<(u64, HashSet<TaskId>)>,
    /// Messages from sources already past the barrier being aligned.
    held: VecDeque<Delivered>,
    ended_all: bool,
}

impl TargetState {
    /// Takes message `d` for this target of an edge with `sources` sources, adding the
    /// bytes of records made ready to `ready_bytes`. When a barrier completes its
    /// alignment, returns the messages held back during it, to be delivered again.
    ///
    /// # Errors
    /// A barrier arriving while another one is being aligned.
    pub(crate) fn accept(
        &mut self,
        d: Delivered,
        sources: usize,
        ready_bytes: &mut usize,
    ) -> Result<Option<Vec<Delivered>>> {
        if let Some((_, arrived)) = &self.aligning {
            if arrived.contains(&d.source) {
                self.held.push_back(d);
                return Ok(None);
            }
        }
        match d.kind {
            Kind::Barrier => match &mut self.aligning {
                Some((id, arrived)) if *id == d.sequence => {
                    arrived.insert(d.source);
                }
                Some((id, _)) => {
                    return Err(Error::InvalidArgument(format!(
                        "barrier {} arrived while aligning barrier {id}",
                        d.sequence
                    )));
                }
                None => self.aligning = Some((d.sequence, HashSet::from([d.source]))),
            },
            Kind::EndOfStream => {
                self.ended.insert(d.source);
                self.ready.push_back(Incoming::SourceEnded(d.source));
            }
            _ => {
                *ready_bytes += d.payload.len();
                self.ready.push_back(Incoming::Records { source: d.source, payload: d.payload });
            }
        }
        // Alignment completes once every source that has not ended has sent the barrier.
        let aligned = self.aligning.as_ref().is_some_and(|(_, a)| {
            a.len() + self.ended.iter().filter(|s| !a.contains(s)).count() >= sources
        });
        if aligned {
            let (id, _) = self.aligning.take().expect("checked");
            self.ready.push_back(Incoming::Barrier(id));
            return Ok(Some(self.held.drain(..).collect()));
        }
        if !self.ended_all && self.ended.len() == sources && self.aligning.is_none() {
            self.ended_all = true;
            self.ready.push_back(Incoming::End);
        }
        Ok(None)
    }

    /// Whether nothing is ready for the target.
    pub(crate) fn is_empty(&self) -> bool {
        self.ready.is_empty()
    }

    /// The next ready item.
    pub(crate) fn pop(&mut self) -> Option<Incoming> {
        self.ready.pop_front()
    }

    /// Whether every source has ended and the target has taken every item.
    pub(crate) fn is_done(&self) -> bool {
        self.ended_all && self.ready.is_empty()
    }

    /// The number of sources that have ended and of items ready (for diagnostics).
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.ended.len(), self.ready.len())
    }
}

impl EdgeCore {
    pub(crate) fn deliver(&mut self, d: Delivered) -> Result<()> {
        if d.target == RELAY {
            return self.relay(d);
        }
        if d.target == RELAY_SHARED {
            let r = SharedRef::from_bytes(&d.payload).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "edge {}: a shared message's reference from worker {} is malformed",
                    self.spec.edge, d.from
                ))
            })?;
            let payload = self.channels.link().take_shared(d.from, r)?;
            return self.relay(Delivered { target: RELAY, payload, ..d });
        }
        if let Some(up) = self.up.as_mut().filter(|u| u.hop(d.target).is_some()) {
            // Passing through on the way to the target's worker.
            up.push(
                Envelope { kind: d.kind, source: d.source, target: d.target, sequence: d.sequence },
                d.payload,
            );
            return Ok(());
        }
        let sources = self.spec.sources.len();
        let ts = self.targets.get_mut(&d.target).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a message for task {} arrived at a worker that does not run it",
                d.target
            ))
        })?;
        if let Some(held) = ts.accept(d, sources, &mut self.ready_bytes)? {
            for h in held {
                self.deliver(h)?;
            }
        }
        Ok(())
    }

    /// Forwards a relayed message down the tree, then delivers it to every local target.
    fn relay(&mut self, d: Delivered) -> Result<()> {
        let tree = self.relay.ok_or_else(|| {
            Error::InvalidArgument(format!(
                "edge {} received a relayed message but does not relay",
                self.spec.edge
            ))
        })?;
        let root = self.spec.placement.worker(d.source)?;
        if root == self.rank {
            self.relay_outstanding -= 1;
        }
        let mut children = tree.children(root, &self.target_workers, self.rank, &self.hosts);
        let env = Envelope { kind: d.kind, source: d.source, target: RELAY, sequence: d.sequence };
        for t in self.local_targets.clone() {
            self.deliver(Delivered { target: t, payload: d.payload.clone(), ..d.clone() })?;
        }
        // Same-host children may copy one shared copy instead of one ring copy each.
        let near = self.near_children(&env, d.payload.len(), &mut children);
        for child in children {
            self.pending_bytes[child] += d.payload.len();
            self.pending[child].push_back(Msg::new(env, d.payload.clone()));
        }
        self.queue_shared(env, d.payload, near);
        Ok(())
    }

    /// The next incoming item for `target`, pulling from the edge if needed.
    pub(crate) fn next(&mut self, target: TaskId) -> Option<Incoming> {
        if self.targets.get(&target).is_some_and(TargetState::is_empty) {
            // A failure here resurfaces from the next progress call. Messages that climb
            // wait for the next progress call, which has the operation's combiner.
            let _ = self.progress(false, &mut |p| Ok(p.concat()));
        }
        let item = self.targets.get_mut(&target)?.pop()?;
        if let Incoming::Records { payload, .. } = &item {
            self.ready_bytes -= payload.len();
            *self.bytes_received.entry(target).or_default() += payload.len() as u64;
        }
        Some(item)
    }
}

impl<S: Semantics> Dataflow<S> {
    /// Relayed messages this worker wrote once into its shared slots for several same-host
    /// workers (a broadcast's batches of at least 16 KiB), instead of into each one's ring.
    pub fn shared_messages(&self) -> u64 {
        self.core.shared_messages
    }

    /// The next event for local target `target` ([`Operation::poll`]): what its queue
    /// holds, then more results from the semantics, then the next arrival taken in.
    pub(crate) fn next_event(&mut self, target: TaskId) -> Option<Event<S::Out>> {
        self.polled += 1;
        if self.polled >= super::semantics::REFILL {
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
}
