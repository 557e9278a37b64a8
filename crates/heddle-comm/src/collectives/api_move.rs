//! Typed broadcast on [`Communicator`], and the argument checks the typed data-movement
//! collectives share (`api_gather.rs`: gather(v), scatter(v); `api_all.rs`: allgather(v),
//! alltoall(v)).

use super::{broadcast, CallOptions, Collective};
use crate::stamp::Signature;
use crate::{Communicator, Element, Error, Result};

pub(super) fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

/// Element counts as byte counts.
pub(super) fn bytes_of<T>(counts: &[usize]) -> Vec<usize> {
    counts.iter().map(|c| c * std::mem::size_of::<T>()).collect()
}

impl Communicator {
    pub(super) fn check_root(&self, root: usize) -> Result<()> {
        if root < self.size() {
            Ok(())
        } else {
            Err(invalid(format!(
                "root {root} is outside this communicator of {} ranks",
                self.size()
            )))
        }
    }

    /// Checks `counts` has one entry per rank, that this rank's entry is `own`, and (when
    /// given) that they sum to `total`.
    pub(super) fn check_counts(
        &self,
        what: &str,
        counts: &[usize],
        own: usize,
        total: Option<usize>,
    ) -> Result<()> {
        if counts.len() != self.size() {
            return Err(invalid(format!(
                "{what}: {} counts for {} ranks",
                counts.len(),
                self.size()
            )));
        }
        if counts[self.rank()] != own {
            return Err(invalid(format!(
                "{what}: this rank's count is {} but its buffer holds {own}",
                counts[self.rank()]
            )));
        }
        if let Some(t) = total {
            let sum: usize = counts.iter().sum();
            if sum != t {
                return Err(invalid(format!(
                    "{what}: counts sum to {sum} but the buffer holds {t}"
                )));
            }
        }
        Ok(())
    }

    /// Copies `buf` at `root` into `buf` at every rank (all ranks pass equal lengths).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root; [`Error::CollectiveMismatch`],
    /// [`Error::PeerLost`], [`Error::Timeout`] or [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut buf = if c.rank() == 1 { [7u32, 8, 9] } else { [0; 3] };
    ///             c.broadcast(&mut buf, 1).unwrap();
    ///             assert_eq!(buf, [7, 8, 9]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn broadcast<T: Element>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.broadcast_with(buf, root, CallOptions::default())
    }

    /// [`Communicator::broadcast`] with options.
    ///
    /// # Errors
    /// As [`Communicator::broadcast`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::ScatterAllgather);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut buf = [0.0f64; 8];
    ///             if c.rank() == 0 {
    ///                 buf.iter_mut().enumerate().for_each(|(i, x)| *x = i as f64 / 2.0);
    ///             }
    ///             c.broadcast_with(&mut buf, 0, opts).unwrap();
    ///             assert_eq!(buf, [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn broadcast_with<T: Element>(
        &self,
        buf: &mut [T],
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.size() == 1 || buf.is_empty() {
            return Ok(());
        }
        let sig = Signature::new(Collective::Broadcast, T::DTYPE, Some(buf.len()), 0);
        let b: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let (alg, mut s) = self.begin(sig, opts, b.len(), true);
        broadcast::run(&mut s, alg, b, root, std::mem::size_of::<T>())
    }
}
