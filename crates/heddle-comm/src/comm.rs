//! The communicator: a group of ranks with its own message context, point-to-point
//! messaging, and `split` into sub-communicators. Collectives are in `collectives/`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::collectives::{choose, Algorithm, CallOptions, Collective, Step};
use crate::engine::{Engine, RecvOp, SendOp, Sink};
use crate::stamp::Signature;
use heddle_wire::{Codec, Dtype};

use crate::{AbortCause, CommConfig, Element, Error, JobAbort, Result};

const COLLECTIVE_EDGE: u32 = 0x8000_0000;

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Mutex<Engine>,
    pub(crate) config: CommConfig,
    /// The engine's job-wide abort, reachable without its lock.
    pub(crate) abort: Arc<JobAbort>,
}

impl Shared {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        self.engine.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
    split_seq: AtomicU32,
}

impl Communicator {
    pub(crate) fn world(shared: Arc<Shared>, rank: usize, size: usize) -> Communicator {
        Communicator {
            shared,
            ctx: 0,
            members: (0..size).collect(),
            rank,
            collective_seq: AtomicU32::new(0),
            split_seq: AtomicU32::new(0),
        }
    }

    /// This process's rank in the communicator, `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
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

    pub(crate) fn lock(&self) -> MutexGuard<'_, Engine> {
        self.shared.engine.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn check_rank(&self, r: usize, what: &str) -> Result<()> {
        if r < self.size() {
            Ok(())
        } else {
            Err(Error::InvalidArgument(format!(
                "{what} rank {r} is outside this communicator of {} ranks",
                self.size()
            )))
        }
    }

    /// Sends `data` to rank `dest` with `tag`; returns once the data has left the buffer.
    ///
    /// # Errors
    /// A bad rank, a lost peer or a timeout.
    pub fn send<T: Element>(&self, data: &[T], dest: usize, tag: u32) -> Result<()> {
        self.send_as(bytemuck::cast_slice(data), Some(T::DTYPE), dest, tag)
    }

