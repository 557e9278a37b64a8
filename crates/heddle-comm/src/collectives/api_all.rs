//! Typed data movement among all ranks on [`Communicator`]: allgather(v) and alltoall(v).

use super::api_move::{bytes_of, invalid};
use super::{allgather, alltoall, displacements, CallOptions, Collective};
use crate::stamp::Signature;
use crate::{Communicator, Element, Result};

#[cfg(doc)]
use crate::Error;

impl Communicator {
    /// Every rank receives every rank's `send` (equal lengths) in rank order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `recv.len() != size() * send.len()`;
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u32;
    ///             let mut all = [0u32; 6];
    ///             c.allgather(&[r, r * r], &mut all).unwrap();
    ///             assert_eq!(all, [0, 0, 1, 1, 2, 4]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn allgather<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.allgather_with(send, recv, CallOptions::default())
    }

    /// [`Communicator::allgather`] with options.
    ///
    /// # Errors
    /// As [`Communicator::allgather`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Bruck);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut all = [0i16; 3];
    ///             c.allgather_with(&[-(c.rank() as i16)], &mut all, opts).unwrap();
    ///             assert_eq!(all, [0, -1, -2]);
    ///         });
    ///     }
    /// });
    /// ```
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
    /// [`Error::InvalidArgument`] if the counts do not match the buffers; as
    /// [`Communicator::allgather`] otherwise.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut all = [0u8; 6];
    ///             c.allgatherv(&vec![c.rank() as u8; c.rank() + 1], &mut all, &[1, 2, 3])
    ///                 .unwrap();
    ///             assert_eq!(all, [0, 1, 1, 2, 2, 2]);
    ///         });
    ///     }
    /// });
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Ring);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mine: &[f64] = if c.rank() == 0 { &[0.5] } else { &[1.5, 2.5] };
    ///             let mut all = [0.0f64; 3];
    ///             c.allgatherv_with(mine, &mut all, &[1, 2], opts).unwrap();
    ///             assert_eq!(all, [0.5, 1.5, 2.5]);
    ///         });
    ///     }
    /// });
    /// ```
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
    /// [`Error::InvalidArgument`] if the buffers are not `size()` equal blocks;
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u32;
    ///             let mut recv = [0u32; 3];
    ///             c.alltoall(&[10 * r, 10 * r + 1, 10 * r + 2], &mut recv).unwrap();
    ///             assert_eq!(recv, [r, 10 + r, 20 + r]); // the transpose
    ///         });
    ///     }
    /// });
    /// ```
    pub fn alltoall<T: Element>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        self.alltoall_with(send, recv, CallOptions::default())
    }

    /// [`Communicator::alltoall`] with options.
    ///
    /// # Errors
    /// As [`Communicator::alltoall`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Linear);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as i32;
    ///             let mut recv = [0i32; 4];
    ///             c.alltoall_with(&[r, r, 10 + r, 10 + r], &mut recv, opts).unwrap();
    ///             assert_eq!(recv, [10 * r, 10 * r, 10 * r + 1, 10 * r + 1]);
    ///         });
    ///     }
    /// });
    /// ```
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
    /// [`Error::InvalidArgument`] if the counts do not match the buffers; as
    /// [`Communicator::alltoall`] otherwise.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank();
    ///             let (send, mut recv) = (vec![r as u8; 3 * (r + 1)], [0u8; 6]);
    ///             c.alltoallv(&send, &[r + 1; 3], &mut recv, &[1, 2, 3]).unwrap();
    ///             assert_eq!(recv, [0, 1, 1, 2, 2, 2]);
    ///         });
    ///     }
    /// });
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Algorithm, CallOptions, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().algorithm(Algorithm::Pairwise);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             // Rank 0 sends [1] to itself and [2, 3] to rank 1; rank 1 sends nothing.
    ///             let (send, counts): (&[u64], _) =
    ///                 if c.rank() == 0 { (&[1, 2, 3], [1, 2]) } else { (&[], [0, 0]) };
    ///             let (mut recv, rcounts) = (vec![0u64; 1 + c.rank()], [1 + c.rank(), 0]);
    ///             c.alltoallv_with(send, &counts, &mut recv, &rcounts, opts).unwrap();
    ///             assert_eq!(recv, [&[1u64][..], &[2, 3]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
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
}
