//! The communicator: a group of ranks with its own message context, `barrier`, and
//! `split` into sub-communicators. Point-to-point messages are in `comm/p2p.rs`, the other
//! collectives in `collectives/`.

mod p2p;
mod requests;
mod sync_send;

pub use requests::{Request, Status};

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use crate::collectives::{choose_at, Algorithm, CallOptions, Collective, Layout, Reach, Step};
use crate::engine::Engine;
use crate::stamp::Signature;
use heddle_wire::Dtype;

use crate::{AbortCause, CommConfig, JobAbort, Result};

#[cfg(doc)]
use crate::Error;

pub(crate) const COLLECTIVE_EDGE: u32 = 0x8000_0000;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Mutex<Engine>,
    pub(crate) config: CommConfig,
    /// The engine's job-wide abort, reachable without its lock.
    pub(crate) abort: Arc<JobAbort>,
    /// Which attempt of the job this is (0 first, 1 after the first restart ...).
    pub(crate) attempt: u32,
    /// The host of each world rank (equal numbers: the same host).
    pub(crate) hosts: Arc<[u32]>,
    /// The broadcast areas this worker maps (same-host ranks only).
    pub(crate) areas: crate::transport::bcast_area::Areas,
    /// What an idle thread of this worker sleeps on, when every link rings it.
    pub(crate) doorbell: Option<crate::transport::doorbell::Doorbell>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sleeps up to `limit` without holding the engine: on the doorbell (woken when a
    /// peer writes or frees room), or plainly without one.
    pub(crate) fn park(&self, limit: Duration, ready: impl FnOnce() -> bool) {
        match &self.doorbell {
            Some(bell) => {
                bell.park(limit, || ready() || self.lock().has_input());
            }
            None => std::thread::sleep(limit),
        }
    }
}

/// Wakes a worker's threads sleeping in [`Communicator::park`]: see
/// [`Communicator::waker`].
#[derive(Debug, Clone)]
pub struct Waker(crate::transport::doorbell::Doorbell);

impl Waker {
    /// Wakes the worker's sleeping threads, if any (they look for work and sleep again).
    pub fn wake(&self) {
        self.0.ring();
    }

    /// Whether `other` wakes the same worker.
    pub fn same(&self, other: &Waker) -> bool {
        self.0.same(&other.0)
    }
}

/// A group of ranks that exchange messages and run collectives together, with MPI
/// semantics: every member calls the same collectives in the same order.
///
/// Calls block the calling thread, which drives the transports itself (no background
/// thread on the data path). A communicator may be moved across threads; calls on
/// communicators of one worker are serialized.
///
/// ```
/// use heddle_comm::{local_world, CommConfig, Op};
/// let comms = local_world(3, CommConfig::default()).unwrap();
/// let sums: Vec<f64> = std::thread::scope(|s| {
///     let handles: Vec<_> = comms.into_iter().map(|c| s.spawn(move || {
///         let mut x = [c.rank() as f64 + 1.0];
///         c.allreduce(&mut x, Op::Sum).unwrap();
///         x[0]
///     })).collect();
///     handles.into_iter().map(|h| h.join().unwrap()).collect()
/// });
/// assert_eq!(sums, vec![6.0; 3]);
/// ```
#[derive(Debug)]
pub struct Communicator {
    shared: Arc<Shared>,
    ctx: u32,
    members: Arc<[usize]>,
    rank: usize,
    collective_seq: AtomicU32,
    /// The call number of its next non-blocking collective.
    nonblocking_seq: AtomicU32,
    split_seq: AtomicU32,
    /// Its ranks grouped by host, computed at its first collective.
    layout: OnceLock<Layout>,
}

impl Communicator {
    pub(crate) fn world(shared: Arc<Shared>, rank: usize, size: usize) -> Communicator {
        Communicator {
            shared,
            ctx: 0,
            members: (0..size).collect(),
            rank,
            collective_seq: AtomicU32::new(0),
            nonblocking_seq: AtomicU32::new(0),
            split_seq: AtomicU32::new(0),
            layout: OnceLock::new(),
        }
    }

