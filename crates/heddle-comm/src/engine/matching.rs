//! Receive-side matching: posted receives and where their bytes go, the message in progress
//! on each link, and the store of messages that arrived before their receive was posted.

use std::collections::{HashMap, VecDeque};

use heddle_wire::{Codec, Header, Kind};

use super::acks::{sync_id, Acks};
use super::{Engine, Matched, Pattern};
use crate::channels::DATAFLOW_EDGE;
use crate::stamp::{self, Signature};
use crate::transport::Polled;
use crate::{Error, Result};

/// Where the bytes of a received message go.
pub(crate) enum Sink<'a> {
    /// Copied into a buffer at least as long as the message.
    Copy(&'a mut [u8]),
    /// Folded into a buffer exactly as long as the message, fragment by fragment.
    Reduce(&'a mut [u8], &'a dyn Fn(&mut [u8], &[u8])),
    /// Appended to a vector that is cleared first (any length).
    Grow(&'a mut Vec<u8>),
}

/// One message to receive from a peer (world rank).
pub(crate) struct RecvOp<'a> {
    pub(crate) peer: usize,
    pub(crate) edge: u32,
    pub(crate) tag: u32,
    pub(crate) sink: Sink<'a>,
    /// Set to the message length once it starts arriving.
    pub(crate) len: u64,
    /// The element type the receive buffer holds (`Raw`: any).
    expect: Codec,
    /// The collective call this receive belongs to (`NONE`: any message).
    signature: Signature,
}

impl<'a> RecvOp<'a> {
    pub(crate) fn new(peer: usize, edge: u32, tag: u32, sink: Sink<'a>) -> RecvOp<'a> {
        RecvOp { peer, edge, tag, sink, len: 0, expect: Codec::Raw, signature: Signature::NONE }
    }

    /// The same receive, refusing a message typed as another element type.
    pub(crate) fn expecting(mut self, codec: Codec) -> RecvOp<'a> {
        self.expect = codec;
        self
    }

