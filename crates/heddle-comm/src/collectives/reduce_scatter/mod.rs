//! Reduce-scatter: the elementwise combination of all buffers, cut into per-rank blocks;
//! rank i keeps block i.

mod reduce_broadcast;
mod ring;

use super::{Algorithm, Step};
use crate::Result;

/// `counts[i]` is block i's byte count; `send.len()` is their sum.
pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    match alg {
        Algorithm::Ring => ring::run(s, send, recv, counts, f),
        // ReduceBroadcast, and the fallback for anything else forced.
        _ => reduce_broadcast::run(s, send, recv, counts, f),
    }
}
