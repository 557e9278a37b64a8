//! Linear alltoall: all p − 1 sends and receives are posted at once and progressed
//! together. One round of latency; can congest when p is large.
//!
//! Cost = α + ((p − 1)/p)·n·β  (when links do not contend)

use crate::collectives::{carve, Step};
use crate::engine::Sink;
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    send: &[u8],
    sd: &[(usize, usize)],
    recv: &mut [u8],
    rd: &[(usize, usize)],
) -> Result<()> {
    let (p, r) = (s.size(), s.rank);
    let sends: Vec<(usize, &[u8])> =
        (1..p).map(|k| (r + k) % p).map(|to| (to, &send[sd[to].0..sd[to].0 + sd[to].1])).collect();
    let mut parts: Vec<Option<&mut [u8]>> = carve(recv, rd).into_iter().map(Some).collect();
    let recvs = (1..p)
        .map(|k| (r + p - k) % p)
        .map(|from| (from, Sink::Copy(parts[from].take().unwrap_or_default())))
        .collect();
    s.exchange(&sends, recvs)
}
