//! The dataflow edges' shared slots: the part of a worker's broadcast area where a message
//! that goes to several same-host workers (a broadcast edge's batch) is written once and
//! copied out by each of them, instead of being copied into one ring per reader.
//!
//! Each slot has a state word in shared memory: a generation (high 32 bits, bumped at
//! every claim) and the holds left (low 32 bits: readers still to copy it; `WRITING` while
//! the owner fills it). Only the owner claims a slot, by a compare-and-swap from no holds
//! (any of its threads may, for any of its edges); each reader copies the slot, then drops
//! its hold — only if the generation is still the one its reference names, so a late
//! release cannot free a later claim. The reference itself travels as an ordinary message
//! on the edge, after the copy into the slot, through a link whose atomics order the two.

use std::sync::atomic::{AtomicU64, Ordering};

use super::region::Region;

/// Slots of an area for edges.
pub(crate) const EDGE_SLOTS: usize = 8;
/// Bytes of an edge slot: a message larger than this goes the ordinary way.
pub(crate) const EDGE_SLOT_BYTES: usize = 2 << 20;
/// The state words, one cache line each, padded to a page.
const STATES_BYTES: usize = 4096;
/// Bytes of the edges' part of an area.
pub(crate) const EDGE_AREA_BYTES: usize = STATES_BYTES + EDGE_SLOTS * EDGE_SLOT_BYTES;
/// Holds of a slot being written.
const WRITING: u64 = u32::MAX as u64;

/// A claimed slot as readers name it: which slot, its generation, and the message's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedRef {
    slot: u32,
    generation: u32,
    len: u32,
}

impl SharedRef {
    /// Bytes of [`SharedRef::to_bytes`].
    pub const BYTES: usize = 12;

    /// The reference as a message's payload.
    pub fn to_bytes(self) -> [u8; 12] {
        let mut b = [0; 12];
        b[..4].copy_from_slice(&self.slot.to_le_bytes());
        b[4..8].copy_from_slice(&self.generation.to_le_bytes());
        b[8..].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    /// A reference from a message's payload; `None` if it is not one.
    pub fn from_bytes(b: &[u8]) -> Option<SharedRef> {
        let word = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let r = SharedRef { slot: word(0)?, generation: word(4)?, len: word(8)? };
        (b.len() == Self::BYTES
            && (r.slot as usize) < EDGE_SLOTS
            && r.len as usize <= EDGE_SLOT_BYTES)
            .then_some(r)
    }

    /// The message's length.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether the message is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The edges' slots of one worker's area, as its owner or a same-host reader maps them.
pub(crate) struct EdgeSlots<'a> {
    region: &'a Region,
    offset: usize,
}

impl<'a> EdgeSlots<'a> {
    pub(crate) fn new(region: &'a Region, offset: usize) -> EdgeSlots<'a> {
        assert!(offset + EDGE_AREA_BYTES <= region.len(), "edge slots past their region");
        EdgeSlots { region, offset }
    }

    fn state(&self, slot: usize) -> &AtomicU64 {
        // SAFETY: in bounds (checked in `new`), 64-byte aligned (the area is page-aligned),
        // and only ever accessed atomically, by every process that maps the area.
        unsafe { &*(self.region.at(self.offset + slot * 64) as *const AtomicU64) }
    }

    fn data(&self, slot: usize) -> *mut u8 {
        self.region.at(self.offset + STATES_BYTES + slot * EDGE_SLOT_BYTES)
    }

    /// Writes `data` into a free slot for `readers` holds (owner only). `None` when it is
    /// too large or every slot is held: send it the ordinary way.
    pub(crate) fn share(&self, data: &[u8], readers: u32) -> Option<SharedRef> {
        if data.len() > EDGE_SLOT_BYTES || readers == 0 || u64::from(readers) >= WRITING {
            return None;
        }
        for slot in 0..EDGE_SLOTS {
            let state = self.state(slot);
            let now = state.load(Ordering::Acquire);
            if now & WRITING != 0 {
                continue;
            }
            let generation = ((now >> 32) as u32).wrapping_add(1);
            let claimed = u64::from(generation) << 32 | WRITING;
            if state.compare_exchange(now, claimed, Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            // SAFETY: in bounds (`data.len()` checked above); the slot is ours alone until
            // its holds are published below (no reader has a reference of this generation).
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.data(slot), data.len()) };
            state.store(u64::from(generation) << 32 | u64::from(readers), Ordering::Release);
            return Some(SharedRef { slot: slot as u32, generation, len: data.len() as u32 });
        }
        None
    }

