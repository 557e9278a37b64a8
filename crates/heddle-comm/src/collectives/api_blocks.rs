//! The blocking v-variants with displacements (MPI's `displs`): `gatherv_blocks`,
//! `scatterv_blocks`, `allgatherv_blocks`, `alltoallv_blocks`. Blocks laid out one after
//! another in rank order go straight to the packed calls and their tuned algorithms;
//! others are packed or unpacked through a scratch buffer around them.

use super::Blocks;
use crate::{Communicator, Element, Error, Result};

/// Whether `blocks` lies one block after another from 0, in rank order.
fn is_packed(blocks: &Blocks) -> bool {
    blocks.displs() == Blocks::packed(blocks.counts()).displs()
}

fn check_extent(blocks: &Blocks, len: usize, what: &str) -> Result<()> {
    if len >= blocks.extent() {
        return Ok(());
    }
    Err(Error::InvalidArgument(format!(
        "{what} holds {len} elements but its blocks reach {}",
        blocks.extent()
    )))
}

/// The blocks of `buf` laid out by `blocks`, one after another in rank order.
fn pack<T: Element>(buf: &[T], blocks: &Blocks) -> Vec<T> {
    let mut out = Vec::with_capacity(blocks.counts().iter().sum());
    for (&c, &d) in blocks.counts().iter().zip(blocks.displs()) {
        out.extend_from_slice(&buf[d..d + c]);
    }
    out
}

/// Writes `packed` (blocks one after another in rank order) into `buf` as `blocks` lays
/// them out.
fn unpack<T: Element>(packed: &[T], blocks: &Blocks, buf: &mut [T]) {
    let mut at = 0;
    for (&c, &d) in blocks.counts().iter().zip(blocks.displs()) {
        buf[d..d + c].copy_from_slice(&packed[at..at + c]);
        at += c;
    }
}

