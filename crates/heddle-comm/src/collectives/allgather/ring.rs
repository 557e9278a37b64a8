//! Ring allgather(v): in step k rank r passes block r − k to its right neighbour and
//! receives block r − k − 1 from its left, straight into place. Any p, any counts.
//!
//! Cost = (p − 1)·α + ((p − 1)/p)·n·β   (n = total bytes gathered)

use crate::collectives::{displacements, split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, send: &[u8], recv: &mut [u8], counts: &[usize]) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let d = displacements(counts);
    recv[d[r].0..d[r].0 + d[r].1].copy_from_slice(send);
    let (right, left) = ((r + 1) % p, (r + p - 1) % p);
    for k in 0..p - 1 {
        let (out, inc) = split_disjoint(recv, d[(r + p - k) % p], d[(r + 2 * p - k - 1) % p]);
        s.sendrecv(right, out, left, Sink::Copy(inc))?;
    }
    Ok(())
}
