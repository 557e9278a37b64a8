//! Typed data movement on [`Communicator`]: broadcast, gather(v), scatter(v),
//! allgather(v), alltoall(v).

use super::{
    allgather, alltoall, broadcast, displacements, gather, scatter, CallOptions, Collective,
};
use crate::stamp::Signature;
use crate::{Communicator, Element, Error, Result};

fn invalid(msg: String) -> Error {
    Error::InvalidArgument(msg)
}

fn bytes_of<T>(counts: &[usize]) -> Vec<usize> {
    counts.iter().map(|c| c * std::mem::size_of::<T>()).collect()
}

impl Communicator {
    fn check_root(&self, root: usize) -> Result<()> {
        if root < self.size() {
            Ok(())
        } else {
            Err(invalid(format!(
                "root {root} is outside this communicator of {} ranks",
                self.size()
            )))
        }
    }

    /// Copies `buf` at `root` into `buf` at every rank (all ranks pass equal lengths).
    ///
    /// # Errors
    /// A bad root, a lost peer or a timeout.
    pub fn broadcast<T: Element>(&self, buf: &mut [T], root: usize) -> Result<()> {
        self.broadcast_with(buf, root, CallOptions::default())
    }

    /// [`Communicator::broadcast`] with options.
    ///
    /// # Errors
    /// As [`Communicator::broadcast`].
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

    /// Gathers every rank's `send` (equal lengths) into `recv` at `root`, in rank order
    /// (`recv` holds `size() * send.len()` there and is ignored elsewhere).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or buffer size.
    pub fn gather<T: Element>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.gather_with(send, recv, root, CallOptions::default())
    }

    /// [`Communicator::gather`] with options.
    ///
    /// # Errors
    /// As [`Communicator::gather`].
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
    /// [`Error::InvalidArgument`] for a bad root or counts that do not match the buffers.
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

    /// Scatters `send` at `root` (`size() * recv.len()` elements) so rank i receives block i.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a bad root or buffer size.
    pub fn scatter<T: Element>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<()> {
        self.scatter_with(send, recv, root, CallOptions::default())
    }

    /// [`Communicator::scatter`] with options.
    ///
    /// # Errors
    /// As [`Communicator::scatter`].
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
    /// [`Error::InvalidArgument`] for a bad root or counts that do not match the buffers.
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

    /// Every rank receives every rank's `send` (equal lengths) in rank order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `recv.len() != size() * send.len()`.
    pub fn allgather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.allgather_with(send, recv, CallOptions::default())
    }

    /// [`Communicator::allgather`] with options.
    ///
    /// # Errors
    /// As [`Communicator::allgather`].
    pub fn allgather_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        opts: CallOptions,
    ) -> Result<()> {
        let counts = vec![send.len(); self.size()];
        self.allgatherv_with(send, recv, &counts, opts)
    }

    /// Every rank receives rank i's `counts[i]` elements, concatenated in rank order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counts do not match the buffers.
    pub fn allgatherv<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<()> {
        self.allgatherv_with(send, recv, counts, CallOptions::default())
    }

    /// [`Communicator::allgatherv`] with options.
    ///
    /// # Errors
    /// As [`Communicator::allgatherv`].
    pub fn allgatherv_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        opts: CallOptions,
    ) -> Result<()> {
        self.check_counts("allgatherv", counts, send.len(), Some(recv.len()))?;
        if self.size() == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        if recv.is_empty() {
            return Ok(());
        }
        let uniform = counts.iter().all(|&c| c == counts[0]);
        let (alg, mut s) = self.begin(
            Signature::new(Collective::Allgather, T::DTYPE, Some(recv.len()), 0),
            opts,
            std::mem::size_of_val(send),
            uniform,
        );
        allgather::run(
            &mut s,
            alg,
            bytemuck::cast_slice(send),
            bytemuck::cast_slice_mut(recv),
            &bytes_of::<T>(counts),
        )
    }

    /// Rank i's block j (`send.len() / size()` elements) goes to rank j's block i.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the buffers are not `size()` equal blocks.
    pub fn alltoall<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.alltoall_with(send, recv, CallOptions::default())
    }

    /// [`Communicator::alltoall`] with options.
    ///
    /// # Errors
    /// As [`Communicator::alltoall`].
    pub fn alltoall_with<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        opts: CallOptions,
    ) -> Result<()> {
        let p = self.size();
        if !send.len().is_multiple_of(p) || recv.len() != send.len() {
            return Err(invalid(format!(
                "alltoall: send of {} and recv of {} elements are not {p} equal blocks",
                send.len(),
                recv.len()
            )));
        }
        let counts = vec![send.len() / p; p];
        self.alltoall_counted(send, &counts, recv, &counts, opts, Some(send.len()))
    }

    /// Rank i sends `send_counts[j]` elements to rank j and receives `recv_counts[j]` from it;
    /// blocks are concatenated in rank order in both buffers.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the counts do not match the buffers.
    pub fn alltoallv<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
    ) -> Result<()> {
        self.alltoallv_with(send, send_counts, recv, recv_counts, CallOptions::default())
    }

    /// [`Communicator::alltoallv`] with options.
    ///
    /// # Errors
    /// As [`Communicator::alltoallv`].
    pub fn alltoallv_with<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        opts: CallOptions,
    ) -> Result<()> {
        self.alltoall_counted(send, send_counts, recv, recv_counts, opts, None)
    }

    /// All-to-all; `each` is the total every rank sends, if they must agree.
    fn alltoall_counted<T: Element>(
        &self,
        send: &[T],
        send_counts: &[usize],
        recv: &mut [T],
        recv_counts: &[usize],
        opts: CallOptions,
        each: Option<usize>,
    ) -> Result<()> {
        self.check_counts(
            "alltoallv send",
            send_counts,
            send_counts.get(self.rank()).copied().unwrap_or(0),
            Some(send.len()),
        )?;
        self.check_counts(
            "alltoallv recv",
            recv_counts,
            recv_counts.get(self.rank()).copied().unwrap_or(0),
            Some(recv.len()),
        )?;
        if self.size() == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        let sd = displacements(&bytes_of::<T>(send_counts));
        let rd = displacements(&bytes_of::<T>(recv_counts));
        let per_peer = std::mem::size_of_val(send) / self.size();
        let (alg, mut s) = self.begin(
            Signature::new(Collective::Alltoall, T::DTYPE, each, 0),
            opts,
            per_peer,
            true,
        );
        alltoall::run(
            &mut s,
            alg,
            bytemuck::cast_slice(send),
            &sd,
            bytemuck::cast_slice_mut(recv),
            &rd,
        )
    }

    /// Checks `counts` has one entry per rank, that this rank's entry is `own`, and (when
    /// given) that they sum to `total`.
    fn check_counts(
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
}
