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
    /// A lost peer or a timeout.
    pub fn allreduce<T: Element>(&self, buf: &mut [T], op: Op<T>) -> Result<()> {
        self.allreduce_with(buf, op, CallOptions::default())
    }

    /// [`Communicator::allreduce`] with options (e.g. a forced algorithm).
    ///
    /// # Errors
    /// As [`Communicator::allreduce`].
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
    /// [`Error::InvalidArgument`] for a bad root or, at the root, `recv` shorter than `send`.
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
    /// [`Error::InvalidArgument`] if the counts do not match the buffers.
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
                "reduce_scatter: {} counts summing to {} for {} ranks, send of {} and recv of {} elements",
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