    /// This process's rank in the communicator, `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Sleeps up to `limit` while this worker has nothing to do, waking as soon as a peer
    /// on this host writes to it or frees room for it — or only after `limit` when some
    /// link cannot wake it (TCP, MPI), for which [`Communicator::sleeps_until_woken`]
    /// says `false`. For executors between passes that found nothing to do.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let comms = heddle_comm::local_world(2, heddle_comm::CommConfig::default())?;
    /// assert!(comms[0].sleeps_until_woken());
    /// comms[1].send(&[7u8], 0, 0)?; // already there: no sleep
    /// let t = Instant::now();
    /// comms[0].park(Duration::from_secs(5));
    /// assert!(t.elapsed() < Duration::from_secs(5));
    /// # Ok::<(), heddle_comm::Error>(())
    /// ```
    pub fn park(&self, limit: Duration) {
        self.shared.park(limit, || false);
    }

    /// As [`Communicator::park`], and not asleep at all when `ready` (looked at after
    /// this thread counts itself among the sleepers) says so: a flag another thread sets
    /// before it calls [`Waker::wake`] is either seen here or wakes the sleep.
    pub fn park_unless(&self, limit: Duration, ready: impl FnOnce() -> bool) {
        self.shared.park(limit, ready);
    }

    /// Whether [`Communicator::park`] wakes when peers write (every link is a
    /// shared-memory or in-process ring), so that an idle worker may sleep long.
    pub fn sleeps_until_woken(&self) -> bool {
        self.shared.doorbell.is_some()
    }

    /// What wakes this worker's threads sleeping in [`Communicator::park`] from another
    /// thread of its process (a stop or an abort asked from outside the job), where the
    /// worker sleeps until woken; `None` where it only naps.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let comms = heddle_comm::local_world(2, heddle_comm::CommConfig::default())?;
    /// let waker = comms[0].waker().expect("rings wake their workers");
    /// let t = Instant::now();
    /// std::thread::scope(|s| {
    ///     s.spawn(|| comms[0].park(Duration::from_secs(30)));
    ///     std::thread::sleep(Duration::from_millis(50));
    ///     waker.wake();
    /// });
    /// assert!(t.elapsed() < Duration::from_secs(30));
    /// # Ok::<(), heddle_comm::Error>(())
    /// ```
    pub fn waker(&self) -> Option<Waker> {
        self.shared.doorbell.clone().map(Waker)
    }

    /// Which attempt of the job this is: 0 for the first, 1 after the first restart
    /// (`heddle run --restarts N` restarts a failed job; `HEDDLE_ATTEMPT` in each worker).
    ///
    /// ```
    /// let comm = heddle_comm::solo(heddle_comm::CommConfig::default())?;
    /// assert_eq!(comm.attempt(), 0);
    /// # Ok::<(), heddle_comm::Error>(())
    /// ```
    pub fn attempt(&self) -> u32 {
        self.shared.attempt
    }

    /// Number of ranks.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The world rank of communicator rank `r`.
    ///
    /// # Panics
    /// If `r >= size()`.
    pub fn world_rank(&self, r: usize) -> usize {
        self.members[r]
    }

    /// The host of each world rank: equal numbers mean the same host (shared memory
    /// between them), as the launcher's table of workers said.
    ///
    /// ```
    /// let comms = heddle_comm::local_world_on_hosts(&[0, 0, 1], Default::default())?;
    /// assert_eq!(&*comms[2].hosts(), &[0, 0, 1]);
    /// # Ok::<(), heddle_comm::Error>(())
    /// ```
    pub fn hosts(&self) -> Arc<[u32]> {
        self.shared.hosts.clone()
    }

    /// The configuration in force.
    pub fn config(&self) -> &CommConfig {
        &self.shared.config
    }

    /// Number of peers reached over TCP (the others use shared memory or in-process rings).
    pub fn tcp_peers(&self) -> usize {
        self.lock().tcp_links()
    }

    /// The job-wide abort of this communicator's world (see [`JobAbort`]): the runtime
    /// installs its reporter and feeds it causes heard from the job master.
    pub fn abort_handle(&self) -> Arc<JobAbort> {
        self.shared.abort.clone()
    }

    /// Aborts the job with `cause` (a failure on this rank that the other ranks must not
    /// outlive): every pending and future blocking call of every rank returns
    /// [`Error::Aborted`]. Returns whether this call aborted it (not in a world of one,
    /// nor when the job was aborted already).
    pub fn abort(&self, cause: AbortCause) -> bool {
        self.abort_handle().raise(cause)
    }

