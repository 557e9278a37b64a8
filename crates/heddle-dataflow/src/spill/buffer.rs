//! The in-memory buffer of a spill sorter: records packed into arena chunks, sorted
//! through a compact index.
//!
//! Each record is stored as in a run file (key length and value length as little-endian
//! `u32`, key, value) in the newest chunk. Chunks double from 4 KiB to 2 MiB (a larger
//! record gets a chunk of its own) and are never reallocated, so the buffer's memory is its
//! bytes plus at most one chunk, and no copy doubles it while it grows. Chunks of 2 MiB are
//! backed by huge pages where the system allows ([`chunk`](super::chunk)). Cleared chunks
//! are kept for the next run.

use super::chunk::{Chunk, HUGE_BYTES};
use super::KeyOrder;

const LENS: usize = 8;
const MIN_CHUNK_BYTES: usize = 4 << 10;
const CHUNK_BYTES: usize = HUGE_BYTES;

/// Memory of one buffered record beyond its key and value: its lengths and index entry.
pub(super) const RECORD_OVERHEAD: usize = LENS + std::mem::size_of::<Entry>();

/// One buffered record: where it lies, and a prefix of its key to sort by.
#[derive(Debug, Clone, Copy)]
struct Entry {
    /// Up to 8 key bytes after the bytes all buffered keys share, big-endian, zero-padded.
    prefix: u64,
    /// Chunk number (high half) and position in the chunk (low half); grows with push
    /// order, so it also breaks ties stably.
    at: u64,
}

/// Buffered records in arena chunks, and an index that is sorted instead of the records.
#[derive(Debug, Default)]
pub(super) struct Buffer {
    chunks: Vec<Chunk>,
    spare: Vec<Chunk>,
    index: Vec<Entry>,
}

/// The bytes of the record at `at`: lengths, key and value, then whatever follows.
fn slot(chunks: &[Chunk], at: u64) -> &[u8] {
    &chunks[(at >> 32) as usize].filled()[(at & u64::from(u32::MAX)) as usize..]
}

/// How many records ahead of the one read in index order to prefetch.
const PREFETCH_AHEAD: usize = 48;

/// Cache lines of a record to prefetch (a 100-byte record spans two or three).
const PREFETCH_LINES: usize = 3;

/// Asks the CPU to start loading the first cache lines of `bytes` (a hint; no effect
/// on other architectures).
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    for at in (0..bytes.len().min(64 * PREFETCH_LINES)).step_by(64) {
        // SAFETY: a prefetch reads nothing and cannot fault; the address is in bounds anyway.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                bytes[at..].as_ptr().cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

/// The key and value of the record at `at`.
fn record(chunks: &[Chunk], at: u64) -> (&[u8], &[u8]) {
    let bytes = slot(chunks, at);
    let key_len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let value_len = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]) as usize;
    let (key, rest) = bytes[LENS..].split_at(key_len);
    (key, &rest[..value_len])
}

impl Buffer {
    /// Records buffered.
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    /// Appends a record whose key and value lengths each fit a `u32`.
    pub(super) fn push(&mut self, key: &[u8], value: &[u8]) {
        let need = LENS + key.len() + value.len();
        if !matches!(self.chunks.last(), Some(c) if c.room() >= need) {
            let chunk = match self.spare.pop() {
                Some(chunk) if chunk.capacity() >= need => chunk,
                other => {
                    self.spare.extend(other);
                    let last = self.chunks.last().map_or(0, Chunk::capacity);
                    Chunk::with_capacity((2 * last).clamp(MIN_CHUNK_BYTES, CHUNK_BYTES).max(need))
                }
            };
            self.chunks.push(chunk);
        }
        let number = self.chunks.len() - 1;
        let chunk = &mut self.chunks[number];
        let at = (number as u64) << 32 | chunk.len() as u64;
        let lens = [(key.len() as u32).to_le_bytes(), (value.len() as u32).to_le_bytes()];
        chunk.extend(&[&lens[0], &lens[1], key, value]);
        self.index.push(Entry { prefix: 0, at });
    }

    /// The `i`th record in index order (key order once sorted). Reading in order, the
    /// records lie scattered over the chunks: the one [`PREFETCH_AHEAD`] places on is
    /// fetched into the cache meanwhile, so its cache miss overlaps the work between.
    pub(super) fn get(&self, i: usize) -> Option<(&[u8], &[u8])> {
        if let Some(ahead) = self.index.get(i + PREFETCH_AHEAD) {
            prefetch(slot(&self.chunks, ahead.at));
        }
        self.index.get(i).map(|e| record(&self.chunks, e.at))
    }

    /// Every record in index order.
    pub(super) fn records(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.index.iter().map(|e| record(&self.chunks, e.at))
    }

    /// Sorts the index by key, equal keys in push order. In byte order it compares the
    /// prefixes first, touching the keys in the chunks only on prefix ties.
    pub(super) fn sort(&mut self, order: &KeyOrder, bytewise: bool) {
        let chunks = &self.chunks;
        let key = |e: &Entry| record(chunks, e.at).0;
        if !bytewise {
            self.index.sort_unstable_by(|a, b| order(key(a), key(b)).then(a.at.cmp(&b.at)));
            return;
        }
        // Skip the bytes every key shares (say, a length header) so the prefix discriminates.
        let first = self.index.first().map(key).unwrap_or_default();
        let skip = self.index.iter().fold(first.len(), |n, e| {
            key(e).iter().zip(&first[..n]).take_while(|(a, b)| a == b).count()
        });
        for entry in &mut self.index {
            let k = key(entry);
            let k = &k[skip.min(k.len())..];
            let mut prefix = [0u8; 8];
            let n = k.len().min(8);
            prefix[..n].copy_from_slice(&k[..n]);
            entry.prefix = u64::from_be_bytes(prefix);
        }
        self.index.sort_unstable_by(|a, b| {
            a.prefix.cmp(&b.prefix).then_with(|| key(a).cmp(key(b))).then(a.at.cmp(&b.at))
        });
    }

    /// Drops every record, keeping the chunks for reuse.
    pub(super) fn clear(&mut self) {
        self.index.clear();
        for mut chunk in self.chunks.drain(..) {
            chunk.clear();
            self.spare.push(chunk);
        }
    }
}
