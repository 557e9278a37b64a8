//! A block of memory shared by a producer and a consumer: heap (same process) or a
//! memory-mapped file in `/dev/shm` (same host).

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;

enum Backing {
    Heap(Layout),
    Mapped(#[allow(dead_code)] memmap2::MmapMut),
}

/// Zero-initialised memory that outlives every ring placed in it (hold it in an `Arc`).
pub(crate) struct Region {
    ptr: *mut u8,
    len: usize,
    backing: Backing,
}

// SAFETY: the region is plain memory; concurrent access is coordinated by the ring's
// atomics (one producer, one consumer per ring, disjoint slots).
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.backing {
            Backing::Heap(_) => "heap",
            Backing::Mapped(_) => "mapped",
        };
        write!(f, "Region({kind}, {} bytes)", self.len)
    }
}

impl Region {
    /// Zeroed heap memory aligned to a cache line.
    pub(crate) fn heap(len: usize) -> Region {
        let layout = Layout::from_size_align(len.max(64), 64).expect("region layout");
        // SAFETY: layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Region { ptr, len, backing: Backing::Heap(layout) }
    }

    /// A mapped file (already zero-filled by `set_len` on a fresh file).
    pub(crate) fn mapped(mut map: memmap2::MmapMut) -> Region {
        let ptr = map.as_mut_ptr();
        let len = map.len();
        Region { ptr, len, backing: Backing::Mapped(map) }
    }

    /// Pointer to byte `offset`.
    ///
    /// # Panics
    /// If `offset` is past the end.
    pub(crate) fn at(&self, offset: usize) -> *mut u8 {
        assert!(offset <= self.len, "offset {offset} past region of {} bytes", self.len);
        // SAFETY: in bounds, checked above.
        unsafe { self.ptr.add(offset) }
    }

    /// Size in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        if let Backing::Heap(layout) = self.backing {
            // SAFETY: allocated in `heap` with this layout.
            unsafe { dealloc(self.ptr, layout) }
        }
    }
}
