//! Where a task's records go: the [`Context`] a task emits through and the task's
//! [`Outputs`], flushed after every call into each output port: an edge's outbox (which
//! `op_edge.rs` offers to the edge's operation), or a chained task's inbox on this worker.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use heddle_comm::Communicator;

use super::inbox::{lock, SharedInbox, QUEUE_CAP};
use crate::checkpoint::Codec;
use crate::{Error, Result, Strategy, TaskInfo};

/// Handed to every task call: emit records, see who and where it is, call collectives
/// on its vertex's communicator, change its strategy.
pub struct Context<'a, O> {
    pub(crate) out: &'a mut Vec<O>,
    pub(crate) info: &'a TaskInfo,
    pub(crate) comm: Option<&'a Communicator>,
    pub(crate) strategy: &'a mut Strategy,
    pub(crate) iteration: &'a [u64],
    /// When the task asked to be called again at the latest ([`Context::wake_at`]).
    pub(crate) wake: &'a mut Option<std::time::Instant>,
}

impl<O> std::fmt::Debug for Context<'_, O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("task", self.info)
            .field("iteration", &self.iteration)
            .finish_non_exhaustive()
    }
}

impl<O> Context<'_, O> {
    /// Sends `record` on every outgoing edge of the task.
    #[inline]
    pub fn emit(&mut self, record: O) {
        self.out.push(record);
    }

    /// Records emitted in this call and not yet moved to the edges.
    pub fn emitted(&self) -> usize {
        self.out.len()
    }

    /// Who this task instance is.
    pub fn info(&self) -> &TaskInfo {
        self.info
    }

    /// This instance's index among its vertex's instances.
    pub fn index(&self) -> u32 {
        self.info.index
    }

    /// The vertex's number of instances.
    pub fn parallelism(&self) -> u32 {
        self.info.parallelism
    }

    /// The communicator of the vertex's instances (rank = instance index), for BSP
    /// collectives inside the task. Only for vertices marked
    /// [`crate::TaskGraph::collective`].
    ///
    /// # Errors
    /// [`Error::Graph`] for a vertex not marked collective.
    pub fn comm(&self) -> Result<&Communicator> {
        self.comm.ok_or_else(|| {
            Error::Graph(format!(
                "task {} called comm() but its vertex is not marked collective \
                 (TaskGraph::collective)",
                self.info
            ))
        })
    }

    /// Asks to be called again by `when` even if no record arrives meanwhile (a source's
    /// `next`, a compute task's `tick`): a source waiting on a socket or a rate says when
    /// to look again, so that its worker may sleep until then (an idle worker otherwise
    /// sleeps until a peer sends it something, up to 50 ms). Holds until the task's next
    /// call; the earliest of several requests wins.
    ///
    /// ```
    /// use heddle_task::{Context, Produced, Source};
    /// use std::time::{Duration, Instant};
    /// /// Emits the time every 5 ms, five times.
    /// struct Clock(u32);
    /// impl Source for Clock {
    ///     type Out = u32;
    ///     fn next(&mut self, ctx: &mut Context<'_, u32>) -> heddle_task::Result<Produced> {
    ///         ctx.emit(self.0);
    ///         self.0 += 1;
    ///         ctx.wake_at(Instant::now() + Duration::from_millis(5));
    ///         Ok(if self.0 == 5 { Produced::Done } else { Produced::More })
    ///     }
    /// }
    /// ```
    pub fn wake_at(&mut self, when: std::time::Instant) {
        *self.wake = Some(self.wake.map_or(when, |w| w.min(when)));
    }

    /// The current strategy.
    pub fn strategy(&self) -> Strategy {
        *self.strategy
    }

    /// Changes when the task runs from now on.
    pub fn set_strategy(&mut self, strategy: Strategy) {
        *self.strategy = strategy;
    }

    /// The iteration counters, outermost first (empty outside iterations).
    pub fn iteration(&self) -> &[u64] {
        self.iteration
    }
}

/// A task's outputs: what it emitted in the current call, and the ports every record goes
/// to (a copy for each but the last).
pub(crate) struct Outputs<O> {
    pub(crate) emitted: Vec<O>,
    ports: Vec<Arc<dyn TaskOutput<O>>>,
}

