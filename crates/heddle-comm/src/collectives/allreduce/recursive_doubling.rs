//! Recursive-doubling allreduce: in round k each rank swaps its whole buffer with the
//! rank whose index differs in bit k and folds it in. Non-powers of two fold the extra
//! ranks in first and out last. Fewest rounds; best for small messages.
//!
//! Cost = ⌈log₂p⌉·(α + n·β + n·γ)  (+ 2 steps when p is not a power of two)

use super::{fold_in, fold_out, pof2, unfold_rank};
use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, buf: &mut [u8], f: &dyn Fn(&mut [u8], &[u8])) -> Result<()> {
    let p = s.size();
    if let Some(v) = fold_in(s, buf, f)? {
        let mut tmp = s.scratch(buf.len());
        let mut mask = 1;
        while mask < pof2(p) {
            let partner = unfold_rank(p, v ^ mask);
            s.sendrecv(partner, buf, partner, Sink::Copy(&mut tmp))?;
            f(buf, &tmp);
            mask <<= 1;
        }
        s.return_scratch(tmp);
    }
    fold_out(s, buf)
}
