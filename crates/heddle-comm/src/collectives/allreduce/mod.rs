//! Allreduce: every rank ends with the elementwise combination of all ranks' buffers.

mod rabenseifner;
mod recursive_doubling;
mod reduce_broadcast;
mod ring;

use super::{Algorithm, Step};
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    buf: &mut [u8],
    elem: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    match alg {
        Algorithm::RecursiveDoubling => recursive_doubling::run(s, buf, f),
        Algorithm::Ring => ring::run(s, buf, elem, f),
        Algorithm::Rabenseifner => rabenseifner::run(s, buf, elem, f),
        Algorithm::Hierarchical => super::hierarchical::allreduce(s, buf, elem, f),
        Algorithm::TwoLevel => super::hierarchical::allreduce_two_level(s, buf, elem, f),
        _ => reduce_broadcast::run(s, buf, f),
    }
}

/// Folding for non-powers of two shared by recursive doubling and Rabenseifner: of the
/// first `2·rem` ranks (rem = p − 2^⌊log₂p⌋) each even rank hands its buffer to the next
/// odd rank and sits out. Returns this rank's index among the 2^k remaining ranks.
pub(super) fn fold_in(
    s: &mut Step<'_>,
    buf: &mut [u8],
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<Option<usize>> {
    let (p, r) = (s.size(), s.rank);
    let rem = p - pof2(p);
    if r < 2 * rem {
        if r % 2 == 0 {
            s.send(r + 1, buf)?;
            Ok(None)
        } else {
            s.recv(r - 1, crate::engine::Sink::Reduce(buf, f))?;
            Ok(Some(r / 2))
        }
    } else {
        Ok(Some(r - rem))
    }
}

/// Undoes [`fold_in`]: odd ranks return the result to the even rank that sat out.
pub(super) fn fold_out(s: &mut Step<'_>, buf: &mut [u8]) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let rem = p - pof2(p);
    if r < 2 * rem {
        if r % 2 == 1 {
            s.send(r - 1, buf)?;
        } else {
            s.recv(r + 1, crate::engine::Sink::Copy(buf))?;
        }
    }
    Ok(())
}

/// The communicator rank of folded index `v`.
pub(super) fn unfold_rank(p: usize, v: usize) -> usize {
    let rem = p - pof2(p);
    if v < rem {
        2 * v + 1
    } else {
        v + rem
    }
}

/// Largest power of two not above `p`.
pub(super) fn pof2(p: usize) -> usize {
    1 << (usize::BITS - 1 - p.leading_zeros())
}
