//! Bruck allgather: blocks are kept rotated so this rank's own block comes first; in
//! round k a rank sends its first min(2^k, p − 2^k) blocks to rank r − 2^k and appends
//! as many from rank r + 2^k. A final rotation puts blocks in rank order. ⌈log₂p⌉
//! rounds for any p; best for small messages. Equal counts only.
//!
//! Cost = ⌈log₂p⌉·α + ((p − 1)/p)·n·β + one local rotation

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, send: &[u8], recv: &mut [u8]) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let c = send.len();
    let mut tmp = s.scratch(p * c);
    tmp[..c].copy_from_slice(send);
    let mut k = 1;
    while k < p {
        let n = k.min(p - k);
        let (have, rest) = tmp.split_at_mut(k * c);
        s.sendrecv((r + p - k) % p, &have[..n * c], (r + k) % p, Sink::Copy(&mut rest[..n * c]))?;
        k *= 2;
    }
    for i in 0..p {
        let dst = (r + i) % p;
        recv[dst * c..(dst + 1) * c].copy_from_slice(&tmp[i * c..(i + 1) * c]);
    }
    s.return_scratch(tmp);
    Ok(())
}
