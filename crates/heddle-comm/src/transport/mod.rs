//! Transports: how frames move to one peer. Every link offers the same non-blocking
//! `try_send` / `poll`; the engine never knows which one it drives.

pub(crate) mod bcast_area;
pub(crate) mod doorbell;
pub(crate) mod edge_slots;
pub(crate) mod region;
pub(crate) mod ring;
pub mod shm;
pub(crate) mod tcp;

#[cfg(feature = "mpi")]
pub mod mpi;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use heddle_wire::Header;

use crate::Result;
use region::Region;
use ring::{ring_bytes, RingConsumer, RingLink, RingProducer};

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

/// A bidirectional link to one peer. Every transport offers the same non-blocking calls,
/// so the engine (and the dataflow channels) never know which one they drive.
pub(crate) trait Link: std::fmt::Debug + Send {
    /// Sends one frame (at most one buffer) if the link's credit allows; `false`: no room.
    fn try_send(&mut self, header: &Header, payload: &[u8]) -> Result<bool>;

    /// Offers the next incoming frame to `f` (consumed if it returns true).
    fn poll(&mut self, f: &mut dyn FnMut(&Header, &[u8]) -> Result<bool>) -> Result<Polled>;

    /// Checks that peer `rank` is still there (cheap; call while idle).
    fn check_alive(&mut self, rank: usize) -> Result<()>;

    /// Whether everything sent so far has left this process (pushes staged bytes).
    fn flushed(&mut self) -> bool;

    /// The transport's name in reports and metrics: `tcp`, `shm`, `mpi` or `local`.
    fn transport(&self) -> &'static str;

    /// Whether this link is TCP (for reporting).
    fn is_tcp(&self) -> bool {
        self.transport() == "tcp"
    }

    /// Whether a frame waits to be read (links that cannot tell say yes, so that nobody
    /// sleeps on them).
    fn has_input(&self) -> bool {
        true
    }
}

