//! Scatter–allgather broadcast (van de Geijn): the root's buffer is cut into p blocks,
//! scattered down a binomial tree (relative rank v ends with block v), then a ring
//! allgather reassembles it everywhere. Moves ~2n bytes per rank instead of n·log p;
//! best for large messages.
//!
//! Cost = (⌈log₂p⌉ + p − 1)·α + 2·((p − 1)/p)·n·β

use crate::collectives::{blocks, split_disjoint, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, buf: &mut [u8], root: usize, elem: usize) -> Result<()> {
    let p = s.size();
    let vr = (s.rank + p - root) % p;
    let b = blocks(buf.len() / elem, p, elem);
    let span = |lo: usize, hi: usize| -> (usize, usize) {
        let start = b[lo].0;
        let end = b[hi - 1].0 + b[hi - 1].1;
        (start, end - start)
    };
    let real = |v: usize| (v + root) % p;
    // Scatter: receive blocks [vr, vr + subtree) from the parent.
    let mut mask = 1;
    while mask < p {
        if vr & mask != 0 {
            let (off, len) = span(vr, (vr + mask).min(p));
            s.recv(real(vr - mask), Sink::Copy(&mut buf[off..off + len]))?;
            break;
        }
        mask <<= 1;
    }
    let mut sends = Vec::new();
    let mut m = mask >> 1;
    while m > 0 {
        let child = vr + m;
        if child < p {
            let (off, len) = span(child, (child + m).min(p));
            sends.push((real(child), &buf[off..off + len]));
        }
        m >>= 1;
    }
    if !sends.is_empty() {
        s.exchange(&sends, Vec::new())?;
    }
    // Ring allgather over relative ranks.
    let (right, left) = (real((vr + 1) % p), real((vr + p - 1) % p));
    for k in 0..p - 1 {
        let send_block = b[(vr + p - k) % p];
        let recv_block = b[(vr + 2 * p - k - 1) % p];
        let (out, inc) = split_disjoint(buf, send_block, recv_block);
        s.sendrecv(right, out, left, Sink::Copy(inc))?;
    }
    Ok(())
}
