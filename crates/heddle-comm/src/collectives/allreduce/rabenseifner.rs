//! Rabenseifner allreduce: a reduce-scatter by recursive halving (partners at distance
//! p/2, p/4, …, 1 swap the halves they do not keep) leaves folded rank v with the
//! finished block v; an allgather by recursive doubling (distance 1, 2, …) reassembles
//! the buffer. Non-powers of two fold in first and out last. Log rounds and ~2n bytes
//! per rank: good for medium and large messages.
//!
//! Cost = 2⌈log₂p⌉·α + 2·((p − 1)/p)·n·β + ((p − 1)/p)·n·γ

use super::{fold_in, fold_out, pof2, unfold_rank};
use crate::collectives::{blocks, split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    buf: &mut [u8],
    elem: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let p = s.size();
    let Some(v) = fold_in(s, buf, f)? else {
        return fold_out(s, buf);
    };
    let q = pof2(p);
    let b = blocks(buf.len() / elem, q, elem);
    let span = |lo: usize, hi: usize| (b[lo].0, b[hi - 1].0 + b[hi - 1].1 - b[lo].0);
    // Recursive halving: keep the half of [lo, hi) that contains block v.
    let (mut lo, mut hi) = (0, q);
    let mut d = q / 2;
    while d >= 1 {
        let partner = unfold_rank(p, v ^ d);
        let mid = (lo + hi) / 2;
        let (keep, give) = if v & d == 0 { ((lo, mid), (mid, hi)) } else { ((mid, hi), (lo, mid)) };
        let (out, inc) = split_disjoint(buf, span(give.0, give.1), span(keep.0, keep.1));
        s.sendrecv(partner, out, partner, Sink::Reduce(inc, f))?;
        (lo, hi) = keep;
        d /= 2;
    }
    // Recursive doubling: swap aligned groups of d blocks.
    let mut d = 1;
    while d < q {
        let partner = unfold_rank(p, v ^ d);
        let mine = v & !(d - 1);
        let theirs = (v ^ d) & !(d - 1);
        let (out, inc) = split_disjoint(buf, span(mine, mine + d), span(theirs, theirs + d));
        s.sendrecv(partner, out, partner, Sink::Copy(inc))?;
        d *= 2;
    }
    fold_out(s, buf)
}