/// A link that counts the bytes it sent ([`crate::metrics::bytes_sent`]).
#[derive(Debug)]
pub(crate) struct Metered {
    inner: BoxedLink,
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl Metered {
    /// `inner`, counted (unless metrics are off).
    pub(crate) fn wrap(inner: BoxedLink) -> BoxedLink {
        if !crate::metrics::enabled() {
            return inner;
        }
        let sent = crate::metrics::bytes_sent(inner.transport());
        Box::new(Metered { inner, sent })
    }
}

impl Link for Metered {
    fn try_send(&mut self, header: &Header, payload: &[u8]) -> Result<bool> {
        let sent = self.inner.try_send(header, payload)?;
        if sent {
            let bytes = (heddle_wire::HEADER_LEN + payload.len()) as u64;
            self.sent.fetch_add(bytes, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(sent)
    }

    fn poll(&mut self, f: &mut dyn FnMut(&Header, &[u8]) -> Result<bool>) -> Result<Polled> {
        self.inner.poll(f)
    }

    fn check_alive(&mut self, rank: usize) -> Result<()> {
        self.inner.check_alive(rank)
    }

    fn flushed(&mut self) -> bool {
        self.inner.flushed()
    }

    fn transport(&self) -> &'static str {
        self.inner.transport()
    }

    fn has_input(&self) -> bool {
        self.inner.has_input()
    }
}

/// The frame limits of a link whose buffers hold `buffer_bytes` (header included).
pub(crate) fn link_limits(buffer_bytes: usize) -> heddle_wire::Limits {
    heddle_wire::Limits {
        max_frame_payload: (buffer_bytes - heddle_wire::HEADER_LEN) as u32,
        ..heddle_wire::Limits::default()
    }
}

/// The credits a link's `Credit` frame (edge 0) grants: its 4-byte payload.
///
/// # Errors
/// [`crate::Error::Wire`] naming `peer` if the payload is not 4 bytes.
pub(crate) fn granted(payload: &[u8], peer: usize) -> Result<usize> {
    <[u8; 4]>::try_from(payload).map(|b| u32::from_le_bytes(b) as usize).map_err(|_| {
        crate::Error::Wire {
            rank: peer,
            source: heddle_wire::Error::Inconsistent("a credit payload must be exactly 4 bytes"),
        }
    })
}

/// A `Credit` frame (edge 0) granting `n` buffers back to the sender.
pub(crate) fn grant_frame(n: usize) -> heddle_wire::Frame {
    let header = heddle_wire::Header::new(heddle_wire::Kind::Credit);
    heddle_wire::Frame::data(header, heddle_wire::Codec::Raw, (n as u32).to_le_bytes().to_vec())
}

/// A link of any transport.
pub(crate) type BoxedLink = Box<dyn Link>;

/// A pair of in-memory links between two endpoints of one process.
pub(crate) fn heap_pair(
    (a, a_bell): (usize, &doorbell::Doorbell),
    (b, b_bell): (usize, &doorbell::Doorbell),
    slots: usize,
    slot_bytes: usize,
) -> (BoxedLink, BoxedLink) {
    let rb = ring_bytes(slots, slot_bytes);
    let region = Arc::new(Region::heap(2 * rb));
    // Ring 0 carries a -> b, ring 1 carries b -> a.
    let a_link = RingLink {
        tx: RingProducer::new(region.clone(), 0, slots, slot_bytes),
        rx: RingConsumer::new(region.clone(), rb, slots, slot_bytes, b),
        pid: None,
        bell: Some(b_bell.clone()),
    };
    let b_link = RingLink {
        tx: RingProducer::new(region.clone(), rb, slots, slot_bytes),
        rx: RingConsumer::new(region, 0, slots, slot_bytes, a),
        pid: None,
        bell: Some(a_bell.clone()),
    };
    (Box::new(a_link), Box::new(b_link))
}

/// A link from an endpoint to itself; it rings `bell` (the endpoint's own) for the
/// endpoint's other threads.
pub(crate) fn loopback(
    rank: usize,
    slots: usize,
    slot_bytes: usize,
    bell: Option<doorbell::Doorbell>,
) -> BoxedLink {
    let region = Arc::new(Region::heap(ring_bytes(slots, slot_bytes)));
    Box::new(RingLink {
        tx: RingProducer::new(region.clone(), 0, slots, slot_bytes),
        rx: RingConsumer::new(region, 0, slots, slot_bytes, rank),
        pid: None,
        bell,
    })
}

/// A link to a same-host peer: our ring in its segment, its ring in ours; and the peer's
/// broadcast area.
///
/// # Errors
/// As [`shm::ShmSegment::producer_to`].
pub(crate) fn shm_link(
    own: &shm::ShmSegment,
    peer_path: &std::path::Path,
    shape: shm::RingShape,
    my_rank: usize,
    peer: usize,
) -> Result<(BoxedLink, bcast_area::Area)> {
    let p = shm::ShmSegment::producer_to(peer_path, shape, my_rank)?;
    let link =
        RingLink { tx: p.ring, rx: own.consumer(peer), pid: Some(p.pid), bell: Some(p.bell) };
    Ok((Box::new(link), p.area))
}

/// The byte stream a TCP link runs over: the socket itself, or a secure channel on it
/// (TLS, or HMAC-sealed records) that the runtime set up. Reads and writes never block:
/// the socket is non-blocking, and a stream that cannot take or give bytes now answers
/// [`std::io::ErrorKind::WouldBlock`].
///
/// ```
/// use heddle_comm::transport::LinkStream;
/// let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
/// let stream = std::net::TcpStream::connect(listener.local_addr()?)?;
/// let mut boxed: Box<dyn LinkStream> = Box::new(stream);
/// assert!(boxed.push()?); // a bare socket holds nothing back
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait LinkStream: Read + Write + Send + std::fmt::Debug {
    /// Sends bytes the stream has sealed but not yet written (a TLS record, say), without
    /// blocking; `true` when none remain.
    ///
    /// # Errors
    /// The socket's write error (not [`std::io::ErrorKind::WouldBlock`]: that is `false`).
    fn push(&mut self) -> std::io::Result<bool>;

    /// The socket underneath, for its options.
    fn socket(&self) -> &TcpStream;
}

impl LinkStream for TcpStream {
    fn push(&mut self) -> std::io::Result<bool> {
        Ok(true)
    }

    fn socket(&self) -> &TcpStream {
        self
    }
}

/// A link over an authenticated TCP stream.
///
/// # Errors
/// As [`tcp::TcpLink::new`].
pub(crate) fn tcp_link(
    stream: Box<dyn LinkStream>,
    peer: usize,
    buffer_bytes: usize,
    window: usize,
) -> Result<BoxedLink> {
    Ok(Box::new(tcp::TcpLink::new(stream, peer, buffer_bytes, window)?))
}
