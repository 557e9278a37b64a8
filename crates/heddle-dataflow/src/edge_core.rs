//! The one implementation of [`Operation`] every dataflow operation shares
//! ([`Dataflow`] over the operation's [`Semantics`]) and its machinery on one worker
//! ([`EdgeCore`]): records encoded straight into per-target messages, sent under the
//! edge's credit, end-of-stream and barriers ordered after data. What arrives is taken
//! apart in `arrivals.rs`. A record's way from `offer` to the edge's channels is this file
//! and its operation's own (which picks the targets).

use heddle_comm::{EdgeChannels, Envelope, Kind};
use serde::Serialize;
use std::collections::{HashMap, HashSet, VecDeque};

use super::arrivals::TargetState;
use super::semantics::Semantics;
use super::shared_relay::{shared_len, SharedBatch};
use super::spec::{EdgeSpec, Mode, Options, TaskId};
use super::tree::{BroadcastTree, MergeUp, UpTree};
use super::{Event, Offer, Operation};
use crate::{Error, Result};
use heddle_comm::Communicator;

#[derive(Debug)]
pub(crate) struct Msg {
    pub(crate) env: Envelope,
    pub(crate) data: Vec<u8>,
    /// A relayed batch shared with other same-host children (`data` is then empty).
    pub(crate) shared: Option<std::sync::Arc<SharedBatch>>,
}

impl Msg {
    pub(crate) fn new(env: Envelope, data: Vec<u8>) -> Msg {
        Msg { env, data, shared: None }
    }
}

/// Target id of a message meant for every target of the edge, relayed worker to worker
/// along a broadcast tree.
pub(crate) const RELAY: TaskId = u32::MAX;

/// The machinery every operation shares on one worker: batching, credit, ends,
/// barrier alignment. Operations reach it through [`Semantics`](crate::semantics::Semantics).
#[derive(Debug)]
pub struct EdgeCore {
    pub(crate) channels: EdgeChannels,
    pub(crate) spec: EdgeSpec,
    pub(crate) mode: Mode,
    pub(crate) batch_bytes: usize,
    pub(crate) local_sources: HashSet<TaskId>,
    pub(crate) local_targets: Vec<TaskId>,
    pub(crate) finished: HashSet<TaskId>,
    pub(crate) batches: HashMap<(TaskId, TaskId), Vec<u8>>,
    pub(crate) pending: Vec<VecDeque<Msg>>,
    pub(crate) pending_bytes: Vec<usize>,
    pub(crate) sequence: HashMap<(TaskId, TaskId), u64>,
    pub(crate) targets: HashMap<TaskId, TargetState>,
    /// Workers that run sources: the ones a target may still wait for.
    pub(crate) source_workers: Vec<usize>,
    pub(crate) ready_bytes: usize,
    pub(crate) rank: usize,
    /// Broadcast along this tree (messages addressed to [`RELAY`]).
    pub(crate) relay: Option<BroadcastTree>,
    pub(crate) target_workers: Vec<usize>,
    /// The host of each worker (trees go per host first).
    pub(crate) hosts: std::sync::Arc<[u32]>,
    /// Relayed messages this worker sent to itself (as tree root) and has not yet
    /// received back to forward.
    pub(crate) relay_outstanding: usize,
    /// Relayed messages this worker wrote into its shared slots for its children.
    pub(crate) shared_messages: u64,
    /// Whether relayed batches may go through the shared slots.
    pub(crate) share_slots: bool,
    /// Messages to targets climb this tree (reduce, gather in batch mode).
    pub(crate) up: Option<UpTree>,
    /// Serialized record bytes each local source queued, and each local target took.
    pub(crate) bytes_sent: HashMap<TaskId, u64>,
    pub(crate) bytes_received: HashMap<TaskId, u64>,
}

