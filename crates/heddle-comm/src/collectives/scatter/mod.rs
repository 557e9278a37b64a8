//! Scatter(v): the root's buffer is cut into per-rank pieces, piece i going to rank i.

mod linear;

use super::{Algorithm, Step};
use crate::Result;

/// `counts[i]` is rank i's byte count (used at the root).
pub(crate) fn run(
    s: &mut Step<'_>,
    _alg: Algorithm,
    send: &[u8],
    counts: &[usize],
    recv: &mut [u8],
    root: usize,
) -> Result<()> {
    linear::run(s, send, counts, recv, root)
}
