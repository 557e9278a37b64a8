//! BSP collectives: one module per collective, one file per algorithm, chosen from a data
//! table (`tuning.json`) by world size and message bytes, or forced per call or by config.
//!
//! Algorithms work on bytes through a [`Step`], which maps communicator ranks to world
//! ranks and runs one exchange of the engine per algorithm step. The typed public methods
//! live in `api_*.rs`.

pub(crate) mod allgather;
pub(crate) mod allreduce;
pub(crate) mod alltoall;
mod api_all;
mod api_blocks;
mod api_gather;
mod api_move;
mod api_reduce;
mod api_scan;
pub(crate) mod barrier;
mod blocks;
pub(crate) mod broadcast;
pub(crate) mod gather;
mod hierarchical;
mod layout;
pub(crate) mod nonblocking;
pub(crate) mod reduce;
pub(crate) mod reduce_scatter;
pub(crate) mod scan;
pub(crate) mod scatter;
mod select;
mod step;

pub use blocks::Blocks;
pub(crate) use layout::Layout;
pub use nonblocking::CollectiveRequest;
pub(crate) use select::{choose, choose_at, Reach};
pub use select::{Algorithm, Collective};
pub(crate) use step::Step;

use std::time::Duration;

/// Per-call options of a collective.
///
/// ```
/// use heddle_comm::{Algorithm, CallOptions};
/// let opts = CallOptions::default().algorithm(Algorithm::Ring);
/// assert_eq!(opts.algorithm, Some(Algorithm::Ring));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallOptions {
    /// Force this algorithm (falls back to one that always works if it cannot apply).
    pub algorithm: Option<Algorithm>,
    /// Override the configured timeout for this call.
    pub timeout: Option<Duration>,
}

impl CallOptions {
    /// Forces an algorithm.
    pub fn algorithm(mut self, a: Algorithm) -> CallOptions {
        self.algorithm = Some(a);
        self
    }
    /// Sets the timeout.
    pub fn timeout(mut self, t: Duration) -> CallOptions {
        self.timeout = Some(t);
        self
    }
}

/// Splits `n` elements into `parts` nearly equal blocks; returns byte (offset, len) pairs.
pub(crate) fn blocks(n_elems: usize, parts: usize, elem: usize) -> Vec<(usize, usize)> {
    let base = n_elems / parts;
    let extra = n_elems % parts;
    let mut out = Vec::with_capacity(parts);
    let mut off = 0;
    for i in 0..parts {
        let len = (base + usize::from(i < extra)) * elem;
        out.push((off, len));
        off += len;
    }
    out
}

/// Byte displacements from byte counts.
pub(crate) fn displacements(counts: &[usize]) -> Vec<(usize, usize)> {
    let mut off = 0;
    counts
        .iter()
        .map(|&c| {
            let r = (off, c);
            off += c;
            r
        })
        .collect()
}

/// Cuts `buf` into the mutable pieces at `ranges` (sorted by offset, non-overlapping).
///
/// # Panics
/// If the ranges are unsorted, overlap, or run past the end.
pub(crate) fn carve<'a>(buf: &'a mut [u8], ranges: &[(usize, usize)]) -> Vec<&'a mut [u8]> {
    let mut out = Vec::with_capacity(ranges.len());
    let mut rest = buf;
    let mut at = 0;
    for &(off, len) in ranges {
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(off - at);
        let (piece, tail) = tail.split_at_mut(len);
        out.push(piece);
        rest = tail;
        at = off + len;
    }
    out
}

/// Splits one buffer into a shared part and a disjoint mutable part.
///
/// # Panics
/// If the ranges overlap or are out of bounds.
pub(crate) fn split_disjoint(
    buf: &mut [u8],
    read: (usize, usize),
    write: (usize, usize),
) -> (&[u8], &mut [u8]) {
    let (r0, r1) = (read.0, read.0 + read.1);
    let (w0, w1) = (write.0, write.0 + write.1);
    assert!(r1 <= buf.len() && w1 <= buf.len(), "range out of bounds");
    assert!(r1 <= w0 || w1 <= r0 || read.1 == 0 || write.1 == 0, "ranges overlap");
    if read.1 == 0 {
        return (&[], &mut buf[w0..w1]);
    }
    if r1 <= w0 {
        let (a, b) = buf.split_at_mut(w0);
        (&a[r0..r1], &mut b[..w1 - w0])
    } else {
        let (a, b) = buf.split_at_mut(r0);
        (&b[..r1 - r0], &mut a[w0..w1])
    }
}
