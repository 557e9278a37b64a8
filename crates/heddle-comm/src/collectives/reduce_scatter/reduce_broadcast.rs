//! `reduce_broadcast` for reduce-scatter: reduce to rank 0 along a binomial tree, then
//! scatter the blocks linearly (the distribution step of this algorithm is a scatter, as
//! every rank keeps only its block). Always applies; the fallback for a forced algorithm
//! that cannot run.
//!
//! Cost = ⌈log₂p⌉·(α + n·β + n·γ) + (p − 1)·α + ((p − 1)/p)·n·β

use crate::collectives::{reduce, scatter, Algorithm, Step};
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let mut full = if s.rank == 0 { vec![0u8; send.len()] } else { Vec::new() };
    reduce::binomial_tree::run(s, send, &mut full, 0, f)?;
    scatter::run(s, Algorithm::Linear, &full, counts, recv, 0)
}
