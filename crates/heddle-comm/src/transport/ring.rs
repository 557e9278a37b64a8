//! Single-producer single-consumer ring of fixed-size buffers placed in a [`Region`].
//!
//! Layout at `offset`: the producer's `head` counter on its own cache line, the consumer's
//! `tail` counter on the next, then `slots` buffers of `slot_bytes` each. A buffer holds
//! one wire frame (header + payload). The producer may fill a buffer only while
//! `head - tail < slots`: the free buffers are the sender's credits, so a receiver never
//! holds more than its window. Counters only grow; `n % slots` picks the buffer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use heddle_wire::{Header, Limits, HEADER_LEN};

use super::doorbell::Doorbell;
use super::region::Region;
use super::{shm, Link, Polled};

const COUNTERS: usize = 128;

/// Bytes a ring of `slots` buffers of `slot_bytes` needs.
pub(crate) fn ring_bytes(slots: usize, slot_bytes: usize) -> usize {
    COUNTERS + slots * slot_bytes
}

#[derive(Debug, Clone)]
struct Geometry {
    region: Arc<Region>,
    offset: usize,
    slots: usize,
    slot_bytes: usize,
}

impl Geometry {
    fn new(region: Arc<Region>, offset: usize, slots: usize, slot_bytes: usize) -> Geometry {
        assert!(
            offset.is_multiple_of(64) && slot_bytes.is_multiple_of(64),
            "ring must be cache-line aligned"
        );
        assert!(
            offset + ring_bytes(slots, slot_bytes) <= region.len(),
            "ring does not fit its region"
        );
        Geometry { region, offset, slots, slot_bytes }
    }
    fn head(&self) -> &AtomicU64 {
        // SAFETY: 64-aligned, inside the region, lives as long as `self.region`.
        unsafe { &*(self.region.at(self.offset) as *const AtomicU64) }
    }
    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`, one cache line further.
        unsafe { &*(self.region.at(self.offset + 64) as *const AtomicU64) }
    }
    fn slot(&self, n: u64) -> *mut u8 {
        self.region.at(self.offset + COUNTERS + (n % self.slots as u64) as usize * self.slot_bytes)
    }
}

/// The writing end of a ring.
#[derive(Debug)]
pub(crate) struct RingProducer {
    g: Geometry,
    head: u64,
    tail_seen: u64,
}

impl RingProducer {
    pub(crate) fn new(
        region: Arc<Region>,
        offset: usize,
        slots: usize,
        slot_bytes: usize,
    ) -> RingProducer {
        let g = Geometry::new(region, offset, slots, slot_bytes);
        let head = g.head().load(Ordering::Acquire);
        let tail_seen = g.tail().load(Ordering::Acquire);
        RingProducer { g, head, tail_seen }
    }

    /// Writes one frame if a buffer is free; `false` means no credit right now.
    pub(crate) fn try_push(&mut self, header: &Header, payload: &[u8]) -> bool {
        debug_assert!(HEADER_LEN + payload.len() <= self.g.slot_bytes);
        debug_assert_eq!(header.key_len, 0);
        if self.head - self.tail_seen == self.g.slots as u64 {
            self.tail_seen = self.g.tail().load(Ordering::Acquire);
            if self.head - self.tail_seen == self.g.slots as u64 {
                return false;
            }
        }
        let slot = self.g.slot(self.head);
        // SAFETY: the slot is free (the consumer moved past it) and owned by us until we
        // publish `head`; payload fits (checked by the engine's fragmenting).
        unsafe {
            let hdr = std::slice::from_raw_parts_mut(slot, HEADER_LEN);
            header.encode(hdr);
            std::ptr::copy_nonoverlapping(payload.as_ptr(), slot.add(HEADER_LEN), payload.len());
        }
        self.head += 1;
        self.g.head().store(self.head, Ordering::Release);
        true
    }
}

/// The reading end of a ring.
#[derive(Debug)]
pub(crate) struct RingConsumer {
    g: Geometry,
    tail: u64,
    head_seen: u64,
    limits: Limits,
    peer: usize,
}

impl RingConsumer {
    /// The consumer of frames sent by `peer`.
    pub(crate) fn new(
        region: Arc<Region>,
        offset: usize,
        slots: usize,
        slot_bytes: usize,
        peer: usize,
    ) -> RingConsumer {
        let g = Geometry::new(region, offset, slots, slot_bytes);
        let tail = g.tail().load(Ordering::Acquire);
        let limits =
            Limits { max_frame_payload: (slot_bytes - HEADER_LEN) as u32, ..Limits::default() };
        RingConsumer { g, head_seen: tail, tail, limits, peer }
    }

    /// Whether a frame waits to be read.
    pub(crate) fn has_input(&self) -> bool {
        self.tail != self.g.head().load(Ordering::Acquire)
    }

    /// Offers the oldest frame to `f`; it is released (credit returned) if `f` returns true.
    pub(crate) fn poll(
        &mut self,
        f: &mut dyn FnMut(&Header, &[u8]) -> crate::Result<bool>,
    ) -> crate::Result<Polled> {
        if self.tail == self.head_seen {
            self.head_seen = self.g.head().load(Ordering::Acquire);
            if self.tail == self.head_seen {
                return Ok(Polled::Empty);
            }
        }
        let slot = self.g.slot(self.tail);
        // SAFETY: the producer published this slot (head > tail) and will not touch it
        // until we advance `tail`.
        let bytes = unsafe { std::slice::from_raw_parts(slot as *const u8, self.g.slot_bytes) };
        let wire = |source| crate::Error::Wire { rank: self.peer, source };
        let header = Header::decode(bytes, &self.limits).map_err(wire)?;
        if header.key_len != 0 {
            return Err(wire(heddle_wire::Error::Inconsistent(
                "keys are not used on ring transports",
            )));
        }
        let payload = &bytes[HEADER_LEN..HEADER_LEN + header.frag_len as usize];
        if f(&header, payload)? {
            self.tail += 1;
            self.g.tail().store(self.tail, Ordering::Release);
            Ok(Polled::Consumed)
        } else {
            Ok(Polled::Refused)
        }
    }
}

/// A link over two rings: ours in the peer's memory, the peer's in ours (same process:
/// heap; same host: `/dev/shm`).
#[derive(Debug)]
pub(crate) struct RingLink {
    /// Our ring in the peer's memory.
    pub(crate) tx: RingProducer,
    /// The peer's ring in ours.
    pub(crate) rx: RingConsumer,
    /// The peer's process, checked while waiting (`None` within one process).
    pub(crate) pid: Option<u32>,
    /// The peer's doorbell, rung when a frame is published to it or a buffer it filled is
    /// freed (`None`: the peer does not sleep on one).
    pub(crate) bell: Option<Doorbell>,
}

impl Link for RingLink {
    fn try_send(&mut self, header: &Header, payload: &[u8]) -> crate::Result<bool> {
        let sent = self.tx.try_push(header, payload);
        if let (true, Some(bell)) = (sent, &self.bell) {
            bell.ring();
        }
        Ok(sent)
    }

    fn poll(
        &mut self,
        f: &mut dyn FnMut(&Header, &[u8]) -> crate::Result<bool>,
    ) -> crate::Result<Polled> {
        let polled = self.rx.poll(f)?;
        if let (Polled::Consumed, Some(bell)) = (&polled, &self.bell) {
            bell.ring();
        }
        Ok(polled)
    }

    fn has_input(&self) -> bool {
        self.rx.has_input()
    }

    fn check_alive(&mut self, rank: usize) -> crate::Result<()> {
        match self.pid {
            Some(pid) if !shm::process_alive(pid) => {
                Err(crate::Error::PeerLost { rank, detail: format!("its process {pid} exited") })
            }
            _ => Ok(()),
        }
    }

    fn flushed(&mut self) -> bool {
        true
    }

    fn transport(&self) -> &'static str {
        if self.pid.is_some() {
            "shm"
        } else {
            "local"
        }
    }
}
