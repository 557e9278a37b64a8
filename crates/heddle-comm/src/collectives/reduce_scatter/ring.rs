//! Ring reduce-scatter: p − 1 steps; in step k rank r folds block r − k − 2 arriving
//! from its left neighbour while passing block r − k − 1 to its right, so that block r
//! is finished at rank r. The first half of ring allreduce.
//!
//! Cost = (p − 1)·α + ((p − 1)/p)·n·(β + γ)

use crate::collectives::{displacements, split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    counts: &[usize],
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let d = displacements(counts);
    let mut acc = s.scratch(0);
    acc.extend_from_slice(send);
    let (right, left) = ((r + 1) % p, (r + p - 1) % p);
    for k in 0..p - 1 {
        let (out, inc) =
            split_disjoint(&mut acc, d[(r + 2 * p - k - 1) % p], d[(r + 2 * p - k - 2) % p]);
        s.sendrecv(right, out, left, Sink::Reduce(inc, f))?;
    }
    recv.copy_from_slice(&acc[d[r].0..d[r].0 + d[r].1]);
    s.return_scratch(acc);
    Ok(())
}
