//! Reduce to rank 0 along a binomial tree, then broadcast along one. Always applies;
//! the fallback when a forced algorithm cannot run.
//!
//! Cost = 2⌈log₂p⌉·(α + n·β) + ⌈log₂p⌉·n·γ

use crate::collectives::{broadcast, reduce, Step};
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, buf: &mut [u8], f: &dyn Fn(&mut [u8], &[u8])) -> Result<()> {
    let mut send = s.scratch(0);
    send.extend_from_slice(buf);
    reduce::binomial_tree::run(s, &send, buf, 0, f)?;
    s.return_scratch(send);
    broadcast::binomial_tree::run(s, buf, 0)
}
