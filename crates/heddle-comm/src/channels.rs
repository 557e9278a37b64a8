//! Dataflow channels: the API dataflow operations are built on, and its implementation on
//! one worker. Open an edge, send messages to workers under the edge's credit, take the
//! messages that arrived, wait while nothing moves, close (on drop). Nothing here knows
//! what the messages hold; they travel outside the matched send/receive of the BSP layer.
//!
//! Every (edge, sending worker, receiving worker) stream has a byte window. A sender
//! reserves credit for a whole message before queueing it and the receiver grants bytes
//! back (a `Credit` frame carrying the edge) as its consumer takes messages, so one edge's
//! slow consumer stalls only that edge's senders and an edge never buffers more than its
//! window per sending worker. Frames of different edges interleave freely on a link; each
//! (peer, edge) has at most one message in reassembly (`reassembly.rs`).
//!
//! ```
//! use heddle_comm::{local_world, CommConfig, Envelope, Kind};
//! let comms = local_world(2, CommConfig::default()).unwrap();
//! std::thread::scope(|s| {
//!     for c in &comms {
//!         s.spawn(move || {
//!             let mut edge = c.open_edge(7, 1 << 20).unwrap();
//!             let link = edge.link();
//!             let source = c.rank() as u32;
//!             let env = Envelope { kind: Kind::Data, source, target: 0, sequence: 0 };
//!             if c.rank() == 1 {
//!                 link.lock().try_send(0, env, b"hello".to_vec()).unwrap();
//!             }
//!             loop {
//!                 let mut io = link.lock();
//!                 let moved = io.poll().unwrap();
//!                 if c.rank() == 1 && !io.sending() {
//!                     break; // sent and acknowledged
//!                 }
//!                 if let Some(m) = io.recv() {
//!                     assert_eq!((m.from, m.payload.as_slice()), (1, &b"hello"[..]));
//!                     break;
//!                 }
//!                 drop(io);
//!                 if moved {
//!                     edge.moved()
//!                 } else {
//!                     edge.wait(&[0, 1], &|| "a hello".into()).unwrap()
//!                 }
//!             }
//!         });
//!     }
//! });
//! ```

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use heddle_wire::{Codec, Flags, Header, Kind};

use crate::comm::Shared;
use crate::engine::{Engine, Idle};
use crate::transport::BoxedLink;
use crate::{Communicator, Error, Result};

/// Edge ids with this bit belong to dataflow operations; BSP contexts never set it.
pub const DATAFLOW_EDGE: u32 = 0x4000_0000;

/// A complete message that arrived on a dataflow edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivered {
    /// Data, end-of-stream or checkpoint barrier.
    pub kind: Kind,
    /// Sending worker (world rank).
    pub from: usize,
    /// Source task id.
    pub source: u32,
    /// Target task id.
    pub target: u32,
    /// Message sequence (barrier id for barriers).
    pub sequence: u64,
    /// The message bytes.
    pub payload: Vec<u8>,
}

/// What a dataflow message is and where it goes, apart from its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Data, end-of-stream or barrier.
    pub kind: Kind,
    /// Source task.
    pub source: u32,
    /// Target task.
    pub target: u32,
    /// Message sequence, or barrier id.
    pub sequence: u64,
}

#[derive(Debug)]
struct Outgoing {
    header: Header,
    data: Vec<u8>,
    offset: usize,
}

#[derive(Debug, Default)]
pub(crate) struct Channel {
    pub(crate) window: u64,
    pub(crate) inbox: VecDeque<Delivered>,
    pub(crate) inbox_bytes: u64,
    pub(crate) peak_inbox_bytes: u64,
    /// Bytes we may still send to each peer (may go negative by one oversized message).
    pub(crate) credit: Vec<i64>,
    /// Bytes consumed from each peer and not yet granted back.
    pub(crate) consumed: Vec<u64>,
    /// Message in reassembly from each peer.
    pub(crate) partial: Vec<Option<(Header, Vec<u8>)>>,
    pub(crate) opened: bool,
    /// Its messages overtake other edges' queued ones ([`EdgeChannels::prioritize`]).
    pub(crate) urgent: bool,
}

impl Channel {
    fn new(peers: usize) -> Channel {
        Channel {
            credit: vec![0; peers],
            consumed: vec![0; peers],
            partial: vec![None; peers],
            ..Channel::default()
        }
    }
}

