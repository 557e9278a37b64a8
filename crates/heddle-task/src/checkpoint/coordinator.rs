//! One worker's side of a job's checkpoints, and on rank 0 the coordinator: triggers at
//! the interval, collects acknowledgements, commits, tells every worker.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_comm::{Communicator, EdgeChannels, Envelope, Kind};
use heddle_dataflow::TaskId;

use super::protocol::Message;
use super::store::{Commit, Store, TaskFile};
use super::writer::Writer;

#[path = "coordinate.rs"]
mod coordinate;
use super::{CheckpointStats, Checkpointing};
use crate::exec::barriers::Barriers;
use crate::{Error, Result};
use coordinate::{Coordinator, InFlight};

/// Complete checkpoints kept; older ones are removed.
const KEEP: usize = 2;
/// Bytes of control messages in flight from each worker.
const WINDOW: u64 = 1 << 20;
/// How often the control edge polls the links itself.
const POLL_EVERY: Duration = Duration::from_micros(200);

/// A checkpoint's progress on this worker.
#[derive(Debug, Default)]
struct Local {
    /// Snapshots handed in by this worker's tasks (the states then sealed at all tasks).
    handed: usize,
    written: usize,
    bytes: u64,
    states: Vec<TaskId>,
    unaligned: usize,
    error: Option<String>,
}

/// Opens the store of `kind` checkpoints in `dir` and finds the newest complete one
/// (collective: rank 0 reads it and sends it, or its error, to every worker, so that
/// every worker resumes from the same one or reports the same error).
///
/// # Errors
/// [`Error::Checkpoint`]: a directory that cannot be used, a damaged checkpoint or one of
/// another job or graph.
pub(crate) fn agree_latest(
    comm: &Communicator,
    dir: &std::path::Path,
    job: &str,
    graph: &str,
    kind: &'static str,
) -> Result<(Store, Option<Commit>)> {
    type Found = std::result::Result<Option<Commit>, (String, String)>;
    let opened = Store::open(dir, job, graph, kind);
    let here = || dir.display().to_string();
    let mut found: Found = Ok(None);
    if comm.rank() == 0 {
        found = match &opened {
            Ok(store) => store.latest().map_err(|e| match e {
                Error::Checkpoint { path, message } => (path, message),
                other => (here(), other.to_string()),
            }),
            Err(e) => Err((here(), e.to_string())),
        };
    }
    let mut bytes = serde_json::to_vec(&found).unwrap_or_default();
    let mut len = [bytes.len() as u64];
    comm.broadcast(&mut len, 0)?;
    bytes.resize(len[0] as usize, 0);
    comm.broadcast(&mut bytes, 0)?;
    let found: Found = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| Err((here(), format!("rank 0's answer does not parse: {e}"))));
    let store = opened?;
    let restored = found.map_err(|(path, message)| Error::Checkpoint { path, message })?;
    Ok((store, restored))
}

/// A job's checkpoints on this worker.
pub(crate) struct Checkpoints {
    rank: usize,
    /// The world rank of each rank of the job's communicator.
    world: Vec<usize>,
    edge: EdgeChannels,
    outgoing: VecDeque<(usize, Message)>,
    sequence: u64,
    store: Store,
    graph: String,
    job: String,
    barriers: Arc<Barriers>,
    tasks: Vec<TaskId>,
    writer: Writer,
    local: BTreeMap<u64, Local>,
    /// The last checkpoint's id once it was triggered, and whether it completed.
    last: Option<(u64, bool)>,
    /// The checkpoint completed before the newest one (states older go).
    previous: u64,
    coordinator: Option<Coordinator>,
    /// When the control edge next polls the links itself.
    next_poll: Instant,
}

impl Checkpoints {
    /// Opens the store and the control edge `edge`, and finds the checkpoint to resume
    /// from (collective: rank 0 reads it and tells every worker).
    ///
    /// # Errors
    /// [`Error::Checkpoint`]: a directory that cannot be used, a damaged checkpoint or
    /// one of another job or graph.
    #[allow(clippy::too_many_arguments)] // the job's parts it works with
    pub(crate) fn start(
        comm: &Communicator,
        config: &Checkpointing,
        graph: String,
        edge: u32,
        tasks: Vec<TaskId>,
        barriers: Arc<Barriers>,
        store: Store,
        restored: Option<&Commit>,
    ) -> Result<Checkpoints> {
        let from = restored.map_or(0, |c| c.checkpoint);
        // States of checkpoints after it never completed: an earlier attempt's.
        store.prune(&tasks, &|id| id > from, None);
        let writer = Writer::start(store.clone(), comm.waker()).map_err(|e| Error::Checkpoint {
            path: config.dir.display().to_string(),
            message: e.to_string(),
        })?;
        let coordinator = (comm.rank() == 0).then(|| Coordinator {
            interval: config.interval,
            next_due: Instant::now() + config.interval.unwrap_or(Duration::ZERO),
            next_id: from + 1,
            in_flight: None,
            finished: HashSet::new(),
            last_triggered: false,
            stats: Vec::new(),
        });
        let edge = comm.open_edge(edge, WINDOW)?;
        edge.prioritize(); // triggers and acknowledgements must not wait behind data
        let checkpoints = Checkpoints {
            rank: comm.rank(),
            world: (0..comm.size()).map(|r| comm.world_rank(r)).collect(),
            edge,
            outgoing: VecDeque::new(),
            sequence: 0,
            store,
            graph,
            job: config.job.clone(),
            barriers,
            tasks,
            writer,
            local: BTreeMap::new(),
            last: None,
            previous: from,
            coordinator,
            next_poll: Instant::now(),
        };
        Ok(checkpoints)
    }

