//! Finishing requests: test, wait (for all or any of several), cancel, detach, and probes
//! for a message that has arrived but was not received yet.

use std::time::Duration;

use super::requests::{Finished, Matched, Memory, Pattern, RecvRequest};
use super::{Engine, Idle, RecvState};
use crate::Result;

#[cfg(doc)]
use crate::Error;

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
        self.abort.check()?;
        self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))?;
        Ok(self.requests.finished.remove(&id))
    }

    /// Whether request `id` has finished (it stays to be taken).
    pub(crate) fn is_finished(&self, id: u64) -> bool {
        self.requests.finished.contains_key(&id)
    }

    /// Takes finished request `id`.
    pub(crate) fn take_finished(&mut self, id: u64) -> Option<Finished> {
        self.requests.finished.remove(&id)
    }

    /// Moves the links until `need` of `ids` have finished (they stay to be taken).
    ///
    /// # Errors
    /// [`Error::Timeout`] naming what is still awaited when nothing moved for `timeout`;
    /// [`Error::PeerLost`] or [`Error::Aborted`]; a failure of a pass.
    pub(crate) fn wait_requests(
        &mut self,
        ids: &[u64],
        need: Need,
        op: &'static str,
        timeout: Duration,
    ) -> Result<()> {
        self.abort.check()?;
        let done = |e: &Engine| match need {
            Need::All => ids.iter().all(|id| e.is_finished(*id)),
            Need::Any => ids.is_empty() || ids.iter().any(|id| e.is_finished(*id)),
        };
        let mut idle = Idle::default();
        loop {
            let progressed =
                self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))?;
            if done(self) {
                return Ok(());
            }
            if progressed {
                idle = Idle::default();
                continue;
            }
            let peers = self.request_peers(ids);
            let what = self.describe_requests(ids);
            self.idle(&mut idle, &peers, timeout, op, &|| what.clone())?;
        }
    }

    /// Waits for a message `pattern` matches to arrive and says where it came from,
    /// without receiving it; `wait: false` only looks once.
    ///
    /// # Errors
    /// As [`Engine::wait_requests`].
    pub(crate) fn probe(
        &mut self,
        pattern: Pattern,
        wait: bool,
        timeout: Duration,
    ) -> Result<Option<Matched>> {
        self.abort.check()?;
        let mut idle = Idle::default();
        loop {
            let progressed =
                self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))?;
            if let Some(m) = self.probed(&pattern) {
                return Ok(Some(m));
            }
            if !wait {
                return Ok(None);
            }
            if progressed {
                idle = Idle::default();
                continue;
            }
            let peers: Vec<usize> = pattern.peer.into_iter().collect();
            let what = format!("rank {} probing for {}", self.rank, describe(&pattern));
            self.idle(&mut idle, &peers, timeout, "probe", &|| what.clone())?;
        }
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
            .map(|s| format!("a send to rank {} with tag {}", s.peer, s.tag))
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
