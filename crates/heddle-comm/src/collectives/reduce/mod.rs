//! Reduce: elementwise combination of every rank's buffer, delivered at the root.

pub(crate) mod binomial_tree;

use super::{Algorithm, Step};
use crate::Result;

pub(crate) fn run(
    s: &mut Step<'_>,
    alg: Algorithm,
    send: &[u8],
    recv: &mut [u8],
    root: usize,
    f: &dyn Fn(&mut [u8], &[u8]),
) -> Result<()> {
    match alg {
        Algorithm::Hierarchical => super::hierarchical::reduce(s, send, recv, root, f),
        _ => binomial_tree::run(s, send, recv, root, f),
    }
}
