//! Dataflow channels: messages on dataflow edges between workers, outside the matched
//! send/receive of the BSP layer.
//!
//! Every (edge, sending worker, receiving worker) stream has a byte window. A sender
//! reserves credit for a whole message before queueing it and the receiver grants bytes
//! back (a `Credit` frame carrying the edge) as its consumer takes messages, so one edge's
//! slow consumer stalls only that edge's senders and an edge never buffers more than its
//! window per sending worker. Frames of different edges interleave freely on a link; each
//! (peer, edge) has at most one message in reassembly.

use std::collections::{HashMap, VecDeque};

use heddle_wire::{Codec, Flags, Header, Kind};

use crate::transport::Link;
use crate::{Error, Result};

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
struct Channel {
    window: u64,
    inbox: VecDeque<Delivered>,
    inbox_bytes: u64,
    peak_inbox_bytes: u64,
    /// Bytes we may still send to each peer (may go negative by one oversized message).
    credit: Vec<i64>,
    /// Bytes consumed from each peer and not yet granted back.
    consumed: Vec<u64>,
    /// Message in reassembly from each peer.
    partial: Vec<Option<(Header, Vec<u8>)>>,
    opened: bool,
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
    grants: Vec<VecDeque<(u32, u32)>>,
}

impl Channels {
    pub(crate) fn new(rank: usize, peers: usize, fragment: usize) -> Channels {
        Channels {
            rank,
            fragment,
            edges: HashMap::new(),
            outbox: (0..peers).map(|_| VecDeque::new()).collect(),
            grants: (0..peers).map(|_| VecDeque::new()).collect(),
        }
    }

    fn channel(&mut self, edge: u32) -> &mut Channel {
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
    /// A message larger than the window may go when nothing else is outstanding.
    pub(crate) fn try_send(
        &mut self,
        peer: usize,
        edge: u32,
        env: Envelope,
        data: Vec<u8>,
    ) -> std::result::Result<(), Vec<u8>> {
        let c = self.channel(edge);
        let len = data.len() as i64;
        let full = c.credit[peer] >= c.window as i64;
        if c.credit[peer] < len && !full {
            return Err(data);
        }
        c.credit[peer] -= len;
        let mut header = Header::new(env.kind)
            .with_edge(edge)
            .with_route(env.source, env.target)
            .with_sequence(env.sequence);
        header.codec = Codec::Raw;
        header.msg_len = data.len() as u64;
        self.outbox[peer].push_back(Outgoing { header, data, offset: 0 });
        Ok(())
    }

    /// Takes the oldest message of `edge`, returning its bytes to the sender's credit.
    pub(crate) fn recv(&mut self, edge: u32) -> Option<Delivered> {
        let c = self.edges.get_mut(&edge)?;
        let d = c.inbox.pop_front()?;
        let len = d.payload.len() as u64;
        c.inbox_bytes -= len;
        c.consumed[d.from] += len;
        if c.consumed[d.from] * 2 >= c.window {
            let n = std::mem::take(&mut c.consumed[d.from]);
            self.grants[d.from].push_back((edge, n.min(u64::from(u32::MAX)) as u32));
        }
        Some(d)
    }

    /// Bytes waiting in `edge`'s inbox, and the most it ever held.
    pub(crate) fn buffered(&self, edge: u32) -> (u64, u64) {
        self.edges.get(&edge).map_or((0, 0), |c| (c.inbox_bytes, c.peak_inbox_bytes))
    }

    /// Whether messages or credit of `edge` are still queued to leave this worker.
    pub(crate) fn sending(&self, edge: u32) -> bool {
        self.outbox.iter().any(|q| q.iter().any(|m| m.header.edge == edge))
            || self.grants.iter().any(|g| g.iter().any(|&(e, _)| e == edge))
    }

    /// Takes one frame on a dataflow edge (or a stray non-data frame, which is an error).
    pub(crate) fn on_frame(&mut self, peer: usize, h: &Header, payload: &[u8]) -> Result<()> {
        let bad = |what: &'static str| Error::Wire {
            rank: peer,
            source: heddle_wire::Error::Inconsistent(what),
        };
        if h.edge & DATAFLOW_EDGE == 0 {
            return Err(bad("a non-data frame arrived on a BSP context"));
        }
        let c = self.channel(h.edge);
        match h.kind {
            Kind::Credit => {
                let n = <[u8; 4]>::try_from(payload)
                    .map(u32::from_le_bytes)
                    .map_err(|_| bad("a credit payload must be exactly 4 bytes"))?;
                c.credit[peer] += i64::from(n);
                Ok(())
            }
            Kind::Data | Kind::EndOfStream | Kind::Barrier => {
                let slot = &mut c.partial[peer];
                if h.flags.is_first() {
                    if slot.is_some() {
                        return Err(bad("a new message started before the previous one ended"));
                    }
                    *slot = Some((*h, Vec::with_capacity(h.msg_len as usize)));
                }
                let Some((first, data)) = slot.as_mut() else {
                    return Err(bad("a middle fragment arrived with no message in progress"));
                };
                if first.msg_len != h.msg_len || data.len() + payload.len() > h.msg_len as usize {
                    return Err(bad("fragment lengths disagree with the message length"));
                }
                data.extend_from_slice(payload);
                if h.flags.is_last() {
                    let (first, data) = slot.take().expect("checked above");
                    if data.len() as u64 != first.msg_len {
                        return Err(bad("last fragment ended before the message length"));
                    }
                    c.inbox_bytes += data.len() as u64;
                    c.peak_inbox_bytes = c.peak_inbox_bytes.max(c.inbox_bytes);
                    c.inbox.push_back(Delivered {
                        kind: first.kind,
                        from: peer,
                        source: first.source,
                        target: first.target,
                        sequence: first.sequence,
                        payload: data,
                    });
                }
                Ok(())
            }
            _ => Err(bad("unexpected frame kind on a dataflow edge")),
        }
    }

    /// Pushes credit grants, then queued messages, as far as the links take them.
    pub(crate) fn push(&mut self, links: &mut [Link]) -> Result<bool> {
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
            while let Some(out) = self.outbox[peer].front_mut() {
                let len = out.data.len();
                let last_index = if len == 0 { 0 } else { (len - 1) / self.fragment } as u64;
                let index = (out.offset / self.fragment) as u64;
                let n = self.fragment.min(len - out.offset);
                let mut h = out.header;
                h.flags = Flags::for_fragment(index, last_index);
                h.frag_len = n as u32;
                if !link.try_send(&h, &out.data[out.offset..out.offset + n])? {
                    break;
                }
                progressed = true;
                out.offset += n;
                if index == last_index {
                    self.outbox[peer].pop_front();
                }
            }
        }
        Ok(progressed)
    }
}
