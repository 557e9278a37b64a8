//! Pairwise-exchange alltoall: in step k (1 ≤ k < p) rank r sends its piece for r + k
//! and receives the piece from r − k. One partner per step keeps links uncontended.
//!
//! Cost = (p − 1)·α + ((p − 1)/p)·n·β

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    sd: &[(usize, usize)],
    recv: &mut [u8],
    rd: &[(usize, usize)],
) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    for k in 1..p {
        let (to, from) = ((r + k) % p, (r + p - k) % p);
        let out = &send[sd[to].0..sd[to].0 + sd[to].1];
        let inc = &mut recv[rd[from].0..rd[from].0 + rd[from].1];
        s.sendrecv(to, out, from, Sink::Copy(inc))?;
    }
    Ok(())
}
