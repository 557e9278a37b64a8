//! Transports: how frames move to one peer. Every link offers the same non-blocking
//! `try_send` / `poll`; the engine never knows which one it drives.

pub(crate) mod region;
pub(crate) mod ring;
pub mod shm;
pub(crate) mod tcp;

use std::sync::Arc;

use heddle_wire::Header;

use crate::Result;
use region::Region;
use ring::{ring_bytes, RingConsumer, RingProducer};

/// Outcome of offering one incoming frame to a handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Polled {
    /// No frame waiting.
    Empty,
    /// The handler took the frame.
    Consumed,
    /// The handler declined it; it stays at the head of the link.
    Refused,
}

/// A bidirectional link to one peer.
#[derive(Debug)]
pub(crate) enum Link {
    /// Rings in memory: same process (heap) or same host (`/dev/shm`).
    Ring {
        /// Our ring in the peer's memory.
        tx: RingProducer,
        /// The peer's ring in ours.
        rx: RingConsumer,
        /// The peer's process, checked while waiting (`None` within one process).
        pid: Option<u32>,
    },
    /// A TCP connection.
    Tcp(tcp::TcpLink),
}

impl Link {
    /// Sends one frame (at most one buffer) if credit allows.
    pub(crate) fn try_send(&mut self, header: &Header, payload: &[u8]) -> Result<bool> {
        match self {
            Link::Ring { tx, .. } => Ok(tx.try_push(header, payload)),
            Link::Tcp(t) => t.try_send(header, payload),
        }
    }

    /// Offers the next incoming frame to `f`.
    pub(crate) fn poll(
        &mut self,
        f: &mut dyn FnMut(&Header, &[u8]) -> Result<bool>,
    ) -> Result<Polled> {
        match self {
            Link::Ring { rx, .. } => rx.poll(f),
            Link::Tcp(t) => t.poll(f),
        }
    }

    /// Checks that the peer is still there (cheap; call while idle).
    pub(crate) fn check_alive(&mut self, rank: usize) -> Result<()> {
        match self {
            Link::Ring { pid: Some(pid), .. } if !shm::process_alive(*pid) => {
                Err(crate::Error::PeerLost { rank, detail: format!("its process {pid} exited") })
            }
            Link::Tcp(t) => t.check_alive(),
            _ => Ok(()),
        }
    }

    /// Whether everything sent so far has left this process (pushes staged bytes).
    pub(crate) fn flushed(&mut self) -> bool {
        match self {
            Link::Ring { .. } => true,
            Link::Tcp(t) => t.flush(),
        }
    }

    /// Whether this link is TCP (for reporting).
    pub(crate) fn is_tcp(&self) -> bool {
        matches!(self, Link::Tcp(_))
    }
}

/// A pair of in-memory links between two endpoints of one process.
pub(crate) fn heap_pair(a: usize, b: usize, slots: usize, slot_bytes: usize) -> (Link, Link) {
    let rb = ring_bytes(slots, slot_bytes);
    let region = Arc::new(Region::heap(2 * rb));
    // Ring 0 carries a -> b, ring 1 carries b -> a.
    let a_link = Link::Ring {
        tx: RingProducer::new(region.clone(), 0, slots, slot_bytes),
        rx: RingConsumer::new(region.clone(), rb, slots, slot_bytes, b),
        pid: None,
    };
    let b_link = Link::Ring {
        tx: RingProducer::new(region.clone(), rb, slots, slot_bytes),
        rx: RingConsumer::new(region, 0, slots, slot_bytes, a),
        pid: None,
    };
    (a_link, b_link)
}

/// A link from an endpoint to itself.
pub(crate) fn loopback(rank: usize, slots: usize, slot_bytes: usize) -> Link {
    let region = Arc::new(Region::heap(ring_bytes(slots, slot_bytes)));
    Link::Ring {
        tx: RingProducer::new(region.clone(), 0, slots, slot_bytes),
        rx: RingConsumer::new(region, 0, slots, slot_bytes, rank),
        pid: None,
    }
}

/// A link to a same-host peer: our ring in its segment, its ring in ours.
///
/// # Errors
/// As [`shm::ShmSegment::producer_to`].
pub(crate) fn shm_link(
    own: &shm::ShmSegment,
    peer_path: &std::path::Path,
    shape: shm::RingShape,
    my_rank: usize,
    peer: usize,
) -> Result<Link> {
    let (tx, pid) = shm::ShmSegment::producer_to(peer_path, shape, my_rank)?;
    Ok(Link::Ring { tx, rx: own.consumer(peer), pid: Some(pid) })
}

/// A link over an authenticated TCP stream.
///
/// # Errors
/// As [`tcp::TcpLink::new`].
pub(crate) fn tcp_link(
    stream: std::net::TcpStream,
    peer: usize,
    buffer_bytes: usize,
    window: usize,
) -> Result<Link> {
    tcp::TcpLink::new(stream, peer, buffer_bytes, window).map(Link::Tcp)
}
