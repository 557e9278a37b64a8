//! Requests: sends and receives posted now and finished later (MPI's `Isend`/`Irecv`).
//! Every pass of the engine moves them, whichever call drives it, so a blocking receive
//! also pushes an earlier non-blocking send. Receives here may match any source or tag.

use std::collections::HashMap;

use heddle_wire::{Codec, Header, Kind};

use super::{push_message, Engine, Frame, RecvState, SEND_DONE};
use crate::stamp::{self, Signature};
use crate::{Error, Result};

/// The memory a request reads from or writes into.
#[derive(Debug)]
pub(crate) enum Memory {
    /// The caller's memory: it must stay valid, and untouched, until the request has
    /// finished or been detached ([`Engine::detach`]).
    Borrowed { ptr: *mut u8, len: usize },
    /// Memory the engine owns (an object's bytes, or a detached request's copy).
    Owned(Vec<u8>),
    /// A receive of any length: cleared, then filled.
    Grow(Vec<u8>),
}

// SAFETY: a borrowed region is only touched by the engine, under its lock, while the
// owner of the memory keeps it alive (a request detaches itself before it lets go).
unsafe impl Send for Memory {}

impl Memory {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            // SAFETY: see the type's contract.
            Memory::Borrowed { ptr, len } => unsafe { std::slice::from_raw_parts(*ptr, *len) },
            Memory::Owned(v) | Memory::Grow(v) => v,
        }
    }

    fn start(&mut self, peer: usize, msg_len: u64) -> Result<()> {
        let capacity = match self {
            Memory::Borrowed { len, .. } => *len,
            Memory::Owned(v) => v.len(),
            Memory::Grow(v) => {
                v.clear();
                v.reserve(msg_len as usize);
                return Ok(());
            }
        };
        if msg_len > capacity as u64 {
            return Err(Error::Truncated { rank: peer, got: msg_len, capacity });
        }
        Ok(())
    }

    fn write(&mut self, off: usize, payload: &[u8]) {
        match self {
            // SAFETY: `start` checked the message fits; see the type's contract.
            Memory::Borrowed { ptr, .. } => unsafe {
                std::ptr::copy_nonoverlapping(payload.as_ptr(), ptr.add(off), payload.len());
            },
            Memory::Owned(v) => v[off..off + payload.len()].copy_from_slice(payload),
            Memory::Grow(v) => v.extend_from_slice(payload),
        }
    }
}

/// What a receive accepts: one edge, a source world rank and a tag (`None`: any).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pattern {
    pub(crate) peer: Option<usize>,
    pub(crate) edge: u32,
    pub(crate) tag: Option<u32>,
}

impl Pattern {
    pub(crate) fn matches(&self, peer: usize, edge: u32, tag: u32) -> bool {
        self.edge == edge
            && self.peer.is_none_or(|p| p == peer)
            && self.tag.is_none_or(|t| t == tag)
    }
}

/// Where a matched message came from and what it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Matched {
    pub(crate) peer: usize,
    pub(crate) tag: u32,
    pub(crate) len: u64,
    pub(crate) codec: Codec,
}

impl Matched {
    pub(crate) fn of(peer: usize, h: &Header) -> Matched {
        Matched { peer, tag: h.tag, len: h.msg_len, codec: h.codec }
    }
}

/// What a request's message says it is: its element type, and the collective call it
/// belongs to (`Signature::NONE` for point-to-point).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Label {
    pub(crate) codec: Codec,
    pub(crate) signature: Signature,
    /// A synchronous send: it finishes when a receive has matched it (spec/wire.md A1).
    pub(crate) sync: bool,
}

impl Label {
    /// A point-to-point message's label.
    pub(crate) fn p2p(codec: Codec) -> Label {
        Label { codec, signature: Signature::NONE, sync: false }
    }

    /// A collective call's message.
    pub(crate) fn collective(codec: Codec, signature: Signature) -> Label {
        Label { codec, signature, sync: false }
    }
}

/// A finished request: the message a receive matched (`None`: a send, or a cancelled
/// receive) and, for a receive of any length, its bytes.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) matched: Option<Matched>,
    pub(crate) data: Option<Vec<u8>>,
}

#[derive(Debug)]
pub(super) struct SendRequest {
    pub(super) id: u64,
    pub(super) peer: usize,
    edge: u32,
    pub(super) tag: u32,
    label: Label,
    pub(super) mem: Memory,
    offset: usize,
    /// A synchronous send's receiver has acknowledged the match.
    pub(super) acked: bool,
    /// Its owner let go ([`Engine::detach`]): nobody takes it when it finishes.
    pub(super) detached: bool,
}