/// All dataflow channels of one worker.
#[derive(Debug)]
pub(crate) struct Channels {
    rank: usize,
    fragment: usize,
    edges: HashMap<u32, Channel>,
    outbox: Vec<VecDeque<Outgoing>>,
    /// Messages of urgent edges, sent before `outbox`'s.
    urgent: Vec<VecDeque<Outgoing>>,
    grants: Vec<VecDeque<(u32, u32)>>,
}

impl Channels {
    pub(crate) fn new(rank: usize, peers: usize, fragment: usize) -> Channels {
        Channels {
            rank,
            fragment,
            edges: HashMap::new(),
            outbox: (0..peers).map(|_| VecDeque::new()).collect(),
            urgent: (0..peers).map(|_| VecDeque::new()).collect(),
            grants: (0..peers).map(|_| VecDeque::new()).collect(),
        }
    }

    pub(crate) fn channel(&mut self, edge: u32) -> &mut Channel {
        let peers = self.outbox.len();
        self.edges.entry(edge).or_insert_with(|| Channel::new(peers))
    }

    /// Starts using `edge` with `window` bytes per sending worker. Every worker of the
    /// operation opens it with the same window before sending on it.
    pub(crate) fn open(&mut self, edge: u32, window: u64) -> Result<()> {
        if edge & DATAFLOW_EDGE == 0 {
            return Err(Error::InvalidArgument(format!("edge {edge:#x} is not a dataflow edge")));
        }
        let c = self.channel(edge);
        if c.opened {
            return Err(Error::InvalidArgument(format!(
                "dataflow edge {:#x} is already open on this worker",
                edge & !DATAFLOW_EDGE
            )));
        }
        c.opened = true;
        c.window = window.max(1);
        for credit in &mut c.credit {
            *credit += window as i64;
        }
        Ok(())
    }

    /// Forgets `edge` (all of its messages must have been consumed).
    pub(crate) fn close(&mut self, edge: u32) {
        self.edges.remove(&edge);
    }

    /// Queues a message for `peer` if the edge's credit allows; otherwise hands it back.
    /// A message larger than half the window goes once half the window is free: the
    /// receiver grants credit back a half window at a time, so up to half a window may
    /// stay consumed but not yet granted — waiting for more than that would never end.
    pub(crate) fn try_send(
        &mut self,
        peer: usize,
        edge: u32,
        env: Envelope,
        data: Vec<u8>,
        charge: usize,
    ) -> std::result::Result<(), Vec<u8>> {
        if !self.can_send(peer, edge, charge) {
            return Err(data);
        }
        let c = self.channel(edge);
        c.credit[peer] -= charge as i64;
        let mut header = Header::new(env.kind)
            .with_edge(edge)
            .with_route(env.source, env.target)
            .with_sequence(env.sequence);
        header.codec = Codec::Raw;
        header.msg_len = data.len() as u64;
        let queue = if c.urgent { &mut self.urgent[peer] } else { &mut self.outbox[peer] };
        queue.push_back(Outgoing { header, data, offset: 0 });
        Ok(())
    }

    /// Takes the oldest message of `edge`, returning its bytes to the sender's credit.
    pub(crate) fn recv(&mut self, edge: u32) -> Option<Delivered> {
        let c = self.edges.get_mut(&edge)?;
        let d = c.inbox.pop_front()?;
        let len = d.payload.len() as u64;
        c.inbox_bytes -= len;
        self.consumed(edge, d.from, len);
        Some(d)
    }

    /// Whether `try_send` would take a message of `charge` bytes for `peer` now.
    pub(crate) fn can_send(&mut self, peer: usize, edge: u32, charge: usize) -> bool {
        let c = self.channel(edge);
        c.credit[peer] >= (charge as i64).min(c.window as i64 / 2)
    }

    /// Returns `bytes` of `from`'s credit on `edge` (granted a half window at a time).
    pub(crate) fn consumed(&mut self, edge: u32, from: usize, bytes: u64) {
        let Some(c) = self.edges.get_mut(&edge) else { return };
        c.consumed[from] += bytes;
        if c.consumed[from] * 2 >= c.window {
            let n = std::mem::take(&mut c.consumed[from]);
            self.grants[from].push_back((edge, n.min(u64::from(u32::MAX)) as u32));
        }
    }