    /// Task `task`'s state in checkpoint `commit`, if it kept one.
    ///
    /// # Errors
    /// [`Error::Checkpoint`]: a missing or damaged state file.
    pub(crate) fn state(&self, commit: &Commit, task: TaskId) -> Result<Option<TaskFile>> {
        if !commit.states.contains(&task) {
            return Ok(None);
        }
        self.store.read_state(commit.checkpoint, task).map(Some)
    }

    /// This worker's tasks have all ended: the coordinator takes the last checkpoint once
    /// every worker's have.
    pub(crate) fn finished(&mut self) {
        self.send(0, Message::Finished);
    }

    /// Whether the last checkpoint completed (the job may end).
    pub(crate) fn all_done(&self) -> bool {
        self.last.is_some_and(|(_, done)| done)
    }

    /// Sends every control message still queued (the last checkpoint's completion, to
    /// every worker) before this worker leaves the job: nothing else moves the links then.
    ///
    /// # Errors
    /// A lost peer.
    pub(crate) fn drain(&mut self) -> Result<()> {
        loop {
            self.flush()?;
            let mut io = self.edge.lock();
            io.poll()?;
            if self.outgoing.is_empty() && !io.sending() {
                return Ok(());
            }
            drop(io);
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// What the completed checkpoints took (rank 0; empty elsewhere).
    pub(crate) fn stats(&self) -> Vec<CheckpointStats> {
        self.coordinator.as_ref().map(|c| c.stats.clone()).unwrap_or_default()
    }

    /// Waits a little after a poll that moved nothing, while this worker's tasks have
    /// ended and others' go on (for as long as they take: a stream may run for days; a
    /// lost peer or an abort ends the wait through the polls).
    pub(crate) fn wait(&mut self) {
        std::thread::sleep(POLL_EVERY);
    }

    /// Moves checkpoints along: hands new snapshots to the writer, acknowledges, takes
    /// the coordinator's messages, and on rank 0 triggers and completes. Returns whether
    /// anything moved.
    ///
    /// # Errors
    /// A lost peer, or the last checkpoint failing (the job's output is not committed).
    pub(crate) fn poll(&mut self) -> Result<bool> {
        let mut moved = false;
        let mut sealed = Vec::new();
        for taken in self.barriers.take() {
            moved = true;
            let local = self.local.entry(taken.checkpoint).or_default();
            local.handed += 1;
            local.unaligned += usize::from(taken.inflight.is_some());
            if local.handed == self.tasks.len() {
                sealed.push(taken.checkpoint);
            }
            tracing::debug!(checkpoint = taken.checkpoint, task = %taken.task, "snapshot taken");
            match (taken.error, taken.state, taken.inflight) {
                (Some(e), ..) => self.note(taken.checkpoint, taken.task, Err(e)),
                (None, None, None) => self.note(taken.checkpoint, taken.task, Ok(None)),
                (None, state, inflight) => {
                    self.writer.write(taken.checkpoint, taken.task, (state, inflight))
                }
            }
        }
        for id in sealed {
            self.writer.seal(id);
        }
        for w in self.writer.written() {
            moved = true;
            self.note(w.checkpoint, w.task, w.result.map(Some));
        }
        let ready: Vec<u64> = self
            .local
            .iter()
            .filter(|(_, l)| l.written >= self.tasks.len())
            .map(|(&id, _)| id)
            .collect();
        for id in ready {
            let l = self.local.remove(&id).unwrap_or_default();
            let reply = match l.error {
                Some(reason) => Message::Decline { id, reason },
                None => {
                    Message::Ack { id, bytes: l.bytes, states: l.states, unaligned: l.unaligned }
                }
            };
            tracing::debug!(checkpoint = id, "every local state written; acknowledging");
            self.send(0, reply);
            moved = true;
        }
        let mut arrived = Vec::new();
        {
            let mut io = self.edge.lock();
            // The job's edges poll the links all the time (which also brings in this
            // edge's messages); the control edge polls on its own only now and then, or
            // when it has something to send.
            let now = Instant::now();
            if now >= self.next_poll || !self.outgoing.is_empty() || io.sending() {
                moved |= io.poll()?;
                self.next_poll = now + POLL_EVERY;
            }
            while let Some(d) = io.recv() {
                let from = self.world.iter().position(|&w| w == d.from).unwrap_or(d.from);
                arrived.push((from, d.payload));
            }
        }
        for (from, payload) in arrived {
            moved = true;
            let Some(m) = Message::decode(&payload) else {
                eprintln!(
                    "heddle: warning: an unreadable checkpoint control message from rank {from}"
                );
                continue;
            };
            self.handle(from, m)?;
        }
        moved |= self.coordinate()?;
        moved |= self.flush()?;
        if moved {
            self.edge.moved();
        }
        Ok(moved)
    }

    /// A task's state of `id` written (with its size), skipped, or failed.
    fn note(&mut self, id: u64, task: TaskId, result: std::result::Result<Option<u64>, String>) {
        let l = self.local.entry(id).or_default();
        l.written += 1;
        match result {
            Ok(Some(bytes)) => {
                l.bytes += bytes;
                l.states.push(task);
            }
            Ok(None) => {}
            Err(e) => {
                l.error.get_or_insert(format!("task {task}'s state: {e}"));
            }
        }
    }

    fn handle(&mut self, from: usize, m: Message) -> Result<()> {
        match m {
            Message::Trigger { id, last } => {
                tracing::debug!(checkpoint = id, last, "checkpoint triggered");
                self.barriers.trigger(id);
                self.local.entry(id).or_default();
                // The last checkpoint is the last: nothing is triggered after it.
                if last && self.last.is_none() {
                    self.last = Some((id, false));
                }
            }
            Message::Complete { id } => {
                self.barriers.complete(id);
                let previous = std::mem::replace(&mut self.previous, id);
                self.store.prune(&self.tasks, &|c| c < previous, None);
                if let Some((last, done)) = &mut self.last {
                    *done |= *last == id;
                }
            }
            Message::Abort { id, reason } => {
                self.store.prune(&self.tasks, &|c| c == id, None);
                if self.last.is_some_and(|(last, _)| last == id) {
                    return Err(Error::Checkpoint {
                        path: self.store.dir().display().to_string(),
                        message: format!(
                            "the job's last checkpoint ({id}) failed, so its output is not \
                             committed: {reason}"
                        ),
                    });
                }
                eprintln!("heddle: warning: checkpoint {id} failed, the job goes on: {reason}");
            }
            Message::Ack { id, bytes, states, unaligned } => {
                tracing::debug!(checkpoint = id, rank = from, "acknowledgement");
                if let Some(f) = self.in_flight(id) {
                    f.acks.insert(from);
                    f.bytes += bytes;
                    f.states.extend(states);
                    f.unaligned += unaligned;
                }
            }
            Message::Decline { id, reason } => {
                if let Some(f) = self.in_flight(id) {
                    f.acks.insert(from);
                    f.declined.get_or_insert(format!("on rank {from}: {reason}"));
                }
            }
            Message::Finished => {
                if let Some(c) = &mut self.coordinator {
                    c.finished.insert(from);
                }
            }
        }
        Ok(())
    }

    fn in_flight(&mut self, id: u64) -> Option<&mut InFlight> {
        self.coordinator.as_mut()?.in_flight.as_mut().filter(|f| f.id == id)
    }

    /// Queues `m` for rank `to` (handled at once when it is this worker).
    fn send(&mut self, to: usize, m: Message) {
        self.outgoing.push_back((to, m));
    }

    /// Sends what credit allows; messages to this worker are handled here.
    fn flush(&mut self) -> Result<bool> {
        let mut moved = false;
        let me = self.rank;
        let mut own = Vec::new();
        let mut io = self.edge.lock();
        while let Some((to, m)) = self.outgoing.pop_front() {
            if to == me {
                own.push(m);
                continue;
            }
            self.sequence += 1;
            let env = Envelope {
                kind: Kind::Data,
                source: me as u32,
                target: to as u32,
                sequence: self.sequence,
            };
            if io.try_send(self.world[to], env, m.encode()).is_err() {
                self.outgoing.push_front((to, m));
                break;
            }
            moved = true;
        }
        drop(io);
        for m in own {
            moved = true;
            self.handle(me, m)?;
        }
        Ok(moved)
    }
}
