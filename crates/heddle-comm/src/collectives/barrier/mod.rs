//! Barrier: no rank leaves before every rank has entered.

mod dissemination;

use super::{Algorithm, Step};
use crate::Result;

pub(crate) fn run(s: &mut Step<'_>, _alg: Algorithm) -> Result<()> {
    dissemination::run(s)
}
