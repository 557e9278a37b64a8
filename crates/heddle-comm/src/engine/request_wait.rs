//! Finishing requests: test, wait (for all or any of several), cancel, detach, and probes
//! for a message that has arrived but was not received yet.

use std::time::Duration;

use super::requests::{Finished, Matched, Memory, Pattern, RecvRequest};
use super::{Engine, Idle, RecvState};
use crate::comm::Shared;
use crate::{Error, Result};

/// What a wait waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Awaited<'a> {
    /// `need` of these requests.
    Requests(&'a [u64], Need),
    /// A message this pattern matches.
    Probe(&'a Pattern),
    /// The non-blocking collective with this schedule id.
    Schedule(u64),
}

/// Runs passes over the links until `done` says so, with the engine's lock taken for one
/// pass at a time: other threads of the worker post, test and wait in between (a thread
/// blocked in `wait` does not shut out another's `isend`).
///
/// # Errors
/// As [`Engine::pass`] and [`Engine::check_wait`].
pub(crate) fn wait_unlocked<T>(
    shared: &Shared,
    awaited: Awaited<'_>,
    mut done: impl FnMut(&mut Engine) -> Option<T>,
) -> Result<T> {
    let timeout = shared.config.timeout;
    let mut idle = Idle::default();
    loop {
        let spin = {
            let mut engine = shared.lock();
            let progressed = engine.pass()?;
            // A receive that matched a synchronous message returns once its ack has left.
            if !engine.owes_acks() {
                if let Some(t) = done(&mut engine) {
                    return Ok(t);
                }
            }
            if progressed {
                idle = Idle::default();
                continue;
            }
            (engine.spin_polls(), engine.parks())
        };
        let (spin, parks) = spin;
        if let Some(now) = idle.wait(spin, parks, &|d| shared.park(d, || false)) {
            shared.lock().check_wait(&mut idle, now, awaited, timeout)?;
        }
    }
}

/// How many of a set of requests a wait needs finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// Every one.
    All,
    /// At least one.
    Any,
}

impl Engine {
    /// One pass over the links, then takes request `id` if it has finished.
    ///
    /// # Errors
    /// A failure of the pass (a lost peer, a malformed frame, a message that does not fit).
    pub(crate) fn test_request(&mut self, id: u64) -> Result<Option<Finished>> {
        self.pass()?;
        Ok(self.take_finished(id))
    }

    /// Whether request `id` has finished (it stays to be taken).
    pub(crate) fn is_finished(&self, id: u64) -> bool {
        self.requests.finished.contains_key(&id)
    }

    /// Takes finished request `id`.
    pub(crate) fn take_finished(&mut self, id: u64) -> Option<Finished> {
        self.requests.finished.remove(&id)
    }