impl EdgeCore {
    /// Opens the edge on this worker.
    pub(crate) fn new(comm: &Communicator, spec: EdgeSpec, opts: &Options) -> Result<EdgeCore> {
        if spec.sources.is_empty() || spec.targets.is_empty() {
            return Err(Error::InvalidArgument(
                "an operation needs at least one source and one target".into(),
            ));
        }
        let rank = comm.world_rank(comm.rank());
        let mut source_workers = Vec::new();
        for &t in &spec.sources {
            source_workers.push(spec.placement.worker(t)?);
        }
        let mut target_workers = Vec::new();
        for &t in &spec.targets {
            let w = spec.placement.worker(t)?;
            if w >= comm.size() {
                return Err(Error::InvalidArgument(format!(
                    "task {t} is placed on worker {w} of a world of {}",
                    comm.size()
                )));
            }
            target_workers.push(w);
        }
        target_workers.sort_unstable();
        target_workers.dedup();
        source_workers.sort_unstable();
        source_workers.dedup();
        let window = (opts.budget_bytes / source_workers.len() as u64).max(1);
        let mut channels = comm.open_edge(spec.edge, window)?;
        if let Some(t) = opts.timeout {
            channels.set_timeout(t);
        }
        let local = |tasks: &[TaskId]| -> Vec<TaskId> {
            tasks.iter().copied().filter(|&t| spec.placement.worker(t).ok() == Some(rank)).collect()
        };
        let local_targets = local(&spec.targets);
        let peers = channels.workers();
        Ok(EdgeCore {
            channels,
            mode: opts.mode,
            batch_bytes: opts.batch_bytes.max(1),
            local_sources: local(&spec.sources).into_iter().collect(),
            targets: local_targets.iter().map(|&t| (t, TargetState::default())).collect(),
            local_targets,
            finished: HashSet::new(),
            batches: HashMap::new(),
            pending: (0..peers).map(|_| VecDeque::new()).collect(),
            pending_bytes: vec![0; peers],
            sequence: HashMap::new(),
            source_workers,
            ready_bytes: 0,
            rank,
            relay: None,
            target_workers,
            hosts: comm.hosts(),
            relay_outstanding: 0,
            shared_messages: 0,
            share_slots: opts.shared_slots,
            up: None,
            bytes_sent: HashMap::new(),
            bytes_received: HashMap::new(),
            spec,
        })
    }

    /// Sends messages to each target up `tree` (over the source workers, rooted at the
    /// target's worker); with `combine`, inner workers merge what passes through.
    pub(crate) fn set_up_tree(&mut self, tree: BroadcastTree, combine: bool) -> Result<()> {
        self.up = Some(UpTree::new(tree, self.rank, &self.spec, combine, &self.hosts)?);
        Ok(())
    }

    /// The worker a message to `target` goes to from here.
    fn next_worker(&self, target: TaskId) -> usize {
        self.up.as_ref().and_then(|u| u.hop(target)).unwrap_or_else(|| self.worker(target))
    }

    /// Sends records, ends and barriers to [`RELAY`] along `tree` instead of to each target.
    pub(crate) fn set_relay(&mut self, tree: BroadcastTree) {
        self.relay = Some(tree);
    }

    /// The targets a source's end or barrier goes to.
    fn end_targets(&self) -> Vec<TaskId> {
        if self.relay.is_some() {
            vec![RELAY]
        } else {
            self.spec.targets.clone()
        }
    }

    /// Number of workers that run this edge's sources.
    pub(crate) fn source_worker_count(&self) -> usize {
        self.source_workers.len()
    }

    /// Number of this edge's sources that run on this worker.
    pub(crate) fn local_sources(&self) -> usize {
        self.local_sources.len()
    }

    /// Checks `source` may still offer on this worker.
    pub(crate) fn check_source(&self, source: TaskId) -> Result<()> {
        if !self.local_sources.contains(&source) {
            return Err(Error::InvalidArgument(format!(
                "task {source} is not a source of edge {} on this worker",
                self.spec.edge
            )));
        }
        if self.finished.contains(&source) {
            return Err(Error::InvalidArgument(format!(
                "source {source} of edge {} has already finished",
                self.spec.edge
            )));
        }
        Ok(())
    }

    pub(crate) fn worker(&self, task: TaskId) -> usize {
        if task == RELAY {
            // A relayed message first goes to this worker, the root of its tree.
            return self.rank;
        }
        self.spec.placement.worker(task).expect("placement validated in EdgeCore::new")
    }

    /// Whether records for `targets` can be taken now (their workers' queues have room).
    pub(crate) fn has_room(&self, targets: &[TaskId]) -> bool {
        targets.iter().all(|&t| self.pending_bytes[self.next_worker(t)] < self.batch_bytes * 4)
    }

    /// Encodes `item` (bincode) into the message of each of `targets` (straight into the
    /// batch for one target; once, then copied, for several).
    pub(crate) fn push_encoded<T: Serialize>(
        &mut self,
        source: TaskId,
        targets: &[TaskId],
        item: &T,
    ) -> Result<()> {
        if let [target] = targets {
            return self.push_with(source, *target, |buf| Ok(bincode::serialize_into(buf, item)?));
        }
        let bytes = bincode::serialize(item)?;
        for &t in targets {
            self.push_record(source, t, &bytes);
        }
        Ok(())
    }

