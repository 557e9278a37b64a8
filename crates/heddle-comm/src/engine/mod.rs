//! The progress engine of one worker: moves fragments over every link from the calling
//! thread, matches incoming messages to posted receives, and keeps early arrivals.
//!
//! Work is expressed as an *exchange*: a set of sends and receives that complete together
//! (one step of a collective algorithm, or a single send/recv). The caller's thread polls
//! the links (spin, then yield, then short sleeps) until the exchange completes, a peer is
//! lost, or nothing has moved for the configured timeout.

use std::sync::Arc;
use std::time::Duration;

use heddle_wire::{Codec, Kind};

use crate::channels::Channels;
pub(crate) use crate::idle::Idle;
use crate::stamp::Signature;
use crate::transport::doorbell::Doorbell;
use crate::transport::{BoxedLink, Polled};
use crate::{Error, JobAbort, Result};

mod acks;
mod frames;
mod matching;
mod request_wait;
mod requests;
mod schedules;

pub(crate) use request_wait::{wait_unlocked, Awaited, Need};

use acks::Acks;
use frames::{push_message, Frame};
use matching::{Inbound, RecvState, Unexpected};
pub(crate) use matching::{RecvOp, Sink};
use requests::Requests;
pub(crate) use requests::{Finished, Label, Matched, Memory, Pattern};
use schedules::Schedules;
pub(crate) use schedules::{Advance, Output, Schedule};

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

/// One worker's links and message-matching state.
#[derive(Debug)]
pub(crate) struct Engine {
    rank: usize,
    links: Vec<BoxedLink>,
    inbound: Vec<Inbound>,
    unexpected: Unexpected,
    fragment: usize,
    recv_state: Vec<RecvState>,
    send_offset: Vec<usize>,
    spin_polls: u32,
    /// Dataflow edges (driven by the same progress passes as the BSP exchanges).
    pub(crate) channels: Channels,
    /// The world's job-wide abort: checked while waiting, raised on a local failure.
    abort: Arc<JobAbort>,
    /// Buffers collectives lend for their intermediate data ([`Engine::scratch`]).
    scratch: Vec<Vec<u8>>,
    /// Posted non-blocking sends and receives.
    requests: Requests,
    /// Non-blocking collectives under way.
    schedules: Schedules,
    /// Acks owed for synchronous messages that matched a receive.
    acks: Acks,
    /// What this worker sleeps on while waiting, if every link rings it.
    doorbell: Option<Doorbell>,
}

/// Scratch buffers kept between collective calls, and the largest kept.
const SCRATCH_KEPT: usize = 4;
const SCRATCH_MAX_BYTES: usize = 64 << 20;

const SEND_DONE: usize = usize::MAX;

/// How long a rank that finds a peer gone waits for the job's abort (the job master's
/// relay of the peer's own failure) before it reports the lost peer instead.
const PEER_LOSS_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

impl Engine {
    /// An engine for world rank `rank` over `links` (indexed by world rank; the entry for
    /// `rank` itself is a loopback link).
    pub(crate) fn new(
        rank: usize,
        links: Vec<BoxedLink>,
        fragment: usize,
        window: usize,
        spin_polls: u32,
        abort: Arc<JobAbort>,
        doorbell: Option<Doorbell>,
    ) -> Engine {
        let n = links.len();
        Engine {
            rank,
            links: links.into_iter().map(crate::transport::Metered::wrap).collect(),
            inbound: (0..n).map(|_| Inbound::default()).collect(),
            unexpected: Unexpected::new(n, (window * (fragment + heddle_wire::HEADER_LEN)) as u64),
            fragment,
            recv_state: Vec::new(),
            send_offset: Vec::new(),
            spin_polls,
            channels: Channels::new(rank, n, fragment),
            abort,
            scratch: Vec::new(),
            requests: Requests::default(),
            schedules: Schedules::default(),
            acks: Acks::default(),
            doorbell,
        }
    }

    /// Whether a frame waits on any link.
    pub(crate) fn has_input(&self) -> bool {
        self.links.iter().any(|l| l.has_input())
    }

    /// Sleeps up to `limit`, or until a peer writes or frees room (see [`Doorbell`]);
    /// without a doorbell, for `limit`.
    fn park(&self, limit: Duration) {
        match &self.doorbell {
            Some(bell) => {
                bell.park(limit, || self.has_input());
            }
            None => std::thread::sleep(limit),
        }
    }

    /// Whether waits sleep on a doorbell (and so may sleep long).
    pub(crate) fn parks(&self) -> bool {
        self.doorbell.is_some()
    }

    /// A zeroed buffer of `len` bytes for a collective's intermediate data, reused from
    /// call to call: fresh memory costs a page fault per 4 KiB (256 for 1 MiB), which made
    /// a 1 MiB scan ten times slower. Hand it back with [`Engine::return_scratch`].
    pub(crate) fn scratch(&mut self, len: usize) -> Vec<u8> {
        let mut v = self.scratch.pop().unwrap_or_default();
        v.clear();
        v.resize(len, 0);
        v
    }

