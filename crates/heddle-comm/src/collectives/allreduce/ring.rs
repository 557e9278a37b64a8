//! Ring allreduce: a reduce-scatter around the ring (p − 1 steps, each rank folds in one
//! block from its left neighbour while passing another to its right) leaves rank r with
//! the finished block r + 1; an allgather around the ring (p − 1 steps) spreads the
//! finished blocks. Bandwidth-optimal; best for large messages.
//!
//! Cost = 2(p − 1)·α + 2·((p − 1)/p)·n·β + ((p − 1)/p)·n·γ

use crate::collectives::{blocks, split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    buf: &mut [u8],
    elem: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let b = blocks(buf.len() / elem, p, elem);
    let (right, left) = ((r + 1) % p, (r + p - 1) % p);
    for k in 0..p - 1 {
        let (out, inc) = split_disjoint(buf, b[(r + p - k) % p], b[(r + 2 * p - k - 1) % p]);
        s.sendrecv(right, out, left, Sink::Reduce(inc, f))?;
    }
    for k in 0..p - 1 {
        let (out, inc) = split_disjoint(buf, b[(r + 1 + p - k) % p], b[(r + p - k) % p]);
        s.sendrecv(right, out, left, Sink::Copy(inc))?;
    }
    Ok(())
}
