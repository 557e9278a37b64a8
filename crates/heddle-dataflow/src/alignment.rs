//! What each local target of an edge receives, in order: records, source ends, and
//! barriers aligned across every live source ([`TargetState`]).

use std::collections::{HashSet, VecDeque};

use heddle_comm::{Delivered, Kind};

use super::spec::TaskId;
use crate::{Error, Result};

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