impl<O: Clone> Outputs<O> {
    pub(crate) fn new(ports: Vec<Arc<dyn TaskOutput<O>>>) -> Self {
        Outputs { emitted: Vec::new(), ports }
    }

    /// Moves what the task emitted to every port; returns how many records that was.
    pub(crate) fn flush(&mut self) -> u64 {
        let n = self.emitted.len() as u64;
        if n == 0 {
            return 0;
        }
        if let Some((last, rest)) = self.ports.split_last() {
            for port in rest {
                let mut copy = self.emitted.clone();
                port.push(&mut copy);
            }
            last.push(&mut self.emitted);
        }
        self.emitted.clear();
        n
    }

    /// Whether every port can take more (back-pressure inside the worker).
    pub(crate) fn have_room(&self) -> bool {
        self.ports.iter().all(|p| p.backlog() < QUEUE_CAP)
    }

    /// The task ended its output for this pass.
    pub(crate) fn finish(&self) {
        for p in &self.ports {
            p.finish();
        }
    }

    /// Checkpoint barrier `id` on every port, after everything flushed so far
    /// (`overtake`: ahead of the records still in its outboxes, which it copies).
    pub(crate) fn barrier(&self, id: u64, overtake: bool) {
        for p in &self.ports {
            p.barrier(id, overtake);
        }
    }

    /// Whether barrier `id` has left every outbox (in order, or overtaking).
    pub(crate) fn barriers_left(&self, id: u64) -> bool {
        self.ports.iter().all(|p| p.barrier_left(id))
    }

    /// The records barrier `id` overtook, per port index.
    ///
    /// # Errors
    /// A record that did not serialize.
    pub(crate) fn overtaken(&self, id: u64) -> Result<Vec<(u32, Vec<u8>)>> {
        let mut all = Vec::new();
        for (k, p) in self.ports.iter().enumerate() {
            if let Some(bytes) = p.overtaken(id) {
                all.push((k as u32, bytes?));
            }
        }
        Ok(all)
    }

    /// Puts back the records a restored checkpoint's barrier had overtaken on port `k`.
    ///
    /// # Errors
    /// No such port, or records that do not decode.
    pub(crate) fn restore(&self, k: u32, bytes: &[u8]) -> Result<()> {
        let port = self.ports.get(k as usize).ok_or_else(|| {
            Error::Graph(format!("a checkpoint holds in-flight records for output {k}"))
        })?;
        port.restore(bytes)
    }
}

/// Where a task's emitted records go on one outgoing edge.
pub(crate) trait TaskOutput<T>: Send + Sync {
    /// Takes every record of `items`.
    fn push(&self, items: &mut Vec<T>);
    /// Records pushed and not yet taken by the edge.
    fn backlog(&self) -> usize;
    /// The task has ended its output for this pass.
    fn finish(&self);
    /// Checkpoint barrier `id`, after every record pushed so far (`overtake`: ahead of
    /// those still waiting, which it copies).
    fn barrier(&self, id: u64, overtake: bool);
    /// Whether barrier `id` has left this port.
    fn barrier_left(&self, _id: u64) -> bool {
        true
    }
    /// The records barrier `id` overtook here, encoded (once).
    fn overtaken(&self, _id: u64) -> Option<Result<Vec<u8>>> {
        None
    }
    /// Puts back records a restored checkpoint's barrier had overtaken here.
    fn restore(&self, _bytes: &[u8]) -> Result<()> {
        Err(Error::Graph("a checkpoint holds in-flight records for an in-memory port".into()))
    }
}

/// A port into an operation: records wait here until the operation accepts them.
#[derive(Debug)]
pub(crate) struct Outbox<T> {
    pub(crate) items: VecDeque<T>,
    pub(crate) finished: bool,
    /// Records pushed and taken so far.
    pub(crate) pushed: u64,
    pub(crate) taken: u64,
    /// Checkpoint barriers: (records pushed before it, id), oldest first.
    pub(crate) barriers: VecDeque<(u64, u64)>,
    /// The record type's codec, for barriers that overtake (none: they never do).
    codec: Option<Codec<T>>,
    /// The records a barrier overtook, encoded, until its task takes them.
    overtaken: Option<(u64, Result<Vec<u8>>)>,
}