impl SendRequest {
    /// Whether it is a synchronous send whose message has left but was not matched yet.
    pub(super) fn awaits_ack(&self) -> bool {
        self.label.sync && self.offset == SEND_DONE && !self.acked
    }
}

#[derive(Debug)]
pub(super) struct RecvRequest {
    pub(super) id: u64,
    pub(super) pattern: Pattern,
    expect: Label,
    pub(super) mem: Memory,
    pub(super) state: RecvState,
    matched: Option<Matched>,
    /// As [`SendRequest::detached`].
    pub(super) detached: bool,
}

/// The requests of one engine, in the order they were posted.
#[derive(Debug, Default)]
pub(crate) struct Requests {
    next: u64,
    pub(super) sends: Vec<SendRequest>,
    pub(super) recvs: Vec<RecvRequest>,
    pub(super) finished: HashMap<u64, Finished>,
}

impl Requests {
    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Whether a posted send to `peer` has not fully left: later sends to it must wait.
    pub(crate) fn sending_to(&self, peer: usize) -> bool {
        self.sends.iter().any(|s| s.peer == peer && s.offset != SEND_DONE)
    }

    /// Whether a posted receive waits for a message that `peer` may send, or a
    /// synchronous send to `peer` waits for its ack (which may come behind a message of
    /// `peer`'s that nothing has asked for yet).
    pub(crate) fn waits_on(&self, peer: usize) -> bool {
        self.recvs
            .iter()
            .any(|r| r.state == RecvState::Waiting && r.pattern.peer.is_none_or(|p| p == peer))
            || self.sends.iter().any(|s| s.peer == peer && s.awaits_ack())
    }

    /// The oldest waiting receive that takes a message from `peer` starting with `h`,
    /// made active: returns its id.
    pub(crate) fn claim(
        &mut self,
        peer: usize,
        h: &Header,
        signature: Signature,
    ) -> Result<Option<u64>> {
        let Some(r) = self
            .recvs
            .iter_mut()
            .find(|r| r.state == RecvState::Waiting && r.pattern.matches(peer, h.edge, h.tag))
        else {
            return Ok(None);
        };
        stamp::check(r.expect.codec, r.expect.signature, peer, h.codec, signature)?;
        r.mem.start(peer, h.msg_len)?;
        r.state = RecvState::Active;
        r.matched = Some(Matched::of(peer, h));
        Ok(Some(r.id))
    }

    /// Writes a fragment of the message receive `id` is taking.
    pub(crate) fn write(&mut self, id: u64, off: usize, payload: &[u8]) {
        if let Some(r) = self.recvs.iter_mut().find(|r| r.id == id) {
            r.mem.write(off, payload);
        }
    }

    /// `peer` acknowledged that a receive matched synchronous send `id`.
    pub(crate) fn acked(&mut self, peer: usize, id: u64) {
        if let Some(s) = self.sends.iter_mut().find(|s| s.id == id && s.peer == peer) {
            s.acked = true;
        }
    }

    /// Receive `id` has its whole message.
    pub(crate) fn complete_recv(&mut self, id: u64) {
        if let Some(i) = self.recvs.iter().position(|r| r.id == id) {
            let r = self.recvs.remove(i);
            if r.detached {
                return;
            }
            let data = match r.mem {
                Memory::Grow(v) => Some(v),
                _ => None,
            };
            self.finished.insert(id, Finished { matched: r.matched, data });
        }
    }

    /// Gives a whole message that was stored on arrival to the oldest waiting receive it
    /// matches; returns it back if none does.
    pub(crate) fn deliver(
        &mut self,
        m: Matched,
        edge: u32,
        signature: Signature,
        data: Vec<u8>,
    ) -> Result<Option<Vec<u8>>> {
        let Some(r) = self
            .recvs
            .iter_mut()
            .find(|r| r.state == RecvState::Waiting && r.pattern.matches(m.peer, edge, m.tag))
        else {
            return Ok(Some(data));
        };
        stamp::check(r.expect.codec, r.expect.signature, m.peer, m.codec, signature)?;
        r.mem.start(m.peer, m.len)?;
        r.mem.write(0, &data);
        r.matched = Some(m);
        let id = r.id;
        self.complete_recv(id);
        Ok(None)
    }
}