    /// The same receive, refusing a message of another collective call.
    pub(crate) fn signed(mut self, signature: Signature) -> RecvOp<'a> {
        self.signature = signature;
        self
    }

    /// Refuses a message from `peer` of another element type or collective call.
    fn check(&self, peer: usize, codec: Codec, signature: Signature) -> Result<()> {
        stamp::check(self.expect, self.signature, peer, codec, signature)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RecvState {
    Waiting,
    Active,
    Done,
}

#[derive(Debug)]
enum Incoming {
    Posted(usize),
    /// Taken by the non-blocking receive with this id.
    Request(u64),
    Stored {
        edge: u32,
        tag: u32,
        data: Vec<u8>,
        codec: Codec,
        signature: Signature,
        /// The send id of a synchronous message (its ack is owed once it matches).
        sync: Option<u64>,
    },
}

#[derive(Debug, Default)]
pub(super) struct Inbound {
    current: Option<Incoming>,
    /// The message waiting at the head of the link for its receive (seen by probes).
    pub(super) head: Option<Matched>,
    offset: u64,
    msg_len: u64,
}

type MatchKey = (usize, u32, u32);

/// An early message: its arrival number, element type, collective call, synchronous send
/// id and bytes.
type Early = (u64, Codec, Signature, Option<u64>, Vec<u8>);

/// Messages that arrived before a receive matching them was posted, kept in arrival order
/// per (peer, edge, tag), with the bytes held per peer bounded by a window's worth.
#[derive(Debug)]
pub(super) struct Unexpected {
    messages: HashMap<MatchKey, VecDeque<Early>>,
    bytes: Vec<u64>,
    limit: u64,
    arrivals: u64,
}

impl Unexpected {
    /// An empty store for `peers` peers, copying aside at most `limit` bytes per peer
    /// (unless a receive from that peer is queued behind the message).
    pub(super) fn new(peers: usize, limit: u64) -> Unexpected {
        Unexpected { messages: HashMap::new(), bytes: vec![0; peers], limit, arrivals: 0 }
    }

    /// Completes `r` from the oldest stored message with its (peer, edge, tag), owing an
    /// ack if it was synchronous; returns whether there was one.
    pub(super) fn deliver(&mut self, r: &mut RecvOp<'_>, acks: &mut Acks) -> Result<bool> {
        let key = (r.peer, r.edge, r.tag);
        let Some((_, codec, signature, sync, msg)) =
            self.messages.get_mut(&key).and_then(VecDeque::pop_front)
        else {
            return Ok(false);
        };
        self.bytes[r.peer] -= msg.len() as u64;
        r.check(r.peer, codec, signature)?;
        deliver_whole(r, &msg)?;
        acks.owe(r.peer, r.edge, r.tag, sync);
        Ok(true)
    }

    /// The key of the oldest stored message `pattern` matches.
    fn oldest(&self, pattern: &Pattern) -> Option<MatchKey> {
        if let (Some(peer), Some(tag)) = (pattern.peer, pattern.tag) {
            let key = (peer, pattern.edge, tag);
            return self.messages.get(&key).is_some_and(|q| !q.is_empty()).then_some(key);
        }
        self.messages
            .iter()
            .filter(|(&(p, e, t), q)| !q.is_empty() && pattern.matches(p, e, t))
            .min_by_key(|(_, q)| q[0].0)
            .map(|(&k, _)| k)
    }

    /// Where the oldest stored message `pattern` matches came from, without taking it.
    pub(super) fn peek(&self, pattern: &Pattern) -> Option<Matched> {
        let key = self.oldest(pattern)?;
        let (_, codec, _, _, data) = &self.messages[&key][0];
        Some(Matched { peer: key.0, tag: key.2, len: data.len() as u64, codec: *codec })
    }

    /// Takes the oldest stored message `pattern` matches, owing an ack if it was
    /// synchronous.
    pub(super) fn take(
        &mut self,
        pattern: &Pattern,
        acks: &mut Acks,
    ) -> Option<(Matched, Signature, Vec<u8>)> {
        let key = self.oldest(pattern)?;
        let (_, codec, signature, sync, data) = self.messages.get_mut(&key)?.pop_front()?;
        self.bytes[key.0] -= data.len() as u64;
        acks.owe(key.0, key.1, key.2, sync);
        let m = Matched { peer: key.0, tag: key.2, len: data.len() as u64, codec };
        Some((m, signature, data))
    }
}

impl Engine {
    /// Takes one frame from `peer` if there is one: a fragment of a message for a posted
    /// receive or for the unexpected store, or a frame for the dataflow channels.
    pub(super) fn poll_one(
        &mut self,
        peer: usize,
        recvs: &mut [RecvOp<'_>],
        state: &mut [RecvState],
    ) -> Result<Polled> {
        let Engine { links, inbound, unexpected, channels, requests, acks, .. } = self;
        let inb = &mut inbound[peer];
        let mut handler = |h: &Header, payload: &[u8]| -> Result<bool> {
            if h.kind == Kind::Ack {
                requests.acked(peer, h.sequence);
                return Ok(true);
            }
            let data = h.kind == Kind::Data || h.kind == Kind::SyncData;
            if !data || h.edge & DATAFLOW_EDGE != 0 {
                return channels.on_frame(peer, h, payload).map(|()| true);
            }
            // A synchronous message's `sequence` is its send id, not a collective's call.
            let (sync, signature) = match sync_id(h) {
                Some(id) => (Some(id), Signature::NONE),
                None => (None, Signature(h.sequence)),
            };
            let bad = |what: &'static str| Error::Wire {
                rank: peer,
                source: heddle_wire::Error::Inconsistent(what),
            };
            if h.flags.is_first() {
                if inb.current.is_some() {
                    return Err(bad("a new message started before the previous one ended"));
                }
                let posted = (0..recvs.len()).find(|&i| {
                    state[i] == RecvState::Waiting
                        && recvs[i].peer == peer
                        && recvs[i].edge == h.edge
                        && recvs[i].tag == h.tag
                });
                // Non-blocking receives were posted before this call's own.
                let request = requests.claim(peer, h, signature)?;
                inb.head = None;
                match (request, posted) {
                    (Some(id), _) => {
                        acks.owe(peer, h.edge, h.tag, sync);
                        inb.current = Some(Incoming::Request(id));
                    }
                    (None, Some(i)) => {
                        recvs[i].check(peer, h.codec, signature)?;
                        start_sink(&mut recvs[i], peer, h.msg_len)?;
                        state[i] = RecvState::Active;
                        acks.owe(peer, h.edge, h.tag, sync);
                        inb.current = Some(Incoming::Posted(i));
                    }
                    (None, None) => {
                        // An early message is copied aside only while that stays within the
                        // window's worth of bytes; a larger one waits in the link (the sender
                        // stalls on credit) until its receive is posted, so a receiver that
                        // runs behind costs no extra copy. Exception: a receive we are waiting
                        // for from this same peer may be queued behind it, so take it then.
                        let fits = unexpected.bytes[peer] + h.msg_len <= unexpected.limit;
                        let blocking = requests.waits_on(peer)
                            || (0..recvs.len())
                                .any(|i| state[i] == RecvState::Waiting && recvs[i].peer == peer);
                        if !fits && !blocking {
                            inb.head = Some(Matched::of(peer, h));
                            return Ok(false);
                        }
                        unexpected.bytes[peer] += h.msg_len;
                        let data = Vec::with_capacity(h.msg_len as usize);
                        inb.current = Some(Incoming::Stored {
                            edge: h.edge,
                            tag: h.tag,
                            data,
                            codec: h.codec,
                            signature,
                            sync,
                        });
                    }
                }
                inb.offset = 0;
                inb.msg_len = h.msg_len;
            }
            let off = inb.offset;
            if h.msg_len != inb.msg_len || off + payload.len() as u64 > inb.msg_len {
                return Err(bad("fragment lengths disagree with the message length"));
            }
            match inb.current.as_mut() {
                None => return Err(bad("a middle fragment arrived with no message in progress")),
                Some(Incoming::Posted(i)) => write_sink(&mut recvs[*i].sink, off as usize, payload),
                Some(Incoming::Request(id)) => requests.write(*id, off as usize, payload),
                Some(Incoming::Stored { data, .. }) => data.extend_from_slice(payload),
            }
            inb.offset += payload.len() as u64;
            if h.flags.is_last() {
                if inb.offset != inb.msg_len {
                    return Err(bad("last fragment ended before the message length"));
                }
                match inb.current.take() {
                    Some(Incoming::Posted(i)) => state[i] = RecvState::Done,
                    Some(Incoming::Request(id)) => requests.complete_recv(id),
                    Some(Incoming::Stored { edge, tag, data, codec, signature, sync }) => {
                        let m = Matched { peer, tag, len: data.len() as u64, codec };
                        let Some(data) = requests.deliver(m, edge, signature, data)? else {
                            unexpected.bytes[peer] -= m.len;
                            acks.owe(peer, edge, tag, sync);
                            return Ok(true);
                        };
                        let waiting = (0..recvs.len()).find(|&i| {
                            state[i] == RecvState::Waiting
                                && recvs[i].peer == peer
                                && recvs[i].edge == edge
                                && recvs[i].tag == tag
                        });
                        match waiting {
                            Some(i) => {
                                unexpected.bytes[peer] -= data.len() as u64;
                                recvs[i].check(peer, codec, signature)?;
                                deliver_whole(&mut recvs[i], &data)?;
                                state[i] = RecvState::Done;
                                acks.owe(peer, edge, tag, sync);
                            }
                            None => {
                                unexpected.arrivals += 1;
                                let early = (unexpected.arrivals, codec, signature, sync, data);
                                unexpected
                                    .messages
                                    .entry((peer, edge, tag))
                                    .or_default()
                                    .push_back(early);
                            }
                        }
                    }
                    None => {}
                }
            }
            Ok(true)
        };
        links[peer].poll(&mut handler)
    }
}

fn start_sink(r: &mut RecvOp<'_>, peer: usize, msg_len: u64) -> Result<()> {
    r.len = msg_len;
    match &mut r.sink {
        Sink::Copy(buf) if msg_len > buf.len() as u64 => {
            Err(Error::Truncated { rank: peer, got: msg_len, capacity: buf.len() })
        }
        Sink::Reduce(buf, _) if msg_len != buf.len() as u64 => {
            Err(Error::Truncated { rank: peer, got: msg_len, capacity: buf.len() })
        }
        Sink::Grow(v) => {
            v.clear();
            v.reserve(msg_len as usize);
            Ok(())
        }
        _ => Ok(()),
    }
}

fn write_sink(sink: &mut Sink<'_>, off: usize, payload: &[u8]) {
    match sink {
        Sink::Copy(buf) => buf[off..off + payload.len()].copy_from_slice(payload),
        Sink::Reduce(buf, f) => f(&mut buf[off..off + payload.len()], payload),
        Sink::Grow(v) => v.extend_from_slice(payload),
    }
}

fn deliver_whole(r: &mut RecvOp<'_>, msg: &[u8]) -> Result<()> {
    start_sink(r, r.peer, msg.len() as u64)?;
    write_sink(&mut r.sink, 0, msg);
    Ok(())
}
