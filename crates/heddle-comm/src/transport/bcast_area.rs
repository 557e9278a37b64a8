//! Broadcast areas: the shared-memory channel of Squirrel's design, one writer and many
//! readers on a host, each message copied into shared memory once.
//!
//! Every worker owns one area (at the end of its segment, or on the heap for a world inside
//! one process): a few slots that only it writes, as the root of a broadcast, and that every
//! same-host peer — which maps the segment anyway, to write into its rings — reads. The
//! slots carry data only; who may read which slot and when it may be written again is said
//! by small messages through the ordinary links (`collectives::broadcast::shm_channel`),
//! whose ring atomics order the copies, so the engine's matching, timeouts and failure
//! detection cover the channel too.

use std::sync::Arc;

use super::region::Region;

/// Slots of an area.
pub(crate) const AREA_SLOTS: usize = 4;
/// Bytes of a slot: a broadcast is cut into chunks of this size, pipelined over the slots.
pub(crate) const AREA_SLOT_BYTES: usize = 512 * 1024;
/// Bytes of the collectives' slots.
const COLLECTIVE_BYTES: usize = AREA_SLOTS * AREA_SLOT_BYTES;
/// Bytes of an area: the collectives' slots, then the dataflow edges' shared slots.
pub(crate) const AREA_BYTES: usize = COLLECTIVE_BYTES + super::edge_slots::EDGE_AREA_BYTES;

/// One worker's area, as its owner (writer) or a same-host peer (reader) maps it.
#[derive(Debug, Clone)]
pub(crate) struct Area {
    region: Arc<Region>,
    offset: usize,
}

impl Area {
    /// An area in `region` at `offset` (`AREA_BYTES` long).
    ///
    /// # Panics
    /// If the region is too short.
    pub(crate) fn new(region: Arc<Region>, offset: usize) -> Area {
        assert!(offset + AREA_BYTES <= region.len(), "broadcast area past its region");
        Area { region, offset }
    }

    /// An area on the heap, for the ranks of a world inside one process.
    pub(crate) fn heap() -> Area {
        Area::new(Arc::new(Region::heap(AREA_BYTES)), 0)
    }

    fn slot(&self, slot: usize, len: usize) -> *mut u8 {
        assert!(slot < AREA_SLOTS && len <= AREA_SLOT_BYTES, "slot {slot} of {len} bytes");
        self.region.at(self.offset + slot * AREA_SLOT_BYTES)
    }

    /// The dataflow edges' shared slots of this area (`edge_slots.rs`).
    pub(crate) fn edge_slots(&self) -> super::edge_slots::EdgeSlots<'_> {
        super::edge_slots::EdgeSlots::new(&self.region, self.offset + COLLECTIVE_BYTES)
    }

    /// Copies `data` into `slot`. Only the owner writes, and only a slot no reader is told
    /// to read (the channel's acknowledgements say when).
    pub(crate) fn write(&self, slot: usize, data: &[u8]) {
        let to = self.slot(slot, data.len());
        // SAFETY: in bounds (checked by `slot`); no reader reads this slot now (above), and
        // the message that tells a reader to read it is sent after this copy, through a link
        // whose atomics order the two.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), to, data.len()) };
    }

    /// Copies `slot` into `out`, once the owner said it holds the next chunk.
    pub(crate) fn read(&self, slot: usize, out: &mut [u8]) {
        let from = self.slot(slot, out.len());
        // SAFETY: in bounds; the owner wrote the slot before sending the message this
        // reader received (ordered by the link's atomics) and does not write it again before
        // this reader's acknowledgement.
        unsafe { std::ptr::copy_nonoverlapping(from, out.as_mut_ptr(), out.len()) };
    }
}

/// The areas a worker reaches, by world rank: its own and those of its same-host peers.
#[derive(Debug, Default)]
pub(crate) struct Areas {
    by_rank: Vec<Option<Area>>,
}

impl Areas {
    /// No areas for a world of `size` (TCP or MPI links only).
    pub(crate) fn none(size: usize) -> Areas {
        Areas { by_rank: vec![None; size] }
    }

    /// Records world rank `rank`'s area.
    pub(crate) fn set(&mut self, rank: usize, area: Area) {
        self.by_rank[rank] = Some(area);
    }

    /// World rank `rank`'s area, if this worker maps it.
    pub(crate) fn get(&self, rank: usize) -> Option<&Area> {
        self.by_rank.get(rank).and_then(Option::as_ref)
    }

    /// Whether this worker maps the area of every one of `members` (world ranks) — true on
    /// every member alike when they share a host and its shared memory.
    pub(crate) fn cover(&self, members: &[usize]) -> bool {
        members.len() > 1 && members.iter().all(|&r| self.get(r).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_holds_what_was_written_and_areas_cover_only_mapped_ranks() {
        let a = Area::heap();
        let data: Vec<u8> = (0..AREA_SLOT_BYTES).map(|i| (i % 251) as u8).collect();
        a.write(AREA_SLOTS - 1, &data);
        let mut out = vec![0; AREA_SLOT_BYTES];
        a.read(AREA_SLOTS - 1, &mut out);
        assert_eq!(out, data);
        let mut areas = Areas::none(3);
        areas.set(0, a.clone());
        areas.set(2, a);
        assert!(areas.cover(&[0, 2]) && !areas.cover(&[0, 1]) && !areas.cover(&[2]));
    }

    #[test]
    #[should_panic(expected = "slot 4")]
    fn a_slot_past_the_area_is_refused() {
        Area::heap().write(AREA_SLOTS, &[1]);
    }
}