impl<T> Outbox<T> {
    /// An empty outbox whose barriers may overtake records encoded with `codec`.
    pub(crate) fn new(codec: Option<Codec<T>>) -> Self {
        Outbox {
            items: VecDeque::new(),
            finished: false,
            pushed: 0,
            taken: 0,
            barriers: VecDeque::new(),
            codec,
            overtaken: None,
        }
    }

    /// Lets the first barrier jump the records before it (an unaligned checkpoint),
    /// keeping a copy of them for its checkpoint; they are still sent, after it.
    pub(crate) fn overtake(&mut self) {
        let Some(codec) = self.codec else { return };
        let Some(&(at, id)) = self.barriers.front() else { return };
        if at <= self.taken {
            return;
        }
        let n = (at - self.taken) as usize;
        let mut bytes = Vec::new();
        let copied = codec.encode_all(self.items.range(..n), &mut bytes).map(|()| bytes);
        self.overtaken = Some((id, copied));
        if let Some(front) = self.barriers.front_mut() {
            front.0 = self.taken;
        }
    }

    /// The next record, unless a barrier comes first.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.barriers.front().is_some_and(|&(at, _)| at == self.taken) {
            return None;
        }
        let x = self.items.pop_front()?;
        self.taken += 1;
        Some(x)
    }

    /// The barrier due now (every record before it taken), if any.
    pub(crate) fn due_barrier(&mut self) -> Option<u64> {
        match self.barriers.front() {
            Some(&(at, id)) if at == self.taken => {
                self.barriers.pop_front();
                Some(id)
            }
            _ => None,
        }
    }

    /// Whether the task has ended and every record and barrier is taken.
    pub(crate) fn drained(&self) -> bool {
        self.finished && self.items.is_empty() && self.barriers.is_empty()
    }
}

/// An outgoing port into an operation.
pub(crate) struct EdgeOutput<T>(pub(crate) Arc<Mutex<Outbox<T>>>);

impl<T: Send> TaskOutput<T> for EdgeOutput<T> {
    fn push(&self, items: &mut Vec<T>) {
        let mut o = lock(&self.0);
        o.pushed += items.len() as u64;
        o.items.extend(items.drain(..));
    }

    fn backlog(&self) -> usize {
        lock(&self.0).items.len()
    }

    fn finish(&self) {
        lock(&self.0).finished = true;
    }

    fn barrier(&self, id: u64, overtake: bool) {
        let mut o = lock(&self.0);
        let at = o.pushed;
        o.barriers.push_back((at, id));
        if overtake {
            o.overtake();
        }
    }

    fn barrier_left(&self, id: u64) -> bool {
        lock(&self.0).barriers.iter().all(|&(_, b)| b != id)
    }

    fn overtaken(&self, id: u64) -> Option<Result<Vec<u8>>> {
        let mut o = lock(&self.0);
        match o.overtaken.take() {
            Some((b, bytes)) if b == id => Some(bytes),
            other => {
                o.overtaken = other;
                None
            }
        }
    }

    fn restore(&self, bytes: &[u8]) -> Result<()> {
        let mut o = lock(&self.0);
        let codec = o.codec.ok_or_else(|| {
            Error::Graph("a checkpoint holds in-flight records for a port without codec".into())
        })?;
        let items = codec.decode_all(bytes)?;
        o.pushed += items.len() as u64;
        o.items.extend(items);
        Ok(())
    }
}

/// A chained port: records go straight into the downstream task's inbox on this worker,
/// never serialized.
pub(crate) struct ChainedOutput<T, U> {
    pub(crate) inbox: SharedInbox<U>,
    /// This output's input slot in the inbox.
    pub(crate) slot: usize,
    pub(crate) map: fn(T) -> U,
}

impl<T, U: Send> TaskOutput<T> for ChainedOutput<T, U> {
    fn push(&self, items: &mut Vec<T>) {
        let map = self.map;
        lock(&self.inbox).take_in(self.slot, items.drain(..).map(map));
    }

    fn backlog(&self) -> usize {
        let inbox = lock(&self.inbox);
        // Past a barrier the downstream task has not aligned yet, the upstream waits.
        if inbox.blocked(self.slot) {
            return QUEUE_CAP;
        }
        inbox.items.len()
    }

    fn finish(&self) {
        lock(&self.inbox).end_in(self.slot);
    }

    fn barrier(&self, id: u64, _overtake: bool) {
        lock(&self.inbox).barrier(self.slot, id);
    }
}
