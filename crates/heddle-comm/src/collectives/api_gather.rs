//! Typed rooted data movement on [`Communicator`]: gather(v) and scatter(v).

use super::api_move::bytes_of;
use super::{gather, scatter, CallOptions, Collective};
use crate::stamp::Signature;
use crate::{Communicator, Element, Result};

#[cfg(doc)]
use crate::Error;

impl Communicator {
    /// Gathers every rank's `send` (equal lengths) into `recv` at `root`, in rank order
    /// (`recv` holds `size() * send.len()` there and is ignored, and may be empty,
    /// elsewhere).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or buffer size; [`Error::CollectiveMismatch`],
    /// [`Error::PeerLost`], [`Error::Timeout`] or [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u32;
    ///             let mut all = vec![0u32; if r == 0 { 6 } else { 0 }];
    ///             c.gather(&[r, 10 * r], &mut all, 0).unwrap();
    ///             if r == 0 {
    ///                 assert_eq!(all, [0, 0, 1, 10, 2, 20]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gather<T: Element>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.gather_with(send, recv, root, CallOptions::default())
    }

    /// [`Communicator::gather`] with options.
    ///
    /// # Errors
    /// As [`Communicator::gather`].
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use heddle_comm::{local_world, CallOptions, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().timeout(Duration::from_secs(30));
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut all = [0i64; 3];
    ///             c.gather_with(&[-(c.rank() as i64)], &mut all, 2, opts).unwrap();
    ///             assert_eq!(all, if c.rank() == 2 { [0, -1, -2] } else { [0; 3] });
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gather_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        let counts = vec![send.len(); self.size()];
        self.gather_counted(send, recv, &counts, root, Some(send.len()), opts)
    }

    /// Gathers rank i's `counts[i]` elements into `recv` at `root`, concatenated in rank order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or counts that do not match the buffers; as
    /// [`Communicator::gather`] otherwise.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank();
    ///             let mut all = vec![0u8; if r == 0 { 6 } else { 0 }];
    ///             c.gatherv(&vec![r as u8; r + 1], &mut all, &[1, 2, 3], 0).unwrap();
    ///             if r == 0 {
    ///                 assert_eq!(all, [0, 1, 1, 2, 2, 2]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        root: usize,
    ) -> Result<()> {
        self.gatherv_with(send, recv, counts, root, CallOptions::default())
    }

    /// [`Communicator::gatherv`] with options.
    ///
    /// # Errors
    /// As [`Communicator::gatherv`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Linear);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mine: &[f32] = [&[1.0, 2.0][..], &[], &[3.0]][c.rank()];
    ///             let mut all = [0.0f32; 3];
    ///             c.gatherv_with(mine, &mut all, &[2, 0, 1], 1, opts).unwrap();
    ///             assert_eq!(all, if c.rank() == 1 { [1.0, 2.0, 3.0] } else { [0.0; 3] });
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gatherv_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        self.gather_counted(send, recv, counts, root, None, opts)
    }

    /// Gathers; `each` is the count every rank passes, if they must agree.
    fn gather_counted<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        root: usize,
        each: Option<usize>,
        opts: CallOptions,
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_counts(
            "gatherv",
            counts,
            send.len(),
            (self.rank() == root).then_some(recv.len()),
        )?;
        if self.size() == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let (alg, mut s) = self.begin(
            Signature::new(Collective::Gather, T::DTYPE, each, 0),
            opts,
            std::mem::size_of_val(send),
            true,
        );
        gather::run(
            &mut s,
            alg,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
            &bytes_of::<T>(counts),
            root,
        )
    }

    /// Scatters `send` at `root` (`size() * recv.len()` elements) so rank i receives block i
    /// (`send` is ignored, and may be empty, elsewhere).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or buffer size; [`Error::CollectiveMismatch`],
    /// [`Error::PeerLost`], [`Error::Timeout`] or [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let all: Vec<u16> = if c.rank() == 0 { (0..6).collect() } else { vec![] };
    ///             let mut mine = [0u16; 2];
    ///             c.scatter(&all, &mut mine, 0).unwrap();
    ///             let r = c.rank() as u16;
    ///             assert_eq!(mine, [2 * r, 2 * r + 1]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatter<T: Element>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.scatter_with(send, recv, root, CallOptions::default())
    }

    /// [`Communicator::scatter`] with options.
    ///
    /// # Errors
    /// As [`Communicator::scatter`].
    ///
    /// # Examples
    /// ```
    /// use std::time::Duration;
    /// use heddle_comm::{local_world, CallOptions, CommConfig};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().timeout(Duration::from_secs(30));
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let all = [40i32, 30, 20, 10];
    ///             let mut mine = [0i32];
    ///             c.scatter_with(&all, &mut mine, 3, opts).unwrap();
    ///             assert_eq!(mine[0], 40 - 10 * c.rank() as i32);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatter_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        let counts = vec![recv.len(); self.size()];
        self.scatter_counted(send, &counts, recv, root, Some(recv.len()), opts)
    }

    /// Scatters `send` at `root` so rank i receives `counts[i]` elements.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or counts that do not match the buffers; as
    /// [`Communicator::scatter`] otherwise.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let all = [0u64, 1, 1, 2, 2, 2];
    ///             let mut mine = vec![0u64; c.rank() + 1];
    ///             c.scatterv(&all, &[1, 2, 3], &mut mine, 0).unwrap();
    ///             assert_eq!(mine, vec![c.rank() as u64; c.rank() + 1]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatterv<T: Element>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        self.scatterv_with(send, counts, recv, root, CallOptions::default())
    }

    /// [`Communicator::scatterv`] with options.
    ///
    /// # Errors
    /// As [`Communicator::scatterv`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Linear);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut mine = vec![0.0f64; 3 - c.rank()];
    ///             c.scatterv_with(&[1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2], &mut mine, 1, opts)
    ///                 .unwrap();
    ///             assert_eq!(mine, [[1.0, 2.0, 3.0].as_slice(), &[4.0, 5.0]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatterv_with<T: Element>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        self.scatter_counted(send, counts, recv, root, None, opts)
    }

    /// Scatters; `each` is the count every rank passes, if they must agree.
    fn scatter_counted<T: Element>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
        root: usize,
        each: Option<usize>,
        opts: CallOptions,
    ) -> Result<()> {
        self.check_root(root)?;
        self.check_counts(
            "scatterv",
            counts,
            recv.len(),
            (self.rank() == root).then_some(send.len()),
        )?;
        if self.size() == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let (alg, mut s) = self.begin(
            Signature::new(Collective::Scatter, T::DTYPE, each, 0),
            opts,
            std::mem::size_of_val(recv),
            true,
        );
        scatter::run(
            &mut s,
            alg,
            bytemuck::cast_slice(send),
            &bytes_of::<T>(counts),
            bytemuck::cast_slice_mut(recv),
            root,
        )
    }
}
