//! Prefix reductions: inclusive (`MPI_Scan`) and exclusive (`MPI_Exscan`), by recursive
//! doubling, for any number of ranks.
//!
//! In round k each rank swaps the reduction of its block of 2^k ranks (`partial`) with
//! the rank whose index differs in bit k, when that rank exists. What comes from a lower
//! block is folded in on the left of both `partial` and the prefix, what comes from a
//! higher one on the right of `partial` only: rank r ends with x₀ ⊕ x₁ ⊕ … ⊕ x_r, the
//! operands in rank order, so the operator need only be associative.
//!
//! Cost = ⌈log₂p⌉·(α + n·β + 2n·γ)

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

/// Replaces `buf` by the reduction of every rank's `buf` up to this one (`exclusive`:
/// before this one; rank 0's `buf` is then left as it was).
pub(crate) fn run(
    s: &mut Step<'_>,
    buf: &mut [u8],
    exclusive: bool,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let (p, me) = (s.size(), s.rank);
    let mut partial = buf.to_vec();
    let mut incoming = vec![0u8; buf.len()];
    let mut left = vec![0u8; buf.len()];
    // Whether `buf` holds a prefix yet (an exclusive scan starts with none).
    let mut have = !exclusive;
    let mut mask = 1;
    while mask < p {
        let partner = me ^ mask;
        if partner < p {
            s.sendrecv(partner, &partial, partner, Sink::Copy(&mut incoming))?;
            if partner < me {
                // incoming ⊕ buf: the lower block's reduction comes first.
                if have {
                    left.copy_from_slice(&incoming);
                    f(&mut left, buf);
                    buf.copy_from_slice(&left);
                } else {
                    buf.copy_from_slice(&incoming);
                    have = true;
                }
                f(&mut incoming, &partial);
                std::mem::swap(&mut partial, &mut incoming);
            } else {
                f(&mut partial, &incoming);
            }
        }
        mask <<= 1;
    }
    Ok(())
}
