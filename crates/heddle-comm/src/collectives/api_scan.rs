//! Typed prefix reductions on [`Communicator`]: scan and exscan.

use super::{scan, CallOptions, Collective};
use crate::stamp::Signature;
use crate::{Communicator, Element, Op, Result};

impl Communicator {
    /// Inclusive prefix reduction (`MPI_Scan`): rank r's `buf` becomes the elementwise
    /// reduction with `op` of the `buf`s of ranks 0 to r, combined in rank order (so `op`
    /// need only be associative).
    ///
    /// # Errors
    /// [`Error::CollectiveMismatch`](crate::Error::CollectiveMismatch) when ranks pass
    /// different lengths, types or operators; [`Error::PeerLost`](crate::Error::PeerLost),
    /// [`Error::Timeout`](crate::Error::Timeout) or [`Error::Aborted`](crate::Error::Aborted)
    /// as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u64;
    ///             let mut x = [r + 1, 10];
    ///             c.scan(&mut x, Op::Sum).unwrap();
    ///             assert_eq!(x, [(r + 1) * (r + 2) / 2, 10 * (r + 1)]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scan<T: Element>(&self, buf: &mut [T], op: Op<T>) -> Result<()> {
        self.scan_with(buf, op, CallOptions::default())
    }

    /// [`Communicator::scan`] with options (a timeout).
    ///
    /// # Errors
    /// As [`Communicator::scan`].
    pub fn scan_with<T: Element>(&self, buf: &mut [T], op: Op<T>, opts: CallOptions) -> Result<()> {
        self.prefix(Collective::Scan, buf, op, opts)
    }

    /// Exclusive prefix reduction (`MPI_Exscan`): rank r's `buf` becomes the reduction of
    /// the `buf`s of ranks 0 to r − 1, in rank order. Rank 0 has no ranks before it: its
    /// `buf` is left as it was (MPI leaves it undefined).
    ///
    /// # Errors
    /// As [`Communicator::scan`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             // Where each rank's 5 records start in a file of all of them.
    ///             let mut offset = [5u64];
    ///             c.exscan(&mut offset, Op::Sum).unwrap();
    ///             let want = if c.rank() == 0 { 5 } else { 5 * c.rank() as u64 };
    ///             assert_eq!(offset, [want]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn exscan<T: Element>(&self, buf: &mut [T], op: Op<T>) -> Result<()> {
        self.exscan_with(buf, op, CallOptions::default())
    }

    /// [`Communicator::exscan`] with options (a timeout).
    ///
    /// # Errors
    /// As [`Communicator::scan`].
    pub fn exscan_with<T: Element>(
        &self,
        buf: &mut [T],
        op: Op<T>,
        opts: CallOptions,
    ) -> Result<()> {
        self.prefix(Collective::Exscan, buf, op, opts)
    }

    fn prefix<T: Element>(
        &self,
        c: Collective,
        buf: &mut [T],
        op: Op<T>,
        opts: CallOptions,
    ) -> Result<()> {
        if self.size() == 1 || buf.is_empty() {
            return Ok(());
        }
        let sig = Signature::new(c, T::DTYPE, Some(buf.len()), op.code());
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let (_, mut s) = self.begin(sig, opts, bytes.len(), true);
        let commutative = !matches!(op, Op::Custom(_));
        let f = move |acc: &mut [u8], inc: &[u8]| op.apply_bytes(acc, inc);
        scan::run(&mut s, bytes, c == Collective::Exscan, commutative, &f)
    }
}
