//! Blocks at displacements: mpi4py's `[buffer, (counts, displs)]` for the vector
//! collectives. Heddle's collectives move blocks packed in rank order; blocks placed
//! elsewhere go through a packed copy (already packed ones do not).

use pyo3::prelude::*;

use crate::buffer::Region;
use crate::errors::argument;

/// Where each rank's block lies in a buffer (bytes), when not packed in rank order.
#[derive(Debug)]
pub(crate) struct Blocks {
    counts: Vec<usize>,
    displs: Vec<usize>,
}

impl Blocks {
    /// The blocks of `counts` bytes at `displs` elements of `itemsize` bytes in a buffer of
    /// `len` bytes; `None` when there are no displacements or they are the packed ones.
    ///
    /// # Errors
    /// Displacements not one per rank, or a block past the end of the buffer.
    pub(crate) fn new(
        what: &str,
        counts: &[usize],
        displs: Option<Vec<usize>>,
        itemsize: usize,
        len: usize,
    ) -> PyResult<Option<Blocks>> {
        let Some(displs) = displs else { return Ok(None) };
        if displs.len() != counts.len() {
            return Err(argument(format!(
                "{what}: {} displacements for {} counts (one per rank)",
                displs.len(),
                counts.len()
            )));
        }
        let displs: Vec<usize> = displs.iter().map(|d| d * itemsize).collect();
        for (rank, (&d, &c)) in displs.iter().zip(counts).enumerate() {
            if d.checked_add(c).is_none_or(|end| end > len) {
                return Err(argument(format!(
                    "{what}: the block of rank {rank} ({} elements at displacement {}) ends \
                     past the buffer's {} elements",
                    c / itemsize,
                    d / itemsize,
                    len / itemsize
                )));
            }
        }
        let packed = counts.iter().scan(0, |at, &c| {
            let d = *at;
            *at += c;
            Some(d)
        });
        if displs.iter().copied().eq(packed) {
            return Ok(None);
        }
        Ok(Some(Blocks { counts: counts.to_vec(), displs }))
    }

    /// Bytes of all blocks, packed.
    fn total(&self) -> usize {
        self.counts.iter().sum()
    }

    /// A packed copy of `region`'s blocks; keep the words alive while the region is used.
    ///
    /// # Safety
    /// `region` is exported and readable, and holds every block ([`Blocks::new`] checked it).
    pub(crate) unsafe fn pack(&self, region: Region) -> (Vec<u64>, Region) {
        let (words, packed) = Region::scratch(self.total());
        let mut at = 0;
        for (&d, &c) in self.displs.iter().zip(&self.counts) {
            // SAFETY: both ranges lie inside their regions (checked in `new`).
            unsafe { packed.slice(at, c).copy_from(region.slice(d, c)) };
            at += c;
        }
        (words, packed)
    }

    /// Scratch memory for the blocks, packed, to receive into.
    pub(crate) fn scratch(&self) -> (Vec<u64>, Region) {
        Region::scratch(self.total())
    }

    /// Copies `packed`'s blocks to their displacements in `region`.
    ///
    /// # Safety
    /// `region` is exported and writable, and holds every block; `packed` came from
    /// [`Blocks::scratch`].
    pub(crate) unsafe fn unpack(&self, packed: Region, region: Region) {
        let mut at = 0;
        for (&d, &c) in self.displs.iter().zip(&self.counts) {
            // SAFETY: both ranges lie inside their regions (checked in `new`).
            unsafe { region.slice(d, c).copy_from(packed.slice(at, c)) };
            at += c;
        }
    }
}