    /// Copies the message `r` names and drops this reader's hold on it. `None` if the slot
    /// no longer holds it (a reference from an ended job, or a forged one).
    pub(crate) fn take(&self, r: SharedRef) -> Option<Vec<u8>> {
        let state = self.state(r.slot as usize);
        let now = state.load(Ordering::Acquire);
        let holds = now & WRITING;
        if (now >> 32) as u32 != r.generation || holds == 0 || holds == WRITING {
            return None;
        }
        let mut out = Vec::with_capacity(r.len());
        // SAFETY: in bounds (`from_bytes` checked slot and length); the owner wrote the slot
        // before publishing the holds we saw (Acquire) and writes it again only after every
        // hold is dropped, ours included (below). The copy fills the `r.len()` bytes that
        // `set_len` then exposes.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data(r.slot as usize), out.as_mut_ptr(), r.len());
            out.set_len(r.len());
        }
        self.release(r).then_some(out)
    }

    /// Drops one hold on `r` (a reader done with it, or a reference that will not be sent).
    /// Returns whether `r` was still held.
    pub(crate) fn release(&self, r: SharedRef) -> bool {
        let state = self.state(r.slot as usize);
        let mut now = state.load(Ordering::Acquire);
        loop {
            let holds = now & WRITING;
            if (now >> 32) as u32 != r.generation || holds == 0 || holds == WRITING {
                return false;
            }
            match state.compare_exchange_weak(now, now - 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(seen) => now = seen,
            }
        }
    }

    /// Slots held now (for tests and diagnostics).
    pub(crate) fn held(&self) -> usize {
        (0..EDGE_SLOTS).filter(|&s| self.state(s).load(Ordering::Acquire) & WRITING != 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::super::bcast_area::Area;
    use super::*;

    #[test]
    fn a_shared_message_is_read_by_each_holder_then_the_slot_is_free() {
        let area = Area::heap();
        let slots = area.edge_slots();
        let data: Vec<u8> = (0..100_000).map(|i| (i % 251) as u8).collect();
        let r = slots.share(&data, 3).unwrap();
        let r2 = SharedRef::from_bytes(&r.to_bytes()).unwrap();
        assert_eq!(r2, r);
        for _ in 0..3 {
            assert_eq!(slots.take(r2).unwrap(), data);
        }
        assert_eq!(slots.take(r2), None, "a fourth reader has no hold");
        assert_eq!(slots.held(), 0);
    }

    #[test]
    fn full_slots_and_large_messages_go_the_ordinary_way_and_stale_refs_fail() {
        let area = Area::heap();
        let slots = area.edge_slots();
        let refs: Vec<_> =
            (0..EDGE_SLOTS).map(|i| slots.share(&[i as u8; 10], 1).unwrap()).collect();
        assert_eq!(slots.share(&[9], 1), None, "every slot held");
        assert_eq!(slots.share(&vec![0; EDGE_SLOT_BYTES + 1], 1), None);
        assert!(slots.release(refs[0]));
        let again = slots.share(&[7; 3], 2).unwrap();
        assert_eq!(again.slot, refs[0].slot);
        assert_ne!(again.generation, refs[0].generation);
        assert_eq!(slots.take(refs[0]), None, "a reference of the slot's last generation");
        assert!(!slots.release(refs[0]));
        assert_eq!(slots.take(again).unwrap(), vec![7; 3]);
        assert_eq!(SharedRef::from_bytes(&[0; 11]), None);
        let mut bad = again.to_bytes();
        bad[0] = EDGE_SLOTS as u8;
        assert_eq!(SharedRef::from_bytes(&bad), None);
    }

    #[test]
    fn threads_share_and_take_concurrently_without_mixing_messages() {
        let area = Area::heap();
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let area = area.clone();
                s.spawn(move || {
                    let slots = area.edge_slots();
                    for i in 0..2000u32 {
                        let msg =
                            vec![t.wrapping_mul(31).wrapping_add(i as u8); 64 + (i as usize % 300)];
                        let Some(r) = slots.share(&msg, 2) else { continue };
                        assert_eq!(slots.take(r).unwrap(), msg);
                        assert_eq!(slots.take(r).unwrap(), msg);
                    }
                });
            }
        });
        assert_eq!(area.edge_slots().held(), 0);
    }
}
