//! Linear scatter: the root sends every piece directly, all at once (the engine
//! interleaves them across peers).
//!
//! Cost = (p − 1)·α + ((p − 1)/p)·n·β at the root

use crate::collectives::{displacements, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    counts: &[usize],
    recv: &mut [u8],
    root: usize,
) -> Result<()> {
    if s.rank != root {
        return s.recv(root, Sink::Copy(recv));
    }
    let d = displacements(counts);
    let (off, len) = d[root];
    recv[..len].copy_from_slice(&send[off..off + len]);
    let sends: Vec<(usize, &[u8])> = d
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != root)
        .map(|(i, &(o, l))| (i, &send[o..o + l]))
        .collect();
    s.exchange(&sends, Vec::new())
}