impl Communicator {
    /// Gathers every rank's `send` into `recv` at `root`, block i (rank i's) where `blocks`
    /// puts it (MPI's `Gatherv` with displacements); elements of `recv` outside the blocks
    /// are left as they were. `recv` is ignored elsewhere.
    ///
    /// # Errors
    /// As [`Communicator::gatherv`]; [`Error::InvalidArgument`] when the root's `recv` is
    /// shorter than [`Blocks::extent`] or `blocks` has not one block per rank.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let blocks = Blocks::new(&[1, 2], &[3, 0]).unwrap(); // rank 1's block first
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let send = vec![c.rank() as u8 + 1; blocks.counts()[c.rank()]];
    ///             let mut recv = [9u8; 4];
    ///             c.gatherv_blocks(&send, &mut recv, blocks, 0).unwrap();
    ///             if c.rank() == 0 {
    ///                 assert_eq!(recv, [2, 2, 9, 1]);
    ///             }
    ///         });
    ///     }
    /// });
    /// ```
    pub fn gatherv_blocks<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        blocks: &Blocks,
        root: usize,
    ) -> Result<()> {
        blocks.check(self, "gatherv's blocks")?;
        let at_root = self.rank() == root;
        if at_root {
            check_extent(blocks, recv.len(), "gatherv's receive buffer")?;
        }
        if is_packed(blocks) {
            let total = blocks.extent();
            let recv = if at_root { &mut recv[..total] } else { &mut [][..] };
            return self.gatherv(send, recv, blocks.counts(), root);
        }
        let mut packed = vec![T::zeroed(); if at_root { blocks.counts().iter().sum() } else { 0 }];
        self.gatherv(send, &mut packed, blocks.counts(), root)?;
        if at_root {
            unpack(&packed, blocks, recv);
        }
        Ok(())
    }

    /// Scatters the blocks of `root`'s `send` laid out by `blocks`: rank i receives block i
    /// into `recv` (MPI's `Scatterv` with displacements). `send` is ignored elsewhere.
    ///
    /// # Errors
    /// As [`Communicator::scatterv`]; [`Error::InvalidArgument`] when the root's `send` is
    /// shorter than [`Blocks::extent`] or `blocks` has not one block per rank.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let blocks = Blocks::new(&[2, 1], &[1, 0]).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let mut recv = vec![0i16; blocks.counts()[c.rank()]];
    ///             c.scatterv_blocks(&[5i16, 6, 7], blocks, &mut recv, 1).unwrap();
    ///             assert_eq!(recv, [vec![6, 7], vec![5]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn scatterv_blocks<T: Element>(
        &self,
        send: &[T],
        blocks: &Blocks,
        recv: &mut [T],
        root: usize,
    ) -> Result<()> {
        blocks.check(self, "scatterv's blocks")?;
        let at_root = self.rank() == root;
        if at_root {
            check_extent(blocks, send.len(), "scatterv's send buffer")?;
        }
        if is_packed(blocks) {
            let send = if at_root { &send[..blocks.extent()] } else { &[][..] };
            return self.scatterv(send, blocks.counts(), recv, root);
        }
        let packed = if at_root { pack(send, blocks) } else { Vec::new() };
        self.scatterv(&packed, blocks.counts(), recv, root)
    }

    /// Gathers every rank's `send` on every rank into `recv`, block i where `blocks` puts
    /// it (MPI's `Allgatherv` with displacements); every rank passes the same `blocks`.
    ///
    /// # Errors
    /// As [`Communicator::allgatherv`]; [`Error::InvalidArgument`] when `recv` is shorter
    /// than [`Blocks::extent`] or `blocks` has not one block per rank.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let blocks = Blocks::new(&[1, 1], &[2, 0]).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let mut recv = [0u32; 3];
    ///             c.allgatherv_blocks(&[c.rank() as u32 + 1], &mut recv, blocks).unwrap();
    ///             assert_eq!(recv, [2, 0, 1]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn allgatherv_blocks<T: Element>(
        &self,
        send: &[T],
        recv: &mut [T],
        blocks: &Blocks,
    ) -> Result<()> {
        blocks.check(self, "allgatherv's blocks")?;
        check_extent(blocks, recv.len(), "allgatherv's receive buffer")?;
        if is_packed(blocks) {
            return self.allgatherv(send, &mut recv[..blocks.extent()], blocks.counts());
        }
        let mut packed = vec![T::zeroed(); blocks.counts().iter().sum()];
        self.allgatherv(send, &mut packed, blocks.counts())?;
        unpack(&packed, blocks, recv);
        Ok(())
    }

    /// Sends block i of `send` (laid out by `send_blocks`) to rank i and receives rank i's
    /// block into `recv` where `recv_blocks` puts it (MPI's `Alltoallv` with
    /// displacements).
    ///
    /// # Errors
    /// As [`Communicator::alltoallv`]; [`Error::InvalidArgument`] when a buffer is shorter
    /// than its blocks reach or a layout has not one block per rank.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let reversed = Blocks::new(&[1, 1], &[1, 0]).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let reversed = &reversed;
    ///         s.spawn(move || {
    ///             let r = 10 * c.rank() as u8;
    ///             let mut recv = [0u8; 2];
    ///             // Block for rank 0 at index 1, for rank 1 at index 0, both ways.
    ///             c.alltoallv_blocks(&[r + 1, r], reversed, &mut recv, reversed).unwrap();
    ///             assert_eq!(recv, [10 + c.rank() as u8, c.rank() as u8]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn alltoallv_blocks<T: Element>(
        &self,
        send: &[T],
        send_blocks: &Blocks,
        recv: &mut [T],
        recv_blocks: &Blocks,
    ) -> Result<()> {
        send_blocks.check(self, "alltoallv's send blocks")?;
        recv_blocks.check(self, "alltoallv's receive blocks")?;
        check_extent(send_blocks, send.len(), "alltoallv's send buffer")?;
        check_extent(recv_blocks, recv.len(), "alltoallv's receive buffer")?;
        let (send_counts, recv_counts) = (send_blocks.counts(), recv_blocks.counts());
        let packed_send = if is_packed(send_blocks) {
            std::borrow::Cow::Borrowed(&send[..send_blocks.extent()])
        } else {
            std::borrow::Cow::Owned(pack(send, send_blocks))
        };
        if is_packed(recv_blocks) {
            let recv = &mut recv[..recv_blocks.extent()];
            return self.alltoallv(&packed_send, send_counts, recv, recv_counts);
        }
        let mut packed = vec![T::zeroed(); recv_counts.iter().sum()];
        self.alltoallv(&packed_send, send_counts, &mut packed, recv_counts)?;
        unpack(&packed, recv_blocks, recv);
        Ok(())
    }
}
