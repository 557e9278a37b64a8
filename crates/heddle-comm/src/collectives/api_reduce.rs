//! Typed reductions on [`Communicator`]: reduce, allreduce, reduce_scatter.

use super::{allreduce, reduce, reduce_scatter, CallOptions, Collective};
use crate::stamp::Signature;
use crate::{Communicator, Element, Error, Op, Result};

fn byte_op<T: Element>(op: &Op<T>) -> impl Fn(&mut [u8], &[u8]) + '_ {
    move |acc: &mut [u8], inc: &[u8]| op.apply_bytes(acc, inc)
}

impl Communicator {
    /// Combines every rank's `buf` elementwise with `op`; every rank gets the result in `buf`.
    ///
    /// # Errors
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut x = [c.rank() as u64, 1];
    ///             c.allreduce(&mut x, Op::Sum).unwrap();
    ///             assert_eq!(x, [0 + 1 + 2 + 3, 4]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn allreduce<T: Element>(&self, buf: &mut [T], op: Op<T>) -> Result<()> {
        self.allreduce_with(buf, op, CallOptions::default())
    }

    /// [`Communicator::allreduce`] with options (e.g. a forced algorithm).
    ///
    /// # Errors
    /// As [`Communicator::allreduce`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Ring);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as f64;
    ///             let mut x = [r, -r, 0.5 * r];
    ///             c.allreduce_with(&mut x, Op::Max, opts).unwrap();
    ///             assert_eq!(x, [2.0, 0.0, 1.0]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn allreduce_with<T: Element>(
        &self,
        buf: &mut [T],
        op: Op<T>,
        opts: CallOptions,
    ) -> Result<()> {
        if self.size() == 1 || buf.is_empty() {
            return Ok(());
        }
        let sig = Signature::new(Collective::Allreduce, T::DTYPE, Some(buf.len()), op.code());
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(buf);
        let (alg, mut s) = self.begin(sig, opts, bytes.len(), true);
        allreduce::run(&mut s, alg, bytes, std::mem::size_of::<T>(), &byte_op(&op))
    }

    /// Combines every rank's `send` elementwise into `recv` at `root` (`recv` is ignored,
    /// and may be empty, elsewhere).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or, at the root, `recv` not as long as `send`;
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as i32;
    ///             let mut sum = vec![0i32; if r == 0 { 2 } else { 0 }];
    ///             c.reduce(&[r, 10 * r], &mut sum, Op::Sum, 0).unwrap();
    ///             if r == 0 {
    ///                 assert_eq!(sum, [3, 30]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op<T>,
        root: usize,
    ) -> Result<()> {
        self.reduce_with(send, recv, op, root, CallOptions::default())
    }

    /// [`Communicator::reduce`] with options.
    ///
    /// # Errors
    /// As [`Communicator::reduce`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::BinomialTree);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let (x, mut prod) = ([c.rank() as u32 + 1], [0u32]);
    ///             c.reduce_with(&x, &mut prod, Op::Prod, 2, opts).unwrap();
    ///             assert_eq!(prod, if c.rank() == 2 { [1 * 2 * 3 * 4] } else { [0] });
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op<T>,
        root: usize,
        opts: CallOptions,
    ) -> Result<()> {
        if root >= self.size() {
            return Err(Error::InvalidArgument(format!(
                "root {root} is outside this communicator of {} ranks",
                self.size()
            )));
        }
        if self.rank() == root && recv.len() != send.len() {
            return Err(Error::InvalidArgument(format!(
                "reduce: root recv holds {} elements, send {}",
                recv.len(),
                send.len()
            )));
        }
        if self.size() == 1 || send.is_empty() {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let recv = if self.rank() == root { recv } else { &mut [] };
        let (sb, rb): (&[u8], &mut [u8]) =
            (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        let (alg, mut s) = self.begin(
            Signature::new(Collective::Reduce, T::DTYPE, Some(send.len()), op.code()),
            opts,
            sb.len(),
            true,
        );
        reduce::run(&mut s, alg, sb, rb, root, &byte_op(&op))
    }

    /// Reduces `send` (the concatenation of p blocks of `counts[i]` elements) across
    /// ranks; rank i receives reduced block i in `recv` (`counts[i]` elements).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counts do not match the buffers;
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let f = c.rank() as u32 + 1; // the sum of f over ranks is 6
    ///             let mut mine = vec![0u32; [1, 2, 1][c.rank()]];
    ///             c.reduce_scatter(&[f, 2 * f, 3 * f, 4 * f], &mut mine, &[1, 2, 1], Op::Sum)
    ///                 .unwrap();
    ///             assert_eq!(mine, [&[6][..], &[12, 18], &[24]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce_scatter<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: Op<T>,
    ) -> Result<()> {
        self.reduce_scatter_with(send, recv, counts, op, CallOptions::default())
    }

    /// [`Communicator::reduce_scatter`] with options.
    ///
    /// # Errors
    /// As [`Communicator::reduce_scatter`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Op};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::ReduceBroadcast);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let send = [[5i8, -1, 7], [3, 4, -2]][c.rank()];
    ///             let mut mine = vec![0i8; 2 - c.rank()];
    ///             c.reduce_scatter_with(&send, &mut mine, &[2, 1], Op::Min, opts).unwrap();
    ///             assert_eq!(mine, [&[3i8, -1][..], &[-2]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce_scatter_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: Op<T>,
        opts: CallOptions,
    ) -> Result<()> {
        if counts.len() != self.size()
            || counts.iter().sum::<usize>() != send.len()
            || recv.len() != counts[self.rank()]
        {
            return Err(Error::InvalidArgument(format!(
                "reduce_scatter: {} counts summing to {} for {} ranks, send of {} and recv of {} \
                 elements",
                counts.len(),
                counts.iter().sum::<usize>(),
                self.size(),
                send.len(),
                recv.len()
            )));
        }
        if self.size() == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let e = std::mem::size_of::<T>();
        let byte_counts: Vec<usize> = counts.iter().map(|c| c * e).collect();
        let uniform = counts.iter().all(|&c| c == counts[0]);
        let (sb, rb): (&[u8], &mut [u8]) =
            (bytemuck::cast_slice(send), bytemuck::cast_slice_mut(recv));
        let (alg, mut s) = self.begin(
            Signature::new(Collective::ReduceScatter, T::DTYPE, Some(send.len()), op.code()),
            opts,
            sb.len(),
            uniform,
        );
        reduce_scatter::run(&mut s, alg, sb, rb, &byte_counts, &byte_op(&op))
    }

    /// [`Communicator::reduce_scatter`] with `recv.len()` elements per rank.
    ///
    /// # Errors
    /// As [`Communicator::reduce_scatter`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u64;
    ///             let mut mine = [0u64];
    ///             c.reduce_scatter_block(&[0, r, 2 * r, 3 * r], &mut mine, Op::Sum).unwrap();
    ///             assert_eq!(mine, [6 * r]); // block j sums j * (0 + 1 + 2 + 3)
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce_scatter_block<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op<T>,
    ) -> Result<()> {
        self.reduce_scatter_block_with(send, recv, op, CallOptions::default())
    }

    /// [`Communicator::reduce_scatter_block`] with options.
    ///
    /// # Errors
    /// As [`Communicator::reduce_scatter`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Ring);
    /// fn bit_or(acc: &mut [u8], inc: &[u8]) {
    ///     acc.iter_mut().zip(inc).for_each(|(a, b)| *a |= b);
    /// }
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let bit = 1u8 << c.rank();
    ///             let (op, mut mine) = (Op::custom(bit_or), [0u8; 2]);
    ///             c.reduce_scatter_block_with(&[bit; 6], &mut mine, op, opts).unwrap();
    ///             assert_eq!(mine, [0b111; 2]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn reduce_scatter_block_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: Op<T>,
        opts: CallOptions,
    ) -> Result<()> {
        let counts = vec![recv.len(); self.size()];
        self.reduce_scatter_with(send, recv, &counts, op, opts)
    }
}
