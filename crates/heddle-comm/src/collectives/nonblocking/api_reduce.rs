//! Non-blocking barrier and reductions on [`Communicator`]: `ibarrier`, `ireduce`,
//! `iallreduce`, `iscan`, `iexscan`, `ireduce_scatter_block`, `ireduce_scatter`.

use super::algorithms::{self as alg, DATA, OUT, RING_MIN_BYTES};
use super::{Blocks, Call, CollectiveRequest};
use crate::{Collective, Communicator, Element, Error, Op, Result};

impl Communicator {
    /// Starts a barrier (`MPI_Ibarrier`): its request finishes once every rank has started
    /// it. The result is an empty vector.
    ///
    /// # Errors
    /// [`Error::Aborted`] once the job was aborted; a lost peer. Waiting fails as
    /// [`CollectiveRequest::wait`] says.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let barrier = c.ibarrier().unwrap();
    ///             let busy: u64 = (0..1000u64).sum(); // work while the others arrive
    ///             assert!(barrier.wait().unwrap().is_empty() && busy > 0);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ibarrier(&self) -> Result<CollectiveRequest<u8>> {
        self.start(Call {
            name: "ibarrier",
            collective: Collective::Barrier,
            count: Some(0),
            op: None,
            plan: alg::barrier(self.rank(), self.size()),
            bufs: vec![Vec::new()],
            result: DATA,
        })
    }

    /// Starts combining every rank's `send` with `op` at `root` (`MPI_Ireduce`): the
    /// root's result is the reduction, the others' an empty vector.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a root outside the communicator; otherwise as
    /// [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let req = c.ireduce(vec![c.rank() as i64, 1], Op::Sum, 2).unwrap();
    ///             let want = if c.rank() == 2 { vec![3, 3] } else { vec![] };
    ///             assert_eq!(req.wait().unwrap(), want);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ireduce<T: Element>(
        &self,
        send: Vec<T>,
        op: Op<T>,
        root: usize,
    ) -> Result<CollectiveRequest<T>> {
        self.check_rank(root, "root")?;
        let n = send.len();
        let (plan, temp) = alg::reduce(self.rank(), self.size(), root, n);
        let mut bufs = vec![send, vec![T::zeroed(); temp]];
        if self.rank() != root {
            bufs.push(Vec::new());
        }
        let result = if self.rank() == root { DATA } else { OUT };
        let (name, collective, count) = ("ireduce", Collective::Reduce, Some(n));
        self.start(Call { name, collective, count, op: Some(op), plan, bufs, result })
    }

    /// Starts combining every rank's `buf` elementwise with `op`, every rank getting the
    /// result (`MPI_Iallreduce`). Small buffers go up a binomial tree and back down; large
    /// ones round a ring (reduce-scatter, then allgather), so every rank gets the same
    /// bits.
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let mut req = c.iallreduce(vec![c.rank() as f64; 100_000], Op::Sum).unwrap();
    ///             let mut local = 0.0; // overlap: compute, moving the rounds now and then
    ///             for i in 0..1000 {
    ///                 local += (i as f64).sqrt();
    ///                 if i % 100 == 0 {
    ///                     req.test().unwrap();
    ///                 }
    ///             }
    ///             assert_eq!(req.wait().unwrap(), vec![6.0; 100_000]);
    ///             assert!(local > 0.0);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iallreduce<T: Element>(&self, buf: Vec<T>, op: Op<T>) -> Result<CollectiveRequest<T>> {
        let n = buf.len();
        let ring = n * std::mem::size_of::<T>() >= RING_MIN_BYTES;
        let (plan, temp) = alg::allreduce(self.rank(), self.size(), n, ring);
        let bufs = vec![buf, vec![T::zeroed(); temp]];
        let (name, collective, count) = ("iallreduce", Collective::Allreduce, Some(n));
        self.start(Call { name, collective, count, op: Some(op), plan, bufs, result: DATA })
    }

    /// Starts an inclusive prefix reduction (`MPI_Iscan`): rank r's result is the
    /// reduction of the `buf`s of ranks 0 to r, in rank order (`op` need not commute).
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let r = c.rank() as u32;
    ///             assert_eq!(c.iscan(vec![r], Op::Sum).unwrap().wait().unwrap(), [r * (r + 1) / 2]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iscan<T: Element>(&self, buf: Vec<T>, op: Op<T>) -> Result<CollectiveRequest<T>> {
        self.iprefix(buf, op, false)
    }

    /// Starts an exclusive prefix reduction (`MPI_Iexscan`): rank r's result is the
    /// reduction of the `buf`s of ranks 0 to r − 1, in rank order; rank 0 gets its `buf`
    /// back as it was (MPI leaves it undefined).
    ///
    /// # Errors
    /// As [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             // Where each rank's 5 records start in a file of all of them.
    ///             let start = c.iexscan(vec![5u64], Op::Sum).unwrap().wait().unwrap();
    ///             assert_eq!(start, [if c.rank() == 0 { 5 } else { 5 * c.rank() as u64 }]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn iexscan<T: Element>(&self, buf: Vec<T>, op: Op<T>) -> Result<CollectiveRequest<T>> {
        self.iprefix(buf, op, true)
    }

    fn iprefix<T: Element>(
        &self,
        buf: Vec<T>,
        op: Op<T>,
        exclusive: bool,
    ) -> Result<CollectiveRequest<T>> {
        let n = buf.len();
        let plan = alg::scan(self.rank(), self.size(), n, exclusive);
        let out = if exclusive { buf.clone() } else { Vec::new() };
        let bufs = vec![buf, vec![T::zeroed(); 2 * n], out];
        let (name, collective, result) = if exclusive {
            ("iexscan", Collective::Exscan, OUT)
        } else {
            ("iscan", Collective::Scan, DATA)
        };
        self.start(Call { name, collective, count: Some(n), op: Some(op), plan, bufs, result })
    }

    /// Starts a reduce-scatter into equal blocks (`MPI_Ireduce_scatter_block`): `send`
    /// holds `size()` blocks of equal length; rank r's result is block r reduced over
    /// every rank.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `send`'s length is not a multiple of `size()`;
    /// otherwise as [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let req = c.ireduce_scatter_block(vec![1u8, 2, 3, 4], Op::Max).unwrap();
    ///             assert_eq!(req.wait().unwrap(), [[1, 2], [3, 4]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ireduce_scatter_block<T: Element>(
        &self,
        send: Vec<T>,
        op: Op<T>,
    ) -> Result<CollectiveRequest<T>> {
        if !send.len().is_multiple_of(self.size()) {
            return Err(Error::InvalidArgument(format!(
                "ireduce_scatter_block: {} elements do not split into {} equal blocks",
                send.len(),
                self.size()
            )));
        }
        let blocks = Blocks::even(send.len(), self.size());
        let count = Some(send.len());
        self.ireduce_blocks("ireduce_scatter_block", send, &blocks, op, count)
    }

    /// Starts a reduce-scatter (`MPI_Ireduce_scatter`): `send` holds `counts[i]` elements
    /// for each rank i, one block after another; rank r's result is its block reduced
    /// over every rank. Every rank passes the same `counts`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `counts` has not one count per rank or does not add
    /// up to `send`'s length; otherwise as [`Communicator::ibarrier`].
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig, Op};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let req = c.ireduce_scatter(vec![1u32; 6], &[3, 0, 3], Op::Sum).unwrap();
    ///             assert_eq!(req.wait().unwrap(), [vec![3; 3], vec![], vec![3; 3]][c.rank()]);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn ireduce_scatter<T: Element>(
        &self,
        send: Vec<T>,
        counts: &[usize],
        op: Op<T>,
    ) -> Result<CollectiveRequest<T>> {
        let blocks = Blocks::packed(counts);
        blocks.check(self, "ireduce_scatter's counts")?;
        if blocks.extent() != send.len() {
            return Err(Error::InvalidArgument(format!(
                "ireduce_scatter: the counts add up to {} elements but the buffer holds {}",
                blocks.extent(),
                send.len()
            )));
        }
        let count = Some(send.len());
        self.ireduce_blocks("ireduce_scatter", send, &blocks, op, count)
    }

    fn ireduce_blocks<T: Element>(
        &self,
        name: &'static str,
        send: Vec<T>,
        blocks: &Blocks,
        op: Op<T>,
        count: Option<usize>,
    ) -> Result<CollectiveRequest<T>> {
        let (plan, temp) = alg::reduce_scatter(self.rank(), self.size(), blocks);
        let out = vec![T::zeroed(); blocks.counts()[self.rank()]];
        let bufs = vec![send, vec![T::zeroed(); temp], out];
        let collective = Collective::ReduceScatter;
        self.start(Call { name, collective, count, op: Some(op), plan, bufs, result: OUT })
    }
}
