//! The progress engine of one worker: moves fragments over every link from the calling
//! thread, matches incoming messages to posted receives, and keeps early arrivals.
//!
//! Work is expressed as an *exchange*: a set of sends and receives that complete together
//! (one step of a collective algorithm, or a single send/recv). The caller's thread polls
//! the links (spin, then yield, then short sleeps) until the exchange completes, a peer is
//! lost, or nothing has moved for the configured timeout.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use heddle_wire::{Codec, Flags, Header, Kind};

use crate::channels::{Channels, DATAFLOW_EDGE};
pub(crate) use crate::idle::Idle;
use crate::stamp::{self, Signature};
use crate::transport::{Link, Polled};
use crate::{Error, JobAbort, Result};

/// Where the bytes of a received message go.
pub(crate) enum Sink<'a> {
    /// Copied into a buffer at least as long as the message.
    Copy(&'a mut [u8]),
    /// Folded into a buffer exactly as long as the message, fragment by fragment.
    Reduce(&'a mut [u8], &'a dyn Fn(&mut [u8], &[u8])),
    /// Appended to a vector that is cleared first (any length).
    Grow(&'a mut Vec<u8>),
}

/// One message to send to a peer (world rank).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendOp<'a> {
    pub(crate) peer: usize,
    pub(crate) edge: u32,
    pub(crate) tag: u32,
    pub(crate) data: &'a [u8],
    /// What the bytes are: `Raw`, or an array of one element type (checked by a typed
    /// receive).
    pub(crate) codec: Codec,
    /// The collective call the message belongs to (`NONE` for point-to-point).
    pub(crate) signature: Signature,
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
enum RecvState {
    Waiting,
    Active,
    Done,
}

#[derive(Debug)]
enum Incoming {
    Posted(usize),
    Stored { edge: u32, tag: u32, data: Vec<u8>, codec: Codec, signature: Signature },
}

#[derive(Debug, Default)]
struct Inbound {
    current: Option<Incoming>,
    offset: u64,
    msg_len: u64,
}

type MatchKey = (usize, u32, u32);

/// One worker's links and message-matching state.
#[derive(Debug)]
pub(crate) struct Engine {
    rank: usize,
    links: Vec<Link>,
    inbound: Vec<Inbound>,
    unexpected: HashMap<MatchKey, VecDeque<(Codec, Signature, Vec<u8>)>>,
    unexpected_bytes: Vec<u64>,
    unexpected_limit: u64,
    fragment: usize,
    recv_state: Vec<RecvState>,
    send_offset: Vec<usize>,
    spin_polls: u32,
    /// Dataflow edges (driven by the same progress passes as the BSP exchanges).
    pub(crate) channels: Channels,
    /// The world's job-wide abort: checked while waiting, raised on a local failure.
    abort: Arc<JobAbort>,
}

const SEND_DONE: usize = usize::MAX;

impl Engine {
    /// An engine for world rank `rank` over `links` (indexed by world rank; the entry for
    /// `rank` itself is a loopback link).
    pub(crate) fn new(
        rank: usize,
        links: Vec<Link>,
        fragment: usize,
        window: usize,
        spin_polls: u32,
        abort: Arc<JobAbort>,
    ) -> Engine {
        let n = links.len();
        Engine {
            rank,
            links,
            inbound: (0..n).map(|_| Inbound::default()).collect(),
            unexpected: HashMap::new(),
            unexpected_bytes: vec![0; n],
            unexpected_limit: (window * (fragment + heddle_wire::HEADER_LEN)) as u64,
            fragment,
            recv_state: Vec::new(),
            send_offset: Vec::new(),
            spin_polls,
            channels: Channels::new(rank, n, fragment),
            abort,
        }
    }

    /// The world size.
    pub(crate) fn peers(&self) -> usize {
        self.links.len()
    }

    /// One non-blocking pass for the dataflow channels; returns whether anything moved.
    ///
    /// # Errors
    /// A lost peer or a malformed frame.
    pub(crate) fn poll_channels(&mut self) -> Result<bool> {
        self.progress(&[], &mut [], &mut [], &mut []).map_err(|e| self.failed(e))
    }

    /// A local failure of an operation: aborts the job if this rank can no longer keep in
    /// step with its peers (a message cut short, a malformed frame, a broken link), and
    /// returns `e`. Errors the caller may catch and go on from (a bad argument, a timeout,
    /// an undecodable object) stay local, as with MPI's `MPI_ERRORS_RETURN`; a lost peer is
    /// the launcher's to report.
    fn failed(&self, e: Error) -> Error {
        match e {
            Error::Truncated { .. }
            | Error::TypeMismatch { .. }
            | Error::CollectiveMismatch { .. }
            | Error::Wire { .. }
            | Error::Io { .. } => self.abort.fail(self.rank, e),
            e => e,
        }
    }

    /// Waits (spin, yield, sleep) after a pass that moved nothing; fails when `peers` (the
    /// workers the caller still needs) are gone or nothing moved for `timeout`.
    ///
    /// # Errors
    /// [`Error::Aborted`], [`Error::PeerLost`] or [`Error::Timeout`].
    pub(crate) fn idle(
        &mut self,
        idle: &mut Idle,
        peers: &[usize],
        timeout: Duration,
        op: &'static str,
        what: &dyn Fn() -> String,
    ) -> Result<()> {
        let Some(now) = idle.wait(self.spin_polls) else { return Ok(()) };
        self.abort.check()?;
        if idle.check_due(now) {
            for &p in peers {
                self.links[p].check_alive(p)?;
            }
        }
        let waited = idle.waited(now);
        if waited >= timeout {
            return Err(self.failed(Error::Timeout { op, waited, detail: what() }));
        }
        Ok(())
    }

    /// Number of links using TCP.
    pub(crate) fn tcp_links(&self) -> usize {
        self.links.iter().filter(|l| l.is_tcp()).count()
    }

    /// Runs `sends` and `recvs` to completion. Messages to one peer leave in the order
    /// given; a receive matches the oldest message with its (peer, edge, tag).
    ///
    /// # Errors
    /// [`Error::PeerLost`], [`Error::Wire`], [`Error::Truncated`], or [`Error::Timeout`]
    /// when nothing moved for `timeout`.
    pub(crate) fn exchange(
        &mut self,
        sends: &[SendOp<'_>],
        recvs: &mut [RecvOp<'_>],
        op: &'static str,
        timeout: Duration,
    ) -> Result<()> {
        let mut state = std::mem::take(&mut self.recv_state);
        let mut offsets = std::mem::take(&mut self.send_offset);
        state.clear();
        state.resize(recvs.len(), RecvState::Waiting);
        offsets.clear();
        offsets.resize(sends.len(), 0);
        let r = self
            .abort
            .check()
            .and_then(|()| self.run(sends, recvs, &mut state, &mut offsets, op, timeout));
        self.recv_state = state;
        self.send_offset = offsets;
        r.map_err(|e| self.failed(e))
    }

    fn run(
        &mut self,
        sends: &[SendOp<'_>],
        recvs: &mut [RecvOp<'_>],
        state: &mut [RecvState],
        offsets: &mut [usize],
        op: &'static str,
        timeout: Duration,
    ) -> Result<()> {
        for s in sends {
            if s.peer >= self.links.len() {
                return Err(Error::InvalidArgument(format!(
                    "send to rank {} in a world of {}",
                    s.peer,
                    self.links.len()
                )));
            }
        }
        for (i, r) in recvs.iter_mut().enumerate() {
            if r.peer >= self.links.len() {
                return Err(Error::InvalidArgument(format!(
                    "receive from rank {} in a world of {}",
                    r.peer,
                    self.links.len()
                )));
            }
            let key = (r.peer, r.edge, r.tag);
            if let Some((codec, signature, msg)) =
                self.unexpected.get_mut(&key).and_then(VecDeque::pop_front)
            {
                self.unexpected_bytes[r.peer] -= msg.len() as u64;
                r.check(r.peer, codec, signature)?;
                deliver_whole(r, &msg)?;
                state[i] = RecvState::Done;
            }
        }
        let mut idle = Idle::default();
        loop {
            let progressed = self.progress(sends, recvs, state, offsets)?;
            if self.complete(sends, offsets, state) {
                return Ok(());
            }
            if progressed {
                idle = Idle::default();
                continue;
            }
            let Some(now) = idle.wait(self.spin_polls) else { continue };
            self.abort.check()?;
            if idle.check_due(now) {
                self.check_peers(sends, recvs, state, offsets, op)?;
            }
            let waited = idle.waited(now);
            if waited >= timeout {
                let detail = self.describe_wait(sends, offsets, recvs, state);
                return Err(Error::Timeout { op, waited, detail });
            }
        }
    }

    /// One pass over every link: push what credit allows, take what has arrived.
    fn progress(
        &mut self,
        sends: &[SendOp<'_>],
        recvs: &mut [RecvOp<'_>],
        state: &mut [RecvState],
        offsets: &mut [usize],
    ) -> Result<bool> {
        let mut progressed = self.push_sends(sends, offsets)?;
        progressed |= self.channels.push(&mut self.links)?;
        for peer in 0..self.links.len() {
            while self.poll_one(peer, recvs, state)? == Polled::Consumed {
                progressed = true;
            }
        }
        Ok(progressed)
    }

    /// Whether every send has fully left this process and every receive is complete.
    fn complete(&mut self, sends: &[SendOp<'_>], offsets: &[usize], state: &[RecvState]) -> bool {
        offsets.iter().all(|&o| o == SEND_DONE)
            && state.iter().all(|&s| s == RecvState::Done)
            && sends.iter().all(|s| self.links[s.peer].flushed())
    }

    /// Fails if a peer this exchange still needs is gone. A peer may write its last
    /// frames and exit between our last poll and this check, so a dead peer is only
    /// fatal if one more pass over the links still leaves us waiting on it.
    fn check_peers(
        &mut self,
        sends: &[SendOp<'_>],
        recvs: &mut [RecvOp<'_>],
        state: &mut [RecvState],
        offsets: &mut [usize],
        op: &'static str,
    ) -> Result<()> {
        for peer in self.waiting_on(sends, offsets, recvs, state) {
            if let Err(e) = self.links[peer].check_alive(peer) {
                self.progress(sends, recvs, state, offsets)?;
                if self.waiting_on(sends, offsets, recvs, state).contains(&peer) {
                    return Err(match e {
                        Error::PeerLost { rank, detail } => Error::PeerLost {
                            rank,
                            detail: format!(
                                "{detail}, during {op}: {}",
                                self.describe_wait(sends, offsets, recvs, state)
                            ),
                        },
                        other => other,
                    });
                }
            }
        }
        Ok(())
    }

    fn push_sends(&mut self, sends: &[SendOp<'_>], offsets: &mut [usize]) -> Result<bool> {
        let mut progressed = false;
        for i in 0..sends.len() {
            if offsets[i] == SEND_DONE
                || (0..i).any(|j| sends[j].peer == sends[i].peer && offsets[j] != SEND_DONE)
            {
                continue;
            }
            let s = &sends[i];
            let len = s.data.len();
            let last_index = if len == 0 { 0 } else { (len - 1) / self.fragment } as u64;
            loop {
                let off = offsets[i];
                let n = self.fragment.min(len - off);
                let index = (off / self.fragment) as u64;
                let header = Header {
                    kind: Kind::Data,
                    flags: Flags::for_fragment(index, last_index),
                    codec: s.codec,
                    key_len: 0,
                    edge: s.edge,
                    tag: s.tag,
                    source: self.rank as u32,
                    target: s.peer as u32,
                    sequence: s.signature.0,
                    msg_len: len as u64,
                    frag_len: n as u32,
                };
                if !self.links[s.peer].try_send(&header, &s.data[off..off + n])? {
                    break;
                }
                progressed = true;
                if index == last_index {
                    offsets[i] = SEND_DONE;
                    break;
                }
                offsets[i] = off + n;
            }
        }
        Ok(progressed)
    }

    fn poll_one(
        &mut self,
        peer: usize,
        recvs: &mut [RecvOp<'_>],
        state: &mut [RecvState],
    ) -> Result<Polled> {
        let Engine {
            links, inbound, unexpected, unexpected_bytes, unexpected_limit, channels, ..
        } = self;
        let inb = &mut inbound[peer];
        let mut handler = |h: &Header, payload: &[u8]| -> Result<bool> {
            if h.kind != Kind::Data || h.edge & DATAFLOW_EDGE != 0 {
                return channels.on_frame(peer, h, payload).map(|()| true);
            }
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
                match posted {
                    Some(i) => {
                        recvs[i].check(peer, h.codec, Signature(h.sequence))?;
                        start_sink(&mut recvs[i], peer, h.msg_len)?;
                        state[i] = RecvState::Active;
                        inb.current = Some(Incoming::Posted(i));
                    }
                    None => {
                        // An early message is copied aside only while that stays within the
                        // window's worth of bytes; a larger one waits in the link (the sender
                        // stalls on credit) until its receive is posted, so a receiver that
                        // runs behind costs no extra copy. Exception: a receive we are waiting
                        // for from this same peer may be queued behind it, so take it then.
                        let fits = unexpected_bytes[peer] + h.msg_len <= *unexpected_limit;
                        let blocking = (0..recvs.len())
                            .any(|i| state[i] == RecvState::Waiting && recvs[i].peer == peer);
                        if !fits && !blocking {
                            return Ok(false);
                        }
                        unexpected_bytes[peer] += h.msg_len;
                        let data = Vec::with_capacity(h.msg_len as usize);
                        inb.current = Some(Incoming::Stored {
                            edge: h.edge,
                            tag: h.tag,
                            data,
                            codec: h.codec,
                            signature: Signature(h.sequence),
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
                Some(Incoming::Stored { data, .. }) => data.extend_from_slice(payload),
            }
            inb.offset += payload.len() as u64;
            if h.flags.is_last() {
                if inb.offset != inb.msg_len {
                    return Err(bad("last fragment ended before the message length"));
                }
                match inb.current.take() {
                    Some(Incoming::Posted(i)) => state[i] = RecvState::Done,
                    Some(Incoming::Stored { edge, tag, data, codec, signature }) => {
                        let waiting = (0..recvs.len()).find(|&i| {
                            state[i] == RecvState::Waiting
                                && recvs[i].peer == peer
                                && recvs[i].edge == edge
                                && recvs[i].tag == tag
                        });
                        match waiting {
                            Some(i) => {
                                unexpected_bytes[peer] -= data.len() as u64;
                                recvs[i].check(peer, codec, signature)?;
                                deliver_whole(&mut recvs[i], &data)?;
                                state[i] = RecvState::Done;
                            }
                            None => unexpected
                                .entry((peer, edge, tag))
                                .or_default()
                                .push_back((codec, signature, data)),
                        }
                    }
                    None => {}
                }
            }
            Ok(true)
        };
        links[peer].poll(&mut handler)
    }

    /// The peers still to be sent to, and still to be received from.
    fn unfinished(
        sends: &[SendOp<'_>],
        offsets: &[usize],
        recvs: &[RecvOp<'_>],
        state: &[RecvState],
    ) -> (Vec<usize>, Vec<usize>) {
        let to = sends
            .iter()
            .zip(offsets)
            .filter(|(_, &o)| o != SEND_DONE)
            .map(|(s, _)| s.peer)
            .collect();
        let from = recvs
            .iter()
            .zip(state)
            .filter(|(_, &s)| s != RecvState::Done)
            .map(|(r, _)| r.peer)
            .collect();
        (to, from)
    }

    fn waiting_on(
        &self,
        sends: &[SendOp<'_>],
        offsets: &[usize],
        recvs: &[RecvOp<'_>],
        state: &[RecvState],
    ) -> Vec<usize> {
        let (mut peers, from) = Self::unfinished(sends, offsets, recvs, state);
        peers.extend(from);
        peers.sort_unstable();
        peers.dedup();
        peers
    }

    fn describe_wait(
        &self,
        sends: &[SendOp<'_>],
        offsets: &[usize],
        recvs: &[RecvOp<'_>],
        state: &[RecvState],
    ) -> String {
        let (to, from) = Self::unfinished(sends, offsets, recvs, state);
        format!(
            "rank {} still sending to ranks {to:?} and receiving from ranks {from:?}",
            self.rank
        )
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
