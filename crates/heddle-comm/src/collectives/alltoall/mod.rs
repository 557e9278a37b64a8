//! Alltoall(v): rank i's j-th piece goes to rank j's i-th place.

mod linear;
mod pairwise;

use super::{Algorithm, Step};
use crate::Result;

/// Byte (offset, len) of each piece in `send` and in `recv`, indexed by peer rank.
pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    send: &[u8],
    sd: &[(usize, usize)],
    recv: &mut [u8],
    rd: &[(usize, usize)],
) -> Result<()> {
    let r = s.rank;
    recv[rd[r].0..rd[r].0 + rd[r].1].copy_from_slice(&send[sd[r].0..sd[r].0 + sd[r].1]);
    match alg {
        Algorithm::Linear => linear::run(s, send, sd, recv, rd),
        _ => pairwise::run(s, send, sd, recv, rd),
    }
}
