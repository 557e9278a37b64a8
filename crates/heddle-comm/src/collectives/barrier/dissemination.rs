//! Dissemination barrier (Hensgen, Finkel, Manber): in round k every rank signals rank
//! `r + 2^k` and waits for rank `r − 2^k`; after ⌈log₂p⌉ rounds each rank has heard,
//! directly or transitively, from all others. Works for any p.
//!
//! Cost = ⌈log₂p⌉·α

use crate::collectives::Step;
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let mut k = 1;
    while k < p {
        let mut nothing = [0u8; 0];
        s.sendrecv((r + k) % p, &[], (r + p - k) % p, Sink::Copy(&mut nothing))?;
        k <<= 1;
    }
    Ok(())
}