    /// Appends one encoded record for `target`; flushes the batch when it is full.
    pub(crate) fn push_record(&mut self, source: TaskId, target: TaskId, record: &[u8]) {
        // Appending a slice cannot fail.
        let _ = self.push_with(source, target, |buf| {
            buf.extend_from_slice(record);
            Ok(())
        });
    }

    /// Appends one record for `target`, written by `write` straight into the batch.
    pub(crate) fn push_with(
        &mut self,
        source: TaskId,
        target: TaskId,
        write: impl FnOnce(&mut Vec<u8>) -> Result<()>,
    ) -> Result<()> {
        let buf = self.batches.entry((source, target)).or_default();
        let at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        if let Err(e) = write(buf) {
            buf.truncate(at);
            return Err(e);
        }
        let len = (buf.len() - at - 4) as u32;
        buf[at..at + 4].copy_from_slice(&len.to_le_bytes());
        if buf.len() >= self.batch_bytes {
            let data = std::mem::take(buf);
            self.queue(Kind::Data, source, target, data);
        }
        Ok(())
    }

    fn queue(&mut self, kind: Kind, source: TaskId, target: TaskId, data: Vec<u8>) {
        if kind == Kind::Data {
            *self.bytes_sent.entry(source).or_default() += data.len() as u64;
        }
        let seq = self.sequence.entry((source, target)).or_insert(0);
        let sequence = *seq;
        *seq += 1;
        let env = Envelope { kind, source, target, sequence };
        self.send(env, data);
    }

    /// Queues a message for its next worker, or for the climb up the tree.
    fn send(&mut self, env: Envelope, data: Vec<u8>) {
        if let Some(up) = self.up.as_mut().filter(|u| u.hop(env.target).is_some()) {
            up.push(env, data);
            return;
        }
        let w = self.worker(env.target);
        self.relay_outstanding += usize::from(env.target == RELAY);
        self.pending_bytes[w] += data.len();
        self.pending[w].push_back(Msg::new(env, data));
    }

    /// Queues every partly filled batch of `source` (or of all sources).
    pub(crate) fn flush(&mut self, source: Option<TaskId>) {
        let keys: Vec<(TaskId, TaskId)> =
            self.batches.keys().copied().filter(|(s, _)| source.is_none_or(|x| x == *s)).collect();
        for (s, t) in keys {
            if let Some(data) = self.batches.remove(&(s, t)).filter(|d| !d.is_empty()) {
                self.queue(Kind::Data, s, t, data);
            }
        }
    }

    /// Ends `source`: its data, then end-of-stream to every target.
    pub(crate) fn finish(&mut self, source: TaskId) -> Result<()> {
        self.check_source(source)?;
        self.flush(Some(source));
        for t in self.end_targets() {
            self.queue(Kind::EndOfStream, source, t, Vec::new());
        }
        self.finished.insert(source);
        Ok(())
    }

    /// Barrier `id` from `source` to every target, after its data.
    pub(crate) fn barrier(&mut self, source: TaskId, id: u64) -> Result<()> {
        self.check_source(source)?;
        self.flush(Some(source));
        for t in self.end_targets() {
            self.send(
                Envelope { kind: Kind::Barrier, source, target: t, sequence: id },
                Vec::new(),
            );
        }
        Ok(())
    }

    /// Sends queued messages as credit allows and takes arrived ones while the targets'
    /// ready queues are short (`eager`: take everything, for operations that fold
    /// records into their state at once).
    pub(crate) fn progress(&mut self, eager: bool, combine: MergeUp<'_>) -> Result<bool> {
        if self.mode == Mode::Streaming {
            self.flush(None);
        }
        self.climb(combine)?;
        let mut moved = false;
        let link = self.channels.link();
        let mut io = link.lock();
        moved |= self.send_pending(&link, &mut io);
        moved |= io.poll()?;
        while eager || self.ready_bytes < self.batch_bytes {
            let Some(d) = io.recv() else { break };
            moved = true;
            if let Some(n) = shared_len(d.target, &d.payload) {
                io.credit_back(d.from, n.saturating_sub(d.payload.len()) as u64);
            }
            self.deliver(d)?;
        }
        drop(io);
        self.climb(combine)?;
        Ok(moved)
    }

    /// Moves messages waiting to climb the tree to their next worker's queue.
    fn climb(&mut self, combine: MergeUp<'_>) -> Result<()> {
        let EdgeCore { up, pending, pending_bytes, .. } = self;
        if let Some(up) = up.as_mut() {
            up.drain(combine, |w, env, data| {
                pending_bytes[w] += data.len();
                pending[w].push_back(Msg::new(env, data));
            })?;
        }
        Ok(())
    }