    /// Bytes waiting in `edge`'s inbox, and the most it ever held.
    pub(crate) fn buffered(&self, edge: u32) -> (u64, u64) {
        self.edges.get(&edge).map_or((0, 0), |c| (c.inbox_bytes, c.peak_inbox_bytes))
    }

    /// Whether messages or credit of `edge` are still queued to leave this worker.
    pub(crate) fn sending(&self, edge: u32) -> bool {
        self.outbox.iter().chain(&self.urgent).any(|q| q.iter().any(|m| m.header.edge == edge))
            || self.grants.iter().any(|g| g.iter().any(|&(e, _)| e == edge))
    }

    /// Pushes credit grants, then queued messages, as far as the links take them.
    pub(crate) fn push(&mut self, links: &mut [BoxedLink]) -> Result<bool> {
        let mut progressed = false;
        for (peer, link) in links.iter_mut().enumerate() {
            while let Some(&(edge, n)) = self.grants[peer].front() {
                let mut h = Header::new(Kind::Credit)
                    .with_edge(edge)
                    .with_route(self.rank as u32, peer as u32);
                h.msg_len = 4;
                h.frag_len = 4;
                if !link.try_send(&h, &n.to_le_bytes())? {
                    break;
                }
                self.grants[peer].pop_front();
                progressed = true;
            }
            // Urgent edges' messages first: they overtake the data queued on the link
            // (frames of different edges interleave; each edge's stay in order).
            for queue in [&mut self.urgent[peer], &mut self.outbox[peer]] {
                let (moved, blocked) = send_queued(queue, link, self.fragment)?;
                progressed |= moved;
                if blocked {
                    break;
                }
            }
        }
        Ok(progressed)
    }
}

/// Sends `queue`'s messages, fragment by fragment, as far as `link` takes them. Returns
/// whether any frame went and whether the link is full.
fn send_queued(
    queue: &mut VecDeque<Outgoing>,
    link: &mut BoxedLink,
    fragment: usize,
) -> Result<(bool, bool)> {
    let mut moved = false;
    while let Some(out) = queue.front_mut() {
        let len = out.data.len();
        let last_index = if len == 0 { 0 } else { (len - 1) / fragment } as u64;
        let index = (out.offset / fragment) as u64;
        let n = fragment.min(len - out.offset);
        let mut h = out.header;
        h.flags = Flags::for_fragment(index, last_index);
        h.frag_len = n as u32;
        if !link.try_send(&h, &out.data[out.offset..out.offset + n])? {
            return Ok((moved, true));
        }
        moved = true;
        out.offset += n;
        if index == last_index {
            queue.pop_front();
        }
    }
    Ok((moved, false))
}

/// One dataflow edge's channels on this worker; closed when dropped.
#[derive(Debug)]
pub struct EdgeChannels {
    link: EdgeLink,
    idle: Idle,
    timeout: Duration,
}

/// A handle on an open edge's channels (cheap to clone; valid while the edge is open).
#[derive(Debug, Clone)]
pub struct EdgeLink {
    pub(crate) shared: Arc<Shared>,
    pub(crate) edge: u32,
    /// This worker's world rank.
    pub(crate) rank: usize,
}

/// An edge's channels with this worker's engine held: a batch of sends and receives.
#[derive(Debug)]
pub struct EdgeIo<'a> {
    engine: MutexGuard<'a, Engine>,
    edge: u32,
}

impl Communicator {
    /// Opens dataflow edge `edge` (an id below 2^30, the same on every worker) on this
    /// worker, receiving at most `window` bytes in flight from each sending worker.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for an id out of range or an edge already open.
    pub fn open_edge(&self, edge: u32, window: u64) -> Result<EdgeChannels> {
        if edge >= DATAFLOW_EDGE {
            return Err(Error::InvalidArgument(format!("edge id {edge} must be below 2^30")));
        }
        let shared = self.shared();
        let edge = edge | DATAFLOW_EDGE;
        shared.lock().channels.open(edge, window.max(1))?;
        let timeout = shared.config.timeout;
        let rank = self.world_rank(self.rank());
        let link = EdgeLink { shared, edge, rank };
        Ok(EdgeChannels { link, idle: Idle::default(), timeout })
    }
}

impl EdgeChannels {
    /// A handle to send and receive through.
    pub fn link(&self) -> EdgeLink {
        self.link.clone()
    }