    /// Keeps `v` for the next [`Engine::scratch`] (a few, up to 64 MiB each).
    pub(crate) fn return_scratch(&mut self, v: Vec<u8>) {
        if self.scratch.len() < SCRATCH_KEPT && v.capacity() <= SCRATCH_MAX_BYTES {
            self.scratch.push(v);
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
    /// the launcher's to report, unless the job's abort arrives in [`PEER_LOSS_GRACE`].
    fn failed(&self, e: Error) -> Error {
        match e {
            Error::Truncated { .. }
            | Error::TypeMismatch { .. }
            | Error::CollectiveMismatch { .. }
            | Error::Wire { .. }
            | Error::Io { .. } => self.abort.fail(self.rank, e),
            Error::PeerLost { .. } => self.aborted_instead(e),
            e => e,
        }
    }

    /// A peer that failed took the job down with it: the job master's word of why is
    /// usually on its way, and it says more than the lost peer. Returns the job's abort if
    /// it arrives within [`PEER_LOSS_GRACE`], else `lost`.
    fn aborted_instead(&self, lost: Error) -> Error {
        let until = std::time::Instant::now() + PEER_LOSS_GRACE;
        loop {
            if let Err(aborted) = self.abort.check() {
                return aborted;
            }
            if std::time::Instant::now() >= until {
                return lost;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
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
        let Some(now) = idle.wait(self.spin_polls, self.parks(), &|d| self.park(d)) else {
            return Ok(());
        };
        self.abort.check()?;
        if idle.check_due(now) {
            for &p in peers {
                self.links[p].check_alive(p).map_err(|e| self.failed(e))?;
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
            if self.unexpected.deliver(r, &mut self.acks)? {
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
            let Some(now) = idle.wait(self.spin_polls, self.parks(), &|d| self.park(d)) else {
                continue;
            };
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
        // A request's message must not start on a link between the fragments of this
        // exchange's message (a schedule may post one while a collective runs).
        let midway: Vec<usize> = sends
            .iter()
            .zip(offsets.iter())
            .filter(|(_, &o)| o != 0 && o != SEND_DONE)
            .map(|(s, _)| s.peer)
            .collect();
        let mut progressed = self.acks.push(&mut self.links, self.rank)?;
        progressed |= self.push_requests(&midway)?;
        progressed |= self.push_sends(sends, offsets)?;
        progressed |= self.channels.push(&mut self.links)?;
        for peer in 0..self.links.len() {
            while self.poll_one(peer, recvs, state)? == Polled::Consumed {
                progressed = true;
            }
        }
        progressed |= self.advance_schedules();
        // Acks owed for what this pass matched leave now: the call may return after it.
        if !self.acks.is_empty() {
            progressed |= self.acks.push(&mut self.links, self.rank)?;
        }
        Ok(progressed)
    }

    /// Whether every send has fully left this process, every receive is complete, and
    /// the acks owed for synchronous messages have left.
    fn complete(&mut self, sends: &[SendOp<'_>], offsets: &[usize], state: &[RecvState]) -> bool {
        self.acks.is_empty()
            && offsets.iter().all(|&o| o == SEND_DONE)
            && state.iter().all(|&s| s == RecvState::Done)
            && sends.iter().all(|s| self.links[s.peer].flushed())
    }

    /// Fails if a peer this exchange still needs is gone (with the job's abort instead if
    /// it arrives within [`PEER_LOSS_GRACE`]). A peer may write its last
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
                    // `exchange` gives the job's abort its chance to arrive instead.
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
            let s = &sends[i];
            if offsets[i] == SEND_DONE
                || (0..i).any(|j| sends[j].peer == s.peer && offsets[j] != SEND_DONE)
                || (offsets[i] == 0 && self.requests.sending_to(s.peer))
            {
                continue;
            }
            let frame = Frame {
                peer: s.peer,
                edge: s.edge,
                tag: s.tag,
                codec: s.codec,
                kind: Kind::Data,
                sequence: s.signature.0,
            };
            progressed |= push_message(
                &mut self.links,
                self.rank,
                self.fragment,
                frame,
                s.data,
                &mut offsets[i],
            )?;
        }
        Ok(progressed)
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
        let mut text = format!(
            "rank {} still sending to ranks {to:?} and receiving from ranks {from:?}",
            self.rank
        );
        // Point-to-point messages: say which tags (a collective's tags are call numbers).
        let waiting: Vec<String> = recvs
            .iter()
            .zip(state)
            .filter(|(r, &s)| s != RecvState::Done && r.edge & crate::comm::COLLECTIVE_EDGE == 0)
            .map(|(r, _)| format!("a message from rank {} with tag {}", r.peer, r.tag))
            .collect();
        if !waiting.is_empty() {
            text = format!("{text}: waiting for {}", waiting.join(", "));
        }
        text
    }
}