    /// `Err(Error::Aborted)` once the job was aborted.
    ///
    /// # Errors
    /// [`Error::Aborted`] with the cause.
    pub fn check_aborted(&self) -> Result<()> {
        self.shared.abort.check()
    }

    /// The engine and configuration this communicator's worker shares.
    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }

    /// The world rank of each rank.
    pub(crate) fn members(&self) -> Arc<[usize]> {
        self.members.clone()
    }

    /// The message context of its non-blocking collectives (the same on every member).
    pub(crate) fn nonblocking_context(&self) -> u32 {
        derive_context(self.ctx, u32::MAX - 2, u32::MAX)
    }

    /// The counter numbering its non-blocking collectives.
    pub(crate) fn nonblocking_seq(&self) -> &AtomicU32 {
        &self.nonblocking_seq
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        self.shared.engine.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Starts a collective: picks the algorithm and opens its message context.
    pub(crate) fn begin(
        &self,
        signature: Signature,
        opts: CallOptions,
        bytes: usize,
        uniform: bool,
    ) -> (Algorithm, Step<'_>) {
        let c = signature.collective();
        let forced = opts.algorithm.or_else(|| self.config().algorithms.get(&c).copied());
        let layout = self.layout.get_or_init(|| Layout::new(&self.members, &self.shared.hosts));
        let areas = &self.shared.areas;
        let at = Reach { spans_hosts: layout.spans_hosts(), areas: areas.cover(&self.members) };
        let alg = choose_at(c, forced, self.size(), bytes, uniform, at);
        let seq = self.collective_seq.fetch_add(1, Ordering::Relaxed);
        let step = Step {
            engine: self.lock(),
            members: &self.members,
            rank: self.rank,
            layout,
            areas,
            edge: self.ctx | COLLECTIVE_EDGE,
            tag: seq,
            timeout: opts.timeout.unwrap_or(self.config().timeout),
            op: c.name(),
            signature,
            algorithm: alg.name(),
            bytes: bytes as u64,
            started: std::time::Instant::now(),
        };
        (alg, step)
    }

    /// Splits into sub-communicators: ranks passing the same `color` form one, ordered by
    /// `(key, rank)`. Ranks passing `None` get `None`. Collective over this communicator.
    ///
    /// # Errors
    /// [`Error::CollectiveMismatch`], [`Error::PeerLost`], [`Error::Timeout`] or
    /// [`Error::Aborted`] as for every collective.
    ///
    /// # Examples
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             let color = (c.rank() % 2) as u32;
    ///             let sub = c.split(Some(color), c.rank() as i64).unwrap().unwrap();
    ///             assert_eq!((sub.size(), sub.rank()), (2, c.rank() / 2));
    ///         });
    ///     }
    /// });
    /// ```
    pub fn split(&self, color: Option<u32>, key: i64) -> Result<Option<Communicator>> {
        let mine = [color.map_or(-1, i64::from), key];
        let mut all = vec![0i64; 2 * self.size()];
        self.allgather(&mine, &mut all)?;
        let seq = self.split_seq.fetch_add(1, Ordering::Relaxed);
        let Some(color) = color else { return Ok(None) };
        let mut group: Vec<(i64, usize)> = (0..self.size())
            .filter(|&r| all[2 * r] == i64::from(color))
            .map(|r| (all[2 * r + 1], r))
            .collect();
        group.sort_unstable();
        let rank = group.iter().position(|&(_, r)| r == self.rank).unwrap_or(0);
        let members: Arc<[usize]> = group.iter().map(|&(_, r)| self.members[r]).collect();
        Ok(Some(Communicator {
            shared: self.shared.clone(),
            ctx: derive_context(self.ctx, seq, color),
            members,
            rank,
            collective_seq: AtomicU32::new(0),
            nonblocking_seq: AtomicU32::new(0),
            split_seq: AtomicU32::new(0),
            layout: OnceLock::new(),
        }))
    }

    /// A communicator of this process alone (MPI's `COMM_SELF`), made without
    /// communicating: its messages go to itself over the loopback link, in a context of
    /// their own.
    ///
    /// # Examples
    /// ```
    /// let world = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
    /// let me = world.self_comm();
    /// assert_eq!((me.rank(), me.size()), (0, 1));
    /// let mut r = me.irecv(vec![0u8; 2], Some(0), Some(1)).unwrap();
    /// me.send(&[4u8, 2], 0, 1).unwrap();
    /// assert_eq!(r.wait().unwrap().unwrap().bytes, 2);
    /// ```
    pub fn self_comm(&self) -> Communicator {
        Communicator {
            shared: self.shared.clone(),
            ctx: derive_context(self.ctx, u32::MAX, u32::MAX),
            members: Arc::from([self.members[self.rank]]),
            rank: 0,
            collective_seq: AtomicU32::new(0),
            nonblocking_seq: AtomicU32::new(0),
            split_seq: AtomicU32::new(0),
            layout: OnceLock::new(),
        }
    }

    /// The same ranks in a context of their own, made without communicating (every rank
    /// derives the same one): where non-blocking collectives built on point-to-point
    /// messages run, apart from the caller's messages.
    ///
    /// # Examples
    /// ```
    /// let world = heddle_comm::solo(heddle_comm::CommConfig::default()).unwrap();
    /// let shadow = world.shadow();
    /// assert_eq!((shadow.rank(), shadow.size()), (world.rank(), world.size()));
    /// ```
    pub fn shadow(&self) -> Communicator {
        Communicator {
            shared: self.shared.clone(),
            ctx: derive_context(self.ctx, u32::MAX - 1, u32::MAX),
            members: self.members.clone(),
            rank: self.rank,
            collective_seq: AtomicU32::new(0),
            nonblocking_seq: AtomicU32::new(0),
            split_seq: AtomicU32::new(0),
            layout: OnceLock::new(),
        }
    }

    /// Waits until every rank has called `barrier`.
    ///
    /// # Errors
    /// [`Error::CollectiveMismatch`] if another rank made a different collective call;
    /// [`Error::PeerLost`], [`Error::Timeout`] or [`Error::Aborted`] if a peer is gone,
    /// nothing moved for the timeout, or the job was aborted.
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(3, CommConfig::default()).unwrap();
    /// let arrived = &AtomicUsize::new(0);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             arrived.fetch_add(1, Ordering::SeqCst);
    ///             c.barrier().unwrap();
    ///             assert_eq!(arrived.load(Ordering::SeqCst), 3); // nobody leaves early
    ///         });
    ///     }
    /// });
    /// ```
    pub fn barrier(&self) -> Result<()> {
        self.barrier_with(CallOptions::default())
    }

    /// [`Communicator::barrier`] with options.
    ///
    /// # Errors
    /// As [`Communicator::barrier`].
    ///
    /// # Examples
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::time::Duration;
    /// use heddle_comm::{local_world, CallOptions, CommConfig};
    /// let comms = local_world(2, CommConfig::default()).unwrap();
    /// let opts = CallOptions::default().timeout(Duration::from_secs(30));
    /// let arrived = &AtomicUsize::new(0);
    /// std::thread::scope(|s| {
    ///     for c in &comms {
    ///         s.spawn(move || {
    ///             arrived.fetch_add(1, Ordering::SeqCst);
    ///             c.barrier_with(opts).unwrap();
    ///             assert_eq!(arrived.load(Ordering::SeqCst), 2);
    ///         });
    ///     }
    /// });
    /// ```
    pub fn barrier_with(&self, opts: CallOptions) -> Result<()> {
        if self.size() == 1 {
            return Ok(());
        }
        let (alg, mut s) =
            self.begin(Signature::new(Collective::Barrier, Dtype::U8, Some(0), 0), opts, 0, true);
        crate::collectives::barrier::run(&mut s, alg)
    }

    /// The timeout of blocking calls (`HEDDLE_TIMEOUT_S`): longest wait without progress.
    pub fn timeout(&self) -> Duration {
        self.config().timeout
    }
}

/// A 30-bit context id for a split, the same on every member (FNV-1a of its inputs).
fn derive_context(parent: u32, seq: u32, color: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in parent.to_le_bytes().into_iter().chain(seq.to_le_bytes()).chain(color.to_le_bytes()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h & !(COLLECTIVE_EDGE | crate::DATAFLOW_EDGE)).max(1)
}
