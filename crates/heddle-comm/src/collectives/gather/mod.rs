//! Gather(v): every rank's buffer lands, in rank order, in the root's buffer.

mod linear;

use super::{Algorithm, Step};
use crate::Result;

/// `counts[i]` is rank i's byte count (used at the root).
pub(crate) fn run(
    s: &mut Step<'_>,
    _alg: Algorithm,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
    root: usize,
) -> Result<()> {
    linear::run(s, send, recv, counts, root)
}
