//! Binomial-tree broadcast: relative rank `v = (r − root) mod p` receives the whole
//! buffer from `v` minus its lowest set bit, then forwards it to `v + 2^j` for every
//! `2^j` below that bit. Depth ⌈log₂p⌉; best for small messages.
//!
//! Cost = ⌈log₂p⌉·(α + n·β)

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, buf: &mut [u8], root: usize) -> Result<()> {
    let p = s.size();
    let vr = (s.rank + p - root) % p;
    let mut mask = 1;
    while mask < p {
        if vr & mask != 0 {
            s.recv((vr - mask + root) % p, Sink::Copy(buf))?;
            break;
        }
        mask <<= 1;
    }
    let mut children = Vec::new();
    let mut m = mask >> 1;
    while m > 0 {
        if vr + m < p {
            children.push(((vr + m + root) % p, &*buf));
        }
        m >>= 1;
    }
    if children.is_empty() {
        return Ok(());
    }
    s.exchange(&children, Vec::new())
}
