//! Broadcast: the root's buffer is copied to every rank.

pub(crate) mod binomial_tree;
mod scatter_allgather;
pub(crate) mod shm_channel;

use super::{Algorithm, Step};
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    buf: &mut [u8],
    root: usize,
    elem: usize,
) -> Result<()> {
    match alg {
        Algorithm::ScatterAllgather => scatter_allgather::run(s, buf, root, elem),
        Algorithm::Hierarchical => super::hierarchical::broadcast(s, buf, root, elem),
        Algorithm::ShmChannel => shm_channel::run(s, buf, root),
        _ => binomial_tree::run(s, buf, root),
    }
}