    /// Sends bytes that hold elements of `dtype` (`None`: untyped): a receive into a
    /// buffer of another element type fails with [`Error::TypeMismatch`] instead of
    /// reading them as its own type.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn send_as(&self, data: &[u8], dtype: Option<Dtype>, dest: usize, tag: u32) -> Result<()> {
        self.check_rank(dest, "destination")?;
        let s = [SendOp {
            peer: self.members[dest],
            edge: self.ctx,
            tag,
            data,
            codec: codec_of(dtype),
            signature: Signature::NONE,
        }];
        self.lock().exchange(&s, &mut [], "send", self.config().timeout)
    }

    /// Receives into `buf`, which holds elements of `dtype` (`None`: any); returns the
    /// bytes received.
    ///
    /// # Errors
    /// [`Error::TypeMismatch`] if the message holds another element type; as
    /// [`Communicator::recv`].
    pub fn recv_as(
        &self,
        buf: &mut [u8],
        dtype: Option<Dtype>,
        src: usize,
        tag: u32,
    ) -> Result<usize> {
        self.check_rank(src, "source")?;
        let mut r = [RecvOp::new(self.members[src], self.ctx, tag, Sink::Copy(buf))
            .expecting(codec_of(dtype))];
        self.lock().exchange(&[], &mut r, "recv", self.config().timeout)?;
        Ok(r[0].len as usize)
    }

    /// Receives a message from `src` with `tag` into `buf`; returns the element count.
    ///
    /// # Errors
    /// [`Error::Truncated`] if the message is longer than `buf`; [`Error::TypeMismatch`]
    /// if it was sent as another element type; a bad rank, a lost peer or a timeout.
    pub fn recv<T: Element>(&self, buf: &mut [T], src: usize, tag: u32) -> Result<usize> {
        Ok(self.recv_as(bytemuck::cast_slice_mut(buf), Some(T::DTYPE), src, tag)?
            / std::mem::size_of::<T>())
    }

    /// Sends to `dest` and receives from `src` at once (both with `tag`); returns the
    /// number of elements received. Safe against the deadlock two blocking calls risk.
    ///
    /// # Errors
    /// As [`Communicator::send`] and [`Communicator::recv`].
    pub fn sendrecv<T: Element>(
        &self,
        data: &[T],
        dest: usize,
        buf: &mut [T],
        src: usize,
        tag: u32,
    ) -> Result<usize> {
        self.check_rank(dest, "destination")?;
        self.check_rank(src, "source")?;
        let codec = codec_of(Some(T::DTYPE));
        let s = [SendOp {
            peer: self.members[dest],
            edge: self.ctx,
            tag,
            data: bytemuck::cast_slice(data),
            codec,
            signature: Signature::NONE,
        }];
        let mut r = [RecvOp::new(
            self.members[src],
            self.ctx,
            tag,
            Sink::Copy(bytemuck::cast_slice_mut(buf)),
        )
        .expecting(codec)];
        self.lock().exchange(&s, &mut r, "sendrecv", self.config().timeout)?;
        Ok(r[0].len as usize / std::mem::size_of::<T>())
    }

    /// Sends raw bytes.
    ///
    /// # Errors
    /// As [`Communicator::send`].
    pub fn send_bytes(&self, data: &[u8], dest: usize, tag: u32) -> Result<()> {
        self.send_as(data, None, dest, tag)
    }

    /// Receives a message of any length as bytes.
    ///
    /// # Errors
    /// As [`Communicator::recv`].
    pub fn recv_bytes(&self, src: usize, tag: u32) -> Result<Vec<u8>> {
        self.check_rank(src, "source")?;
        let mut v = Vec::new();
        let mut r = [RecvOp::new(self.members[src], self.ctx, tag, Sink::Grow(&mut v))];
        self.lock().exchange(&[], &mut r, "recv", self.config().timeout)?;
        Ok(v)
    }

    /// Sends any serializable value (bincode).
    ///
    /// # Errors
    /// [`Error::Serialization`], or as [`Communicator::send`].
    pub fn send_object<S: serde::Serialize>(&self, value: &S, dest: usize, tag: u32) -> Result<()> {
        self.send_bytes(&bincode::serialize(value)?, dest, tag)
    }

    /// Receives a value sent with [`Communicator::send_object`].
    ///
    /// # Errors
    /// [`Error::Serialization`], or as [`Communicator::recv`].
    pub fn recv_object<D: serde::de::DeserializeOwned>(&self, src: usize, tag: u32) -> Result<D> {
        Ok(bincode::deserialize(&self.recv_bytes(src, tag)?)?)
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
        let alg = choose(c, forced, self.size(), bytes, uniform);
        let seq = self.collective_seq.fetch_add(1, Ordering::Relaxed);
        let step = Step {
            engine: self.lock(),
            members: &self.members,
            rank: self.rank,
            edge: self.ctx | COLLECTIVE_EDGE,
            tag: seq,
            timeout: opts.timeout.unwrap_or(self.config().timeout),
            op: c.name(),
            signature,
        };
        (alg, step)
    }

    /// Splits into sub-communicators: ranks passing the same `color` form one, ordered by
    /// `(key, rank)`. Ranks passing `None` get `None`. Collective over this communicator.
    ///
    /// ```
    /// use heddle_comm::{local_world, CommConfig};
    /// let comms = local_world(4, CommConfig::default()).unwrap();
    /// std::thread::scope(|s| {
    ///     for c in comms {
    ///         s.spawn(move || {
    ///             let sub = c.split(Some((c.rank() % 2) as u32), c.rank() as i64).unwrap().unwrap();
    ///             assert_eq!((sub.size(), sub.rank()), (2, c.rank() / 2));
    ///         });
    ///     }
    /// });
    /// ```
    ///
    /// # Errors
    /// As for any collective.
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
            split_seq: AtomicU32::new(0),
        }))
    }

    /// Waits until every rank has called `barrier`.
    ///
    /// # Errors
    /// A lost peer or a timeout.
    pub fn barrier(&self) -> Result<()> {
        self.barrier_with(CallOptions::default())
    }

    /// [`Communicator::barrier`] with options.
    ///
    /// # Errors
    /// As [`Communicator::barrier`].
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

/// The frame codec of elements of `dtype` (`Raw` when untyped).
fn codec_of(dtype: Option<Dtype>) -> Codec {
    dtype.map_or(Codec::Raw, Codec::Array)
}

/// A 30-bit context id for a split, the same on every member (FNV-1a of its inputs).
fn derive_context(parent: u32, seq: u32, color: u32) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in parent.to_le_bytes().into_iter().chain(seq.to_le_bytes()).chain(color.to_le_bytes()) {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    (h & !(COLLECTIVE_EDGE | crate::DATAFLOW_EDGE)).max(1)
}