    /// Holds this worker's engine for a batch of sends and receives (as
    /// [`EdgeLink::lock`], without a handle of its own).
    pub fn lock(&self) -> EdgeIo<'_> {
        self.link.lock()
    }

    /// The number of workers (world ranks) messages may go to.
    pub fn workers(&self) -> usize {
        self.link.shared.lock().peers()
    }

    /// Gives up waiting after `timeout` with nothing moving (default: the communicator's).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Waits (spin, yield, then short sleeps) after a pass that moved nothing.
    ///
    /// # Errors
    /// [`Error::Aborted`] if the job was aborted, [`Error::PeerLost`] if one of `peers`
    /// (world ranks the caller still needs) is gone, [`Error::Timeout`] (its detail from
    /// `what`) if nothing moved for the timeout.
    pub fn wait(&mut self, peers: &[usize], what: &dyn Fn() -> String) -> Result<()> {
        self.link.shared.lock().idle(
            &mut self.idle,
            peers,
            self.timeout,
            "dataflow operation",
            what,
        )
    }

    /// Lets this edge's messages overtake every other edge's messages queued to leave
    /// this worker (they still queue behind frames already on a link): for small control
    /// messages, such as a checkpoint's coordination, that must not wait behind data.
    pub fn prioritize(&self) {
        self.link.shared.lock().channels.channel(self.link.edge).urgent = true;
    }

    /// Resets the wait after a pass that moved something.
    pub fn moved(&mut self) {
        self.idle = Idle::default();
    }

    /// Bytes held in the edge's receive buffers now, and the most so far.
    pub fn buffered(&self) -> (u64, u64) {
        self.link.shared.lock().channels.buffered(self.link.edge)
    }
}

impl Drop for EdgeChannels {
    fn drop(&mut self) {
        self.link.shared.lock().channels.close(self.link.edge);
    }
}

impl EdgeLink {
    /// Holds this worker's engine for a batch of sends and receives.
    pub fn lock(&self) -> EdgeIo<'_> {
        EdgeIo { engine: self.shared.lock(), edge: self.edge }
    }
}

impl EdgeIo<'_> {
    /// Queues `data` for `worker` (world rank) if the edge's credit allows; otherwise
    /// hands it back (try again after [`EdgeIo::poll`]).
    ///
    /// # Errors
    /// `Err(data)`: no credit now.
    pub fn try_send(
        &mut self,
        worker: usize,
        env: Envelope,
        data: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        let charge = data.len();
        self.engine.channels.try_send(worker, self.edge, env, data, charge)
    }

    /// As [`EdgeIo::try_send`], taking `charge` bytes of credit rather than the message's
    /// length: for a message that stands for more data (a [`crate::SharedRef`]), whose receiver
    /// returns the rest with [`EdgeIo::credit_back`].
    ///
    /// # Errors
    /// `Err(data)`: no credit now.
    pub fn try_send_charged(
        &mut self,
        worker: usize,
        env: Envelope,
        data: Vec<u8>,
        charge: usize,
    ) -> std::result::Result<(), Vec<u8>> {
        self.engine.channels.try_send(worker, self.edge, env, data, charge)
    }

    /// Whether [`EdgeIo::try_send_charged`] would take a message of `charge` bytes for
    /// `worker` now.
    pub fn can_send(&mut self, worker: usize, charge: usize) -> bool {
        self.engine.channels.can_send(worker, self.edge, charge)
    }

    /// Returns `bytes` of credit to `worker` beyond what [`EdgeIo::recv`] returned for its
    /// message (the rest of a [`EdgeIo::try_send_charged`] charge).
    pub fn credit_back(&mut self, worker: usize, bytes: u64) {
        self.engine.channels.consumed(self.edge, worker, bytes);
    }

    /// One pass over every link: sends what credit allows, takes what arrived. Returns
    /// whether anything moved.
    ///
    /// # Errors
    /// A lost peer or a malformed frame.
    pub fn poll(&mut self) -> Result<bool> {
        self.engine.poll_channels()
    }

    /// The oldest complete message that arrived on this edge.
    pub fn recv(&mut self) -> Option<Delivered> {
        self.engine.channels.recv(self.edge)
    }

    /// Whether messages or credit grants of this edge still wait to leave this worker.
    pub fn sending(&self) -> bool {
        self.engine.channels.sending(self.edge)
    }
}
