//! Allgather(v): every rank ends with all ranks' buffers in rank order.

mod bruck;
mod recursive_doubling;
mod ring;

use super::{Algorithm, Step};
use crate::Result;

/// `counts[i]` is rank i's byte count; `send.len() == counts[rank]`.
pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
) -> Result<()> {
    match alg {
        Algorithm::RecursiveDoubling => recursive_doubling::run(s, send, recv),
        Algorithm::Bruck => bruck::run(s, send, recv),
        Algorithm::Hierarchical => super::hierarchical::allgather(s, send, recv, counts),
        _ => ring::run(s, send, recv, counts),
    }
}