    /// Whether every local target has received the end of every source, and every
    /// message of this worker has left it (a worker that stops driving the engine
    /// earlier would strand messages other workers still wait for).
    pub(crate) fn is_done(&self) -> bool {
        self.targets.values().all(TargetState::is_done)
            && self.pending.iter().all(VecDeque::is_empty)
            && self.batches.values().all(Vec::is_empty)
            && self.relay_outstanding == 0
            && !self.up.as_ref().is_some_and(UpTree::busy)
            && !self.channels.lock().sending()
    }

    /// Whether messages of this worker wait to be sent.
    pub(crate) fn has_outgoing(&self) -> bool {
        self.pending.iter().any(|p| !p.is_empty()) || self.up.as_ref().is_some_and(UpTree::busy)
    }

    /// Waits after a pass that moved nothing.
    pub(crate) fn wait(&mut self) -> Result<()> {
        let edge = self.spec.edge;
        let pending: Vec<usize> = self.pending.iter().map(VecDeque::len).collect();
        let waiting: Vec<(TaskId, usize, usize)> = self
            .targets
            .iter()
            .map(|(t, s)| {
                let (ended, ready) = s.counts();
                (*t, ended, ready)
            })
            .collect();
        let sending = self.channels.lock().sending();
        let detail = || {
            format!(
                "edge {edge}: messages queued per worker {pending:?}, in flight: {sending}; \
                 (target, sources ended, messages ready) {waiting:?} of {} sources",
                self.spec.sources.len()
            )
        };
        Ok(self.channels.wait(&self.source_workers, &detail)?)
    }

    /// Resets the wait state after progress.
    pub(crate) fn moved(&mut self) {
        self.channels.moved();
    }

    /// Bytes held in the edge's receive buffer now, and at most so far.
    pub(crate) fn buffered(&self) -> (u64, u64) {
        self.channels.buffered()
    }
}

/// A dataflow operation on one worker: the shared machinery plus its semantics `S`.
pub struct Dataflow<S: Semantics> {
    pub(crate) core: EdgeCore,
    pub(crate) sem: S,
    pub(crate) out: HashMap<TaskId, VecDeque<Event<S::Out>>>,
    pub(crate) error: Option<Error>,
    /// Events handed out since the last `progress`.
    pub(crate) polled: usize,
}

impl<S: Semantics> std::fmt::Debug for Dataflow<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dataflow")
            .field("edge", &self.core.spec.edge)
            .field("mode", &self.core.mode)
            .finish_non_exhaustive()
    }
}

impl<S: Semantics> Dataflow<S> {
    pub(crate) fn from_parts(core: EdgeCore, sem: S) -> Self {
        let out = core.local_targets.iter().map(|&t| (t, VecDeque::new())).collect();
        Dataflow { core, sem, out, error: None, polled: 0 }
    }

    /// Bytes held in this worker's receive buffer for the edge, now and at most so far.
    pub fn buffered_bytes(&self) -> (u64, u64) {
        self.core.buffered()
    }
}

impl<S: Semantics> Operation for Dataflow<S> {
    type In = S::In;
    type Out = S::Out;

    fn offer(&mut self, source: TaskId, item: S::In) -> Result<Offer<S::In>> {
        self.core.check_source(source)?;
        self.sem.offer(&mut self.core, source, item)
    }

    fn finish(&mut self, source: TaskId) -> Result<()> {
        self.core.check_source(source)?;
        self.sem.finish(&mut self.core, source)
    }

    fn barrier(&mut self, source: TaskId, id: u64) -> Result<()> {
        self.core.barrier(source, id)
    }

    fn progress(&mut self) -> Result<bool> {
        self.polled = 0;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        let folds = self.sem.folds(self.core.mode);
        let sem = &mut self.sem;
        let moved = self.core.progress(folds, &mut |p| sem.combine(p))?;
        if moved {
            self.core.moved();
        }
        Ok(moved)
    }

    fn poll(&mut self, target: TaskId) -> Option<Event<S::Out>> {
        self.next_event(target)
    }

    fn is_done(&self) -> bool {
        self.core.is_done() && self.out.values().all(VecDeque::is_empty) && !self.sem.has_results()
    }

    fn local_targets(&self) -> Vec<TaskId> {
        self.core.local_targets.clone()
    }

    fn wait(&mut self) -> Result<()> {
        self.core.wait()
    }

    fn bytes_sent(&self, source: TaskId) -> u64 {
        self.core.bytes_sent.get(&source).copied().unwrap_or(0)
    }

    fn bytes_received(&self, target: TaskId) -> u64 {
        self.core.bytes_received.get(&target).copied().unwrap_or(0)
    }
}
