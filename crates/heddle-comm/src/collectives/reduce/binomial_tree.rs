//! Binomial-tree reduce: relative rank v folds in the partial results of `v + 2^j` for
//! each `2^j` below its lowest set bit, then sends its partial result to its parent.
//! Requires a commutative operator (all Heddle operators are).
//!
//! Cost = ⌈log₂p⌉·(α + n·β + n·γ)

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

/// `recv` is used only at the root (it must be as long as `send` there).
pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    recv: &mut [u8],
    root: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let p = s.size();
    let vr = (s.rank + p - root) % p;
    let mut scratch = Vec::new();
    let acc: &mut [u8] = if vr == 0 {
        recv.copy_from_slice(send);
        recv
    } else {
        scratch.extend_from_slice(send);
        &mut scratch
    };
    let mut mask = 1;
    while mask < p {
        if vr & mask == 0 {
            let child = vr | mask;
            if child < p {
                s.recv((child + root) % p, Sink::Reduce(acc, f))?;
            }
        } else {
            return s.send(((vr & !mask) + root) % p, acc);
        }
        mask <<= 1;
    }
    Ok(())
}
