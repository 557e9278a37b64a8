//! Linear gather: every rank sends to the root, which posts all p − 1 receives at once
//! into their final places (no staging copy).
//!
//! Cost = (p − 1)·α + ((p − 1)/p)·n·β at the root

use crate::collectives::{carve, displacements, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
    root: usize,
) -> Result<()> {
    if s.rank != root {
        return s.send(root, send);
    }
    let d = displacements(counts);
    let mut parts = carve(recv, &d);
    parts[root].copy_from_slice(send);
    let recvs = parts
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i != root)
        .map(|(i, part)| (i, Sink::Copy(part)))
        .collect();
    s.exchange(&[], recvs)
}