impl Engine {
    /// Posts a send of `mem` to world rank `peer`; it leaves behind earlier messages to the
    /// same peer and before later ones. Returns the request's id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the world; a failure of the first
    /// pass that tries to send it.
    pub(crate) fn post_send(
        &mut self,
        peer: usize,
        edge: u32,
        tag: u32,
        label: Label,
        mem: Memory,
    ) -> Result<u64> {
        let id = self.enqueue_send(peer, edge, tag, label, mem)?;
        self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))?;
        Ok(id)
    }

    /// Posts a send as [`Engine::post_send`] does, without a pass over the links (the next
    /// pass moves it).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the world.
    pub(crate) fn enqueue_send(
        &mut self,
        peer: usize,
        edge: u32,
        tag: u32,
        label: Label,
        mem: Memory,
    ) -> Result<u64> {
        self.check_peer(peer, "send to")?;
        let id = self.requests.id();
        let (offset, acked, detached) = (0, false, false);
        let s = SendRequest { id, peer, edge, tag, label, mem, offset, acked, detached };
        self.requests.sends.push(s);
        Ok(id)
    }

    /// Posts a receive of a message matching `pattern` into `mem`. Returns its id.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a rank outside the world; [`Error::Truncated`] or
    /// [`Error::TypeMismatch`] if an early message it matches does not fit.
    pub(crate) fn post_recv(
        &mut self,
        pattern: Pattern,
        expect: Codec,
        mem: Memory,
    ) -> Result<u64> {
        let id = self.enqueue_recv(pattern, Label::p2p(expect), mem)?;
        if !self.is_finished(id) {
            self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))?;
        }
        Ok(id)
    }

    /// Posts a receive as [`Engine::post_recv`] does, without a pass over the links; it
    /// finishes at once if a message it matches arrived before.
    ///
    /// # Errors
    /// As [`Engine::post_recv`].
    pub(crate) fn enqueue_recv(
        &mut self,
        pattern: Pattern,
        expect: Label,
        mem: Memory,
    ) -> Result<u64> {
        if let Some(p) = pattern.peer {
            self.check_peer(p, "receive from")?;
        }
        let id = self.requests.id();
        let mut r = RecvRequest {
            id,
            pattern,
            expect,
            mem,
            state: RecvState::Waiting,
            matched: None,
            detached: false,
        };
        if let Some((m, signature, data)) = self.unexpected.take(&pattern, &mut self.acks) {
            let early = stamp::check(expect.codec, expect.signature, m.peer, m.codec, signature)
                .and_then(|()| r.mem.start(m.peer, m.len));
            early.map_err(|e| self.failed(e))?;
            r.mem.write(0, &data);
            r.matched = Some(m);
            self.requests.recvs.push(r);
            self.requests.complete_recv(id);
            return Ok(id);
        }
        self.requests.recvs.push(r);
        Ok(id)
    }

    fn check_peer(&self, peer: usize, what: &str) -> Result<()> {
        if peer < self.links.len() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{what} rank {peer} in a world of {}",
            self.links.len()
        )))
    }

    /// Pushes the posted sends as far as credit allows, in order per peer, and finishes
    /// those that have fully left this process. None starts to a peer in `midway` (an
    /// exchange's message to it is half sent).
    pub(super) fn push_requests(&mut self, midway: &[usize]) -> Result<bool> {
        let Engine { requests, links, rank, fragment, .. } = self;
        let mut progressed = false;
        for i in 0..requests.sends.len() {
            let (earlier, rest) = requests.sends.split_at_mut(i);
            let s = &mut rest[0];
            if s.offset == SEND_DONE
                || (s.offset == 0 && midway.contains(&s.peer))
                || earlier.iter().any(|e| e.peer == s.peer && e.offset != SEND_DONE)
            {
                continue;
            }
            // A synchronous message goes as its own kind, numbered by its request's id.
            let (kind, sequence) = if s.label.sync {
                (Kind::SyncData, s.id)
            } else {
                (Kind::Data, s.label.signature.0)
            };
            let frame = Frame {
                peer: s.peer,
                edge: s.edge,
                tag: s.tag,
                codec: s.label.codec,
                kind,
                sequence,
            };
            progressed |=
                push_message(links, *rank, *fragment, frame, s.mem.bytes(), &mut s.offset)?;
        }
        let mut i = 0;
        while i < requests.sends.len() {
            let s = &requests.sends[i];
            if s.offset == SEND_DONE && links[s.peer].flushed() && !s.awaits_ack() {
                let s = requests.sends.remove(i);
                if !s.detached {
                    requests.finished.insert(s.id, Finished { matched: None, data: None });
                }
            } else {
                i += 1;
            }
        }
        Ok(progressed)
    }
}
