//! Non-blocking data movement on [`Communicator`]: `ibcast`, `igather(v)`, `iscatter(v)`,
//! `iallgather(v)`, `ialltoall(v)`. The v-forms take [`Blocks`]: a count and a
//! displacement per rank.

use super::algorithms::{self as alg, DATA, OUT};
use super::{Blocks, Call, CollectiveRequest};
use crate::{Collective, Communicator, Element, Error, Result};

impl Communicator {
    /// Starts broadcasting `root`'s `buf` (`MPI_Ibcast`): every rank passes a buffer of
    /// the same length and gets the root's contents back.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root outside the communicator; [`Error::Aborted`]
    /// once the job was aborted. Waiting fails as [`CollectiveRequest::wait`] says.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mine = if c.rank() == 1 { vec![7u16, 8] } else { vec![0, 0] };
    ///             assert_eq!(c.ibcast(mine, 1).unwrap().wait().unwrap(), [7, 8]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ibcast<T: Element>(&self, buf: Vec<T>, root: usize) -> Result<CollectiveRequest<T>> {
        self.check_rank(root, "root")?;
        let n = buf.len();
        let plan = alg::bcast(self.rank(), self.size(), root, n);
        let (name, collective, count) = ("ibcast", Collective::Broadcast, Some(n));
        self.start(Call { name, collective, count, op: None, plan, bufs: vec![buf], result: DATA })
    }

    /// Starts gathering every rank's `send` (all of one length) at `root` in rank order
    /// (`MPI_Igather`); the others' result is empty.
    ///
    /// # Errors
    /// As [`Communicator::ibcast`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let all = c.igather(vec![c.rank() as u8; 2], 0).unwrap().wait().unwrap();
    ///             assert_eq!(all, if c.rank() == 0 { vec![0, 0, 1, 1, 2, 2] } else { vec![] });
    ///         });
    ///     }
    /// });
    /// ```
    pub fn igather<T: Element>(&self, send: Vec<T>, root: usize) -> Result<CollectiveRequest<T>> {
        let blocks = Blocks::packed(&vec![send.len(); self.size()]);
        let count = Some(send.len());
        self.igather_blocks("igather", send, &blocks, root, count)
    }

    /// Starts gathering every rank's `send` at `root` into the blocks `blocks` lays out
    /// (`MPI_Igatherv`; rank i's `send` holds `blocks.counts()[i]` elements). The root's
    /// result holds [`Blocks::extent`] elements (zero where no block lies); the others'
    /// is empty.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root outside the communicator, or `blocks` without
    /// one block per rank or with this rank's count other than `send`'s length.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let blocks = Blocks::new(&[1, 2, 0], &[3, 0, 1]).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let send = vec![c.rank() as i32 + 1; blocks.counts()[c.rank()]];
    ///             let all = c.igatherv(send, blocks, 1).unwrap().wait().unwrap();
    ///             assert_eq!(all, if c.rank() == 1 { vec![2, 2, 0, 1] } else { vec![] });
    ///         });
    ///     }
    /// });
    /// ```
    pub fn igatherv<T: Element>(
        &self,
        send: Vec<T>,
        blocks: &Blocks,
        root: usize,
    ) -> Result<CollectiveRequest<T>> {
        self.check_own_block(blocks, send.len(), "igatherv")?;
        self.igather_blocks("igatherv", send, blocks, root, None)
    }

    fn igather_blocks<T: Element>(
        &self,
        name: &'static str,
        send: Vec<T>,
        blocks: &Blocks,
        root: usize,
        count: Option<usize>,
    ) -> Result<CollectiveRequest<T>> {
        self.check_rank(root, "root")?;
        let n = send.len();
        let plan = alg::gather(self.rank(), self.size(), root, n, blocks);
        let out = vec![T::zeroed(); if self.rank() == root { blocks.extent() } else { 0 }];
        let collective = Collective::Gather;
        let bufs = vec![send, Vec::new(), out];
        self.start(Call { name, collective, count, op: None, plan, bufs, result: OUT })
    }

    /// Starts scattering `root`'s `send` (`size()` blocks of `count` elements) so that rank
    /// i gets block i (`MPI_Iscatter`); the other ranks' `send` is ignored (pass an empty
    /// vector).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root outside the communicator or, at the root, a
    /// `send` not of `count × size()` elements.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let send = if c.rank() == 0 { vec![1.5f32, 2.5] } else { vec![] };
    ///             let mine = c.iscatter(send, 1, 0).unwrap().wait().unwrap();
    ///             assert_eq!(mine, [[1.5], [2.5]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iscatter<T: Element>(
        &self,
        send: Vec<T>,
        count: usize,
        root: usize,
    ) -> Result<CollectiveRequest<T>> {
        let blocks = Blocks::packed(&vec![count; self.size()]);
        if self.rank() == root && send.len() != blocks.extent() {
            return Err(Error::InvalidArgument(format!(
                "iscatter: the root's buffer holds {} elements, not {count} for each of {} ranks",
                send.len(),
                self.size()
            )));
        }
        self.iscatter_blocks("iscatter", send, &blocks, root, Some(count))
    }

    /// Starts scattering the blocks of `root`'s `send` laid out by `blocks`: rank i gets
    /// `blocks.counts()[i]` elements (`MPI_Iscatterv`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root outside the communicator, `blocks` without one
    /// block per rank, or, at the root, a `send` shorter than [`Blocks::extent`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let blocks = Blocks::packed(&[1, 3]);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let send = if c.rank() == 1 { vec![9u64, 8, 7, 6] } else { vec![] };
    ///             let mine = c.iscatterv(send, blocks, 1).unwrap().wait().unwrap();
    ///             assert_eq!(mine, [vec![9], vec![8, 7, 6]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iscatterv<T: Element>(
        &self,
        send: Vec<T>,
        blocks: &Blocks,
        root: usize,
    ) -> Result<CollectiveRequest<T>> {
        blocks.check(self, "iscatterv's blocks")?;
        if self.rank() == root && send.len() < blocks.extent() {
            return Err(Error::InvalidArgument(format!(
                "iscatterv: the root's buffer holds {} elements; its blocks reach {}",
                send.len(),
                blocks.extent()
            )));
        }
        self.iscatter_blocks("iscatterv", send, blocks, root, None)
    }

    fn iscatter_blocks<T: Element>(
        &self,
        name: &'static str,
        send: Vec<T>,
        blocks: &Blocks,
        root: usize,
        count: Option<usize>,
    ) -> Result<CollectiveRequest<T>> {
        self.check_rank(root, "root")?;
        let n = blocks.counts()[self.rank()];
        let plan = alg::scatter(self.rank(), self.size(), root, n, blocks);
        let bufs = vec![send, Vec::new(), vec![T::zeroed(); n]];
        let collective = Collective::Scatter;
        self.start(Call { name, collective, count, op: None, plan, bufs, result: OUT })
    }

    /// Starts gathering every rank's `send` (all of one length) on every rank, in rank
    /// order (`MPI_Iallgather`).
    ///
    /// # Errors
    /// As [`Communicator::ibcast`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let all = c.iallgather(vec![c.rank() as u32]).unwrap().wait().unwrap();
    ///             assert_eq!(all, [0, 1, 2]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iallgather<T: Element>(&self, send: Vec<T>) -> Result<CollectiveRequest<T>> {
        let blocks = Blocks::packed(&vec![send.len(); self.size()]);
        let count = Some(send.len());
        self.iallgather_blocks("iallgather", send, &blocks, count)
    }

    /// Starts gathering every rank's `send` on every rank into the blocks `blocks` lays
    /// out (`MPI_Iallgatherv`); every rank passes the same `blocks`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `blocks` without one block per rank or with this
    /// rank's count other than `send`'s length.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let blocks = Blocks::packed(&[0, 1, 2]);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         let blocks = &blocks;
    ///         s.spawn(move || {
    ///             let send = vec![c.rank() as u8; c.rank()];
    ///             assert_eq!(c.iallgatherv(send, blocks).unwrap().wait().unwrap(), [1, 2, 2]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iallgatherv<T: Element>(
        &self,
        send: Vec<T>,
        blocks: &Blocks,
    ) -> Result<CollectiveRequest<T>> {
        self.check_own_block(blocks, send.len(), "iallgatherv")?;
        self.iallgather_blocks("iallgatherv", send, blocks, None)
    }

    fn iallgather_blocks<T: Element>(
        &self,
        name: &'static str,
        send: Vec<T>,
        blocks: &Blocks,
        count: Option<usize>,
    ) -> Result<CollectiveRequest<T>> {
        let plan = alg::allgather(self.rank(), self.size(), blocks);
        let bufs = vec![send, Vec::new(), vec![T::zeroed(); blocks.extent()]];
        let collective = Collective::Allgather;
        self.start(Call { name, collective, count, op: None, plan, bufs, result: OUT })
    }

    /// Starts an all-to-all exchange of equal blocks (`MPI_Ialltoall`): `send` holds
    /// `size()` blocks, block i going to rank i; the result holds block r of every rank,
    /// in rank order.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `send`'s length is not a multiple of `size()`.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = 10 * c.rank() as u8;
    ///             let got = c.ialltoall(vec![r, r + 1]).unwrap().wait().unwrap();
    ///             assert_eq!(got, [[0, 10], [1, 11]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ialltoall<T: Element>(&self, send: Vec<T>) -> Result<CollectiveRequest<T>> {
        if !send.len().is_multiple_of(self.size()) {
            return Err(Error::InvalidArgument(format!(
                "ialltoall: {} elements do not split into {} equal blocks",
                send.len(),
                self.size()
            )));
        }
        let blocks = Blocks::even(send.len(), self.size());
        let count = Some(send.len());
        self.ialltoall_blocks("ialltoall", send, &blocks, &blocks, count)
    }

    /// Starts an all-to-all exchange of blocks laid out by `send_blocks` (block i of
    /// `send` goes to rank i) into blocks laid out by `recv_blocks` (block i comes from
    /// rank i) (`MPI_Ialltoallv`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for blocks without one per rank, a `send` shorter than
    /// its blocks reach, or this rank sending itself another count than it receives.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, Blocks, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             // Rank r sends r + 1 copies of r to each rank.
    ///             let r = c.rank();
    ///             let sends = Blocks::packed(&[r + 1, r + 1]);
    ///             let recvs = Blocks::packed(&[1, 2]);
    ///             let req = c.ialltoallv(vec![r as u8; 2 * (r + 1)], &sends, &recvs).unwrap();
    ///             assert_eq!(req.wait().unwrap(), [0, 1, 1]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ialltoallv<T: Element>(
        &self,
        send: Vec<T>,
        send_blocks: &Blocks,
        recv_blocks: &Blocks,
    ) -> Result<CollectiveRequest<T>> {
        send_blocks.check(self, "ialltoallv's send blocks")?;
        recv_blocks.check(self, "ialltoallv's receive blocks")?;
        let r = self.rank();
        if send.len() < send_blocks.extent() || send_blocks.counts()[r] != recv_blocks.counts()[r] {
            return Err(Error::InvalidArgument(format!(
                "ialltoallv: the buffer holds {} elements, its blocks reach {}, and this rank \
                 sends itself {} but receives {}",
                send.len(),
                send_blocks.extent(),
                send_blocks.counts()[r],
                recv_blocks.counts()[r]
            )));
        }
        self.ialltoall_blocks("ialltoallv", send, send_blocks, recv_blocks, None)
    }

    fn ialltoall_blocks<T: Element>(
        &self,
        name: &'static str,
        send: Vec<T>,
        send_blocks: &Blocks,
        recv_blocks: &Blocks,
        count: Option<usize>,
    ) -> Result<CollectiveRequest<T>> {
        let plan = alg::alltoall(self.rank(), self.size(), send_blocks, recv_blocks);
        let bufs = vec![send, Vec::new(), vec![T::zeroed(); recv_blocks.extent()]];
        let collective = Collective::Alltoall;
        self.start(Call { name, collective, count, op: None, plan, bufs, result: OUT })
    }

    /// Fails unless `blocks` has one block per rank and this rank's holds `len` elements.
    fn check_own_block(&self, blocks: &Blocks, len: usize, name: &str) -> Result<()> {
        blocks.check(self, &format!("{name}'s blocks"))?;
        let own = blocks.counts()[self.rank()];
        if own == len {
            return Ok(());
        }
        Err(Error::InvalidArgument(format!(
            "{name}: rank {}'s block holds {own} elements but it sends {len}",
            self.rank()
        )))
    }
}