    /// One pass over the links; returns whether anything moved.
    ///
    /// # Errors
    /// A failure of the pass (a lost peer, a malformed frame, a message that does not fit).
    pub(crate) fn pass(&mut self) -> Result<bool> {
        self.abort.check()?;
        self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))
    }

    /// Whether `need` of `ids` have finished.
    pub(crate) fn finished(&self, ids: &[u64], need: Need) -> bool {
        match need {
            Need::All => ids.iter().all(|id| self.is_finished(*id)),
            Need::Any => ids.is_empty() || ids.iter().any(|id| self.is_finished(*id)),
        }
    }

    /// After an idle spell of a wait for `ids` (`None`: a probe for `pattern`): fails if
    /// the job was aborted, a peer the wait needs is gone, or nothing moved for `timeout`.
    ///
    /// # Errors
    /// [`Error::Aborted`], [`Error::PeerLost`] or [`Error::Timeout`] naming what is awaited.
    pub(crate) fn check_wait(
        &mut self,
        idle: &mut Idle,
        now: std::time::Instant,
        awaited: Awaited<'_>,
        timeout: Duration,
    ) -> Result<()> {
        self.abort.check()?;
        let state = match awaited {
            Awaited::Schedule(id) => self.schedule_state(id),
            _ => None,
        };
        let (peers, op) = match (awaited, &state) {
            (Awaited::Requests(ids, need), _) => {
                (self.request_peers(ids), if need == Need::All { "wait" } else { "waitany" })
            }
            (Awaited::Probe(p), _) => (p.peer.into_iter().collect(), "probe"),
            (Awaited::Schedule(_), Some((name, ids))) => (self.request_peers(ids), *name),
            (Awaited::Schedule(_), None) => (Vec::new(), "wait"),
        };
        if idle.check_due(now) {
            for &p in &peers {
                self.links[p].check_alive(p).map_err(|e| self.failed(e))?;
            }
        }
        let waited = idle.waited(now);
        if waited >= timeout {
            let detail = match (awaited, &state) {
                (Awaited::Requests(ids, _), _) => self.describe_requests(ids),
                (Awaited::Probe(p), _) => {
                    format!("rank {} probing for {}", self.rank, describe(p))
                }
                (Awaited::Schedule(_), Some((_, ids))) => self.describe_requests(ids),
                (Awaited::Schedule(_), None) => format!("rank {}", self.rank),
            };
            return Err(self.failed(Error::Timeout { op, waited, detail }));
        }
        Ok(())
    }

    /// Whether acks for matched synchronous messages are still to leave.
    pub(crate) fn owes_acks(&self) -> bool {
        !self.acks.is_empty()
    }

    /// Idle polls before a waiting thread yields.
    pub(crate) fn spin_polls(&self) -> u32 {
        self.spin_polls
    }

    /// Where a message `pattern` matches came from, if one has arrived (not received).
    pub(crate) fn probe(&self, pattern: &Pattern) -> Option<Matched> {
        self.probed(pattern)
    }

    fn probed(&self, pattern: &Pattern) -> Option<Matched> {
        if let Some(m) = self.unexpected.peek(pattern) {
            return Some(m);
        }
        let peers: Vec<usize> = match pattern.peer {
            Some(p) => vec![p],
            None => (0..self.links.len()).collect(),
        };
        peers.into_iter().find_map(|p| {
            self.inbound[p].head.filter(|m| pattern.matches(m.peer, pattern.edge, m.tag))
        })
    }

    /// Cancels receive `id` if no message has started to arrive for it; returns whether
    /// it was cancelled (then it finishes with no message). Sends cannot be cancelled.
    pub(crate) fn cancel_request(&mut self, id: u64) -> bool {
        let recvs = &mut self.requests.recvs;
        let Some(i) = recvs.iter().position(|r| r.id == id && r.state == RecvState::Waiting) else {
            return false;
        };
        recvs.remove(i);
        self.requests.finished.insert(id, Finished { matched: None, data: None });
        true
    }

    /// Lets go of request `id` before its memory does: a send still to leave goes on from a
    /// copy, a receive still waiting is dropped, and a message already arriving for it is
    /// taken into memory of the engine's and discarded.
    pub(crate) fn detach(&mut self, id: u64) {
        if self.requests.finished.remove(&id).is_some() {
            return;
        }
        if let Some(s) = self.requests.sends.iter_mut().find(|s| s.id == id) {
            if let Memory::Borrowed { .. } = s.mem {
                s.mem = Memory::Owned(s.mem.bytes().to_vec());
            }
            s.detached = true;
            return;
        }
        let recvs = &mut self.requests.recvs;
        if let Some(i) = recvs.iter().position(|r| r.id == id) {
            if recvs[i].state == RecvState::Waiting {
                recvs.remove(i);
            } else {
                let r: &mut RecvRequest = &mut recvs[i];
                if let Memory::Borrowed { len, .. } = r.mem {
                    r.mem = Memory::Owned(vec![0; len]);
                }
                r.detached = true;
            }
        }
    }

    /// The peers a wait for `ids` needs alive.
    fn request_peers(&self, ids: &[u64]) -> Vec<usize> {
        let r = &self.requests;
        let sends = r.sends.iter().filter(|s| ids.contains(&s.id)).map(|s| s.peer);
        let recvs = r.recvs.iter().filter(|q| ids.contains(&q.id)).filter_map(|q| q.pattern.peer);
        let mut peers: Vec<usize> = sends.chain(recvs).collect();
        peers.sort_unstable();
        peers.dedup();
        peers
    }

    fn describe_requests(&self, ids: &[u64]) -> String {
        let r = &self.requests;
        let mut parts: Vec<String> = r
            .sends
            .iter()
            .filter(|s| ids.contains(&s.id))
            .map(|s| {
                let what = if s.awaits_ack() {
                    "a synchronous send (its receive not posted yet)"
                } else {
                    "a send"
                };
                format!("{what} to rank {} with tag {}", s.peer, s.tag)
            })
            .collect();
        parts.extend(
            r.recvs
                .iter()
                .filter(|q| ids.contains(&q.id))
                .map(|q| format!("a receive of {}", describe(&q.pattern))),
        );
        format!("rank {} waiting for {}", self.rank, parts.join(", "))
    }
}

/// "a message from rank 1 with tag 7", "any source", "any tag".
fn describe(p: &Pattern) -> String {
    let from = p.peer.map_or("any rank".to_string(), |r| format!("rank {r}"));
    let tag = p.tag.map_or("any tag".to_string(), |t| format!("tag {t}"));
    format!("a message from {from} with {tag}")
}
