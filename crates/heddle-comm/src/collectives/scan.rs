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
/// before this one; rank 0's `buf` is then left as it was). A `commutative` operator
/// folds what comes from below on the right, saving a copy of the buffer per round.
pub(crate) fn run(
    s: &mut Step<'_>,
    buf: &mut [u8],
    exclusive: bool,
    commutative: bool,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    let (p, me) = (s.size(), s.rank);
    let mut partial = s.scratch(0);
    partial.extend_from_slice(buf);
    let mut incoming = s.scratch(buf.len());
    let mut left = Vec::new();
    // Whether `buf` holds a prefix yet (an exclusive scan starts with none).
    let mut have = !exclusive;
    let mut mask = 1;
    while mask < p {
        let partner = me ^ mask;
        let last = mask << 1 >= p;
        if partner < p {
            s.sendrecv(partner, &partial, partner, Sink::Copy(&mut incoming))?;
            if partner < me {
                // incoming ⊕ buf: the lower block's reduction comes first.
                if !have {
                    buf.copy_from_slice(&incoming);
                    have = true;
                } else if commutative {
                    f(buf, &incoming);
                } else {
                    left.clear();
                    left.extend_from_slice(&incoming);
                    f(&mut left, buf);
                    buf.copy_from_slice(&left);
                }
                if !last {
                    f(&mut incoming, &partial);
                    std::mem::swap(&mut partial, &mut incoming);
                }
            } else if !last {
                f(&mut partial, &incoming);
            }
        }
        mask <<= 1;
    }
    s.return_scratch(partial);
    s.return_scratch(incoming);
    Ok(())
}
