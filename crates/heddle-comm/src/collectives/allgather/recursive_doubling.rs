//! Recursive-doubling allgather: in round k ranks differing in bit k swap the aligned
//! group of 2^k blocks each holds, doubling it. Powers of two and equal counts only.
//!
//! Cost = log₂p·α + ((p − 1)/p)·n·β

use crate::collectives::{split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, send: &[u8], recv: &mut [u8]) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let c = send.len();
    recv[r * c..(r + 1) * c].copy_from_slice(send);
    let mut d = 1;
    while d < p {
        let partner = r ^ d;
        let mine = (r & !(d - 1)) * c;
        let theirs = (partner & !(d - 1)) * c;
        let (out, inc) = split_disjoint(recv, (mine, d * c), (theirs, d * c));
        s.sendrecv(partner, out, partner, Sink::Copy(inc))?;
        d *= 2;
    }
    Ok(())
}
