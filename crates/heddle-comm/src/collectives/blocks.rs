//! How a v-variant lays out its per-rank blocks in one buffer (MPI's `counts` and
//! `displs`), for the blocking `*_blocks` calls and the non-blocking v-forms.

use super::nonblocking::Slot;
use crate::{Communicator, Error, Result};

/// How a v-variant lays out its per-rank blocks in one buffer: a count and a
/// displacement (both in elements) for each rank, as MPI's `counts`/`displs` arrays.
///
/// ```
/// use heddle_comm::Blocks;
/// let packed = Blocks::packed(&[2, 0, 3]);
/// assert_eq!(packed.displs(), [0, 2, 2]);
/// assert_eq!(packed.extent(), 5);
/// let spaced = Blocks::new(&[1, 1], &[4, 0]).unwrap();
/// assert_eq!(spaced.extent(), 5);
/// assert!(Blocks::new(&[2, 2], &[0, 1]).is_err()); // blocks 0 and 1 overlap
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocks {
    counts: Vec<usize>,
    displs: Vec<usize>,
}

impl Blocks {
    /// Blocks of `counts` elements, one after another from 0.
    pub fn packed(counts: &[usize]) -> Blocks {
        let mut at = 0;
        let displs = counts
            .iter()
            .map(|&c| {
                at += c;
                at - c
            })
            .collect();
        Blocks { counts: counts.to_vec(), displs }
    }

    /// Blocks of `counts` elements at `displs`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the two differ in length or two blocks overlap.
    pub fn new(counts: &[usize], displs: &[usize]) -> Result<Blocks> {
        if counts.len() != displs.len() {
            return Err(Error::InvalidArgument(format!(
                "{} counts but {} displacements: give one of each per rank",
                counts.len(),
                displs.len()
            )));
        }
        let mut spans: Vec<(usize, usize, usize)> = (0..counts.len())
            .filter(|&i| counts[i] > 0)
            .map(|i| (displs[i], counts[i], i))
            .collect();
        spans.sort_unstable();
        for w in spans.windows(2) {
            if w[0].0 + w[0].1 > w[1].0 {
                return Err(Error::InvalidArgument(format!(
                    "blocks {} (at {}, {} elements) and {} (at {}) overlap",
                    w[0].2, w[0].0, w[0].1, w[1].2, w[1].0
                )));
            }
        }
        Ok(Blocks { counts: counts.to_vec(), displs: displs.to_vec() })
    }

    /// `parts` blocks splitting `n` elements as evenly as possible (the first `n % parts`
    /// one longer).
    pub fn even(n: usize, parts: usize) -> Blocks {
        let counts: Vec<usize> =
            (0..parts).map(|i| n / parts + usize::from(i < n % parts)).collect();
        Blocks::packed(&counts)
    }

    /// The count of each rank's block.
    pub fn counts(&self) -> &[usize] {
        &self.counts
    }

    /// The displacement of each rank's block.
    pub fn displs(&self) -> &[usize] {
        &self.displs
    }

    /// The elements a buffer needs to hold every block.
    pub fn extent(&self) -> usize {
        self.counts.iter().zip(&self.displs).map(|(c, d)| c + d).max().unwrap_or(0)
    }

    pub(crate) fn slot(&self, buf: usize, i: usize) -> Slot {
        Slot::new(buf, self.displs[i], self.counts[i])
    }

    /// Fails unless there is a block per rank of `comm`.
    pub(crate) fn check(&self, comm: &Communicator, what: &str) -> Result<()> {
        if self.counts.len() == comm.size() {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{what} has {} blocks for a communicator of {} ranks",
            self.counts.len(),
            comm.size()
        )))
    }
}
