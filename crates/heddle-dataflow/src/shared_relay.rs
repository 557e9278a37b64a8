//! A broadcast's relayed batches through the worker's shared slots (`heddle_comm`'s
//! `SharedRef`): a batch of at least [`SHARE_FROM_BYTES`] for two or more children of the
//! broadcast tree on this worker's host is queued once for all of them
//! ([`SharedBatch`]); when the first of them has credit for it, it is written into a free
//! slot with a hold per child, and each child is sent a reference instead of the batch
//! (addressed to [`RELAY_SHARED`]), charged the batch's credit. If no slot is free then,
//! every child gets its own copy through the rings, so no edge ever waits for slots. The
//! claim waits for credit so that slots are held only by batches on their way, not by
//! batches queued behind the readers' windows.

use std::sync::{Arc, OnceLock};

use heddle_comm::{EdgeIo, EdgeLink, Envelope, Kind, SharedRef};

use super::edge_core::{EdgeCore, Msg};
use super::spec::TaskId;

/// Target id of a relayed message whose data waits in the sending worker's shared slots
/// (the message carries a [`SharedRef`]).
pub(crate) const RELAY_SHARED: TaskId = u32::MAX - 1;

/// Relayed data messages from this size go through the shared slots (smaller ones cost
/// less copied into each ring than a slot's claim and the extra copy).
const SHARE_FROM_BYTES: usize = 16 << 10;

/// A relayed batch queued for several same-host children.
#[derive(Debug)]
pub(crate) struct SharedBatch {
    data: Vec<u8>,
    readers: u32,
    /// The slot it went into (`None`: none was free), decided when the first child could
    /// be sent to.
    claim: OnceLock<Option<SharedRef>>,
}

/// The length of the data a shared message's reference stands for (`None`: not one): the
/// credit its sender is charged and its receiver returns.
pub(crate) fn shared_len(target: TaskId, data: &[u8]) -> Option<usize> {
    (target == RELAY_SHARED).then(|| SharedRef::from_bytes(data)).flatten().map(|r| r.len())
}

impl EdgeCore {
    /// Takes out of `children` the ones that will share a relayed message of `len` bytes
    /// (same host, at least two of them, the edge's slots on, a large data message).
    pub(crate) fn near_children(
        &self,
        env: &Envelope,
        len: usize,
        children: &mut Vec<usize>,
    ) -> Vec<usize> {
        if !self.share_slots || env.kind != Kind::Data || len < SHARE_FROM_BYTES {
            return Vec::new();
        }
        let link = self.channels.link();
        let near: Vec<usize> = children.iter().copied().filter(|&c| link.shares_with(c)).collect();
        if near.len() < 2 {
            return Vec::new();
        }
        children.retain(|c| !near.contains(c));
        near
    }

    /// Queues `data` once for every child of `near`.
    pub(crate) fn queue_shared(&mut self, env: Envelope, data: Vec<u8>, near: Vec<usize>) {
        if near.is_empty() {
            return;
        }
        let len = data.len();
        let batch =
            Arc::new(SharedBatch { data, readers: near.len() as u32, claim: OnceLock::new() });
        for child in near {
            self.pending_bytes[child] += len;
            self.pending[child].push_back(Msg {
                env,
                data: Vec::new(),
                shared: Some(batch.clone()),
            });
        }
    }

    /// Sends queued messages as credit allows (a shared batch as its reference, once it has
    /// a slot). Returns whether any went.
    pub(crate) fn send_pending(&mut self, link: &EdgeLink, io: &mut EdgeIo<'_>) -> bool {
        let mut moved = false;
        for w in 0..self.pending.len() {
            while let Some(m) = self.pending[w].pop_front() {
                let Some(batch) = m.shared.clone() else {
                    let len = m.data.len();
                    match io.try_send(w, m.env, m.data) {
                        Ok(()) => {
                            self.pending_bytes[w] -= len;
                            moved = true;
                            continue;
                        }
                        Err(data) => {
                            self.pending[w].push_front(Msg::new(m.env, data));
                            break;
                        }
                    }
                };
                let len = batch.data.len();
                if !io.can_send(w, len) {
                    self.pending[w].push_front(m);
                    break;
                }
                let claim = batch.claim.get_or_init(|| {
                    let r = link.share(&batch.data, batch.readers);
                    self.shared_messages += u64::from(r.is_some());
                    r
                });
                let (env, data) = match claim {
                    Some(r) => (Envelope { target: RELAY_SHARED, ..m.env }, r.to_bytes().to_vec()),
                    None => (m.env, batch.data.clone()),
                };
                if io.try_send_charged(w, env, data, len).is_err() {
                    self.pending[w].push_front(m); // credit checked above: not expected
                    break;
                }
                self.pending_bytes[w] -= len;
                moved = true;
            }
        }
        moved
    }
}

impl Drop for EdgeCore {
    /// Drops the holds of shared batches that will not be read: references still queued
    /// to leave this worker (an edge ended early, by a failure or an abort), and
    /// references that arrived here and were never taken.
    fn drop(&mut self) {
        let link = self.channels.link();
        for m in self.pending.iter().flatten() {
            if let Some(Some(r)) = m.shared.as_ref().and_then(|b| b.claim.get()) {
                link.release_shared(*r);
            }
        }
        let mut io = link.lock();
        let _ = io.poll();
        while let Some(d) = io.recv() {
            if let Some(r) = SharedRef::from_bytes(&d.payload).filter(|_| d.target == RELAY_SHARED)
            {
                drop(link.take_shared(d.from, r));
            }
        }
    }
}
