//! What source and compute runs share: a task instance's identity, outputs, strategy,
//! counters, and its part in checkpoints.

use std::sync::Arc;
use std::time::Instant;

use heddle_comm::Communicator;

use super::barriers::{Barriers, Taken};
use super::outputs::{Outputs, TaskOutput};
use super::task_run::TaskStats;
use crate::checkpoint::Inflight;
use crate::{Context, Error, Result, Strategy, TaskInfo};

/// What source and compute runs share: identity, outputs, strategy, counters.
pub(crate) struct Common<O> {
    pub(crate) info: TaskInfo,
    pub(crate) outputs: Outputs<O>,
    pub(crate) strategy: Strategy,
    pub(crate) comm: Option<Communicator>,
    pub(crate) next_tick: Option<Instant>,
    /// The wake-up the task asked for in its last call ([`Context::wake_at`]).
    pub(crate) wake: Option<Instant>,
    pub(crate) runs: u64,
    pub(crate) stats: TaskStats,
    pub(crate) done: bool,
    /// The job's checkpoints, when it takes them.
    pub(crate) barriers: Option<Arc<Barriers>>,
    /// Live counters for the dashboard and `/metrics`.
    pub(crate) observed: Option<super::observe::Observed>,
    /// The last checkpoint this task snapshotted, and the last it was told completed.
    pub(crate) snapshotted: u64,
    pub(crate) notified: u64,
    /// A snapshot not yet handed on: its barrier has not left every outbox, or (unaligned)
    /// records in flight to the task are still being copied.
    pending: Option<Pending>,
}

/// A snapshot taken and not yet handed on.
struct Pending {
    id: u64,
    state: Option<Vec<u8>>,
    /// Unaligned: the records the task's queue held (or why they could not be copied).
    inputs: Option<Result<Vec<u8>>>,
}

/// A task's snapshot function: its state at checkpoint `id`.
type SnapshotFn<'t, O> = &'t mut dyn FnMut(&mut Context<'_, O>, u64) -> Result<Option<Vec<u8>>>;
/// A task's completion function.
type CommittedFn<'t, O> = &'t mut dyn FnMut(&mut Context<'_, O>, u64) -> Result<()>;

impl<O: Clone> Common<O> {
    pub(crate) fn new(
        info: TaskInfo,
        outs: Vec<Arc<dyn TaskOutput<O>>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Self {
        let stats =
            TaskStats { task: info.to_string(), worker: info.worker, ..TaskStats::default() };
        Common {
            info,
            outputs: Outputs::new(outs),
            strategy,
            comm,
            next_tick: None,
            wake: None,
            runs: 0,
            stats,
            done: false,
            barriers: None,
            observed: None,
            snapshotted: 0,
            notified: 0,
            pending: None,
        }
    }

    /// Takes part in the job's checkpoints from now on, resumed from `restored`.
    pub(crate) fn take_part(&mut self, barriers: Arc<Barriers>, restored: u64) {
        self.barriers = Some(barriers);
        self.snapshotted = restored;
        self.notified = restored;
    }

    /// A checkpoint triggered on this worker that the task has not snapshotted yet.
    pub(crate) fn due_checkpoint(&self) -> Option<u64> {
        let b = self.barriers.as_ref()?;
        Some(b.triggered()).filter(|&t| t > self.snapshotted)
    }

    /// Snapshots the task at checkpoint `id` and sends its barrier on every output after
    /// everything emitted before it — or, once the checkpoint is overdue or gone unaligned
    /// at this task (`inputs`: the records its queue held), ahead of what still waits in
    /// its outboxes. The snapshot is handed on by [`Common::settle`].
    pub(crate) fn snapshot(
        &mut self,
        id: u64,
        iteration: &[u64],
        f: SnapshotFn<'_, O>,
        inputs: Option<Result<Vec<u8>>>,
    ) -> Result<()> {
        let state = self.call(iteration, |ctx| f(ctx, id))?;
        self.snapshotted = id;
        if !self.done {
            let overdue = self.barriers.as_ref().is_some_and(|b| b.overdue());
            self.outputs.barrier(id, inputs.is_some() || overdue);
        }
        self.pending = Some(Pending { id, state, inputs });
        Ok(())
    }

    /// Puts back the records a restored checkpoint's barriers had overtaken in the task's
    /// outboxes; returns the records it held in flight to the task.
    ///
    /// # Errors
    /// A damaged record list.
    pub(crate) fn restore_outputs(&mut self, inflight: Option<&[u8]>) -> Result<Vec<u8>> {
        let Some(bytes) = inflight else { return Ok(Vec::new()) };
        let inflight = Inflight::from_bytes(bytes)?;
        for (k, records) in &inflight.outputs {
            self.outputs.restore(*k, records)?;
        }
        Ok(inflight.inputs)
    }

    /// Whether a snapshot waits to be handed on.
    pub(crate) fn pending(&self) -> bool {
        self.pending.is_some()
    }

    /// Hands the pending snapshot on to be written, once its barrier has left every
    /// outbox and `captured` (what the task's inputs delivered before their barriers,
    /// when unaligned) is complete: `None` while it is not. Returns whether it did.
    pub(crate) fn settle(&mut self, captured: Option<Option<Result<Vec<u8>>>>) -> bool {
        let Some(p) = &self.pending else { return false };
        let Some(captured) = captured else { return false };
        if !self.outputs.barriers_left(p.id) {
            return false;
        }
        let Some(p) = self.pending.take() else { return false };
        let copied = (|| -> Result<Inflight> {
            let mut inputs = p.inputs.transpose()?.unwrap_or_default();
            inputs.extend(captured.transpose()?.unwrap_or_default());
            Ok(Inflight { inputs, outputs: self.outputs.overtaken(p.id)? })
        })();
        let (inflight, error) = match copied {
            Ok(f) if f.is_empty() => (None, None),
            Ok(f) => (Some(f.to_bytes()), None),
            Err(e) => (None, Some(format!("its records in flight: {e}"))),
        };
        if let Some(b) = &self.barriers {
            let task = self.info.task;
            b.push(Taken { checkpoint: p.id, task, state: p.state, inflight, error });
        }
        true
    }

    /// Tells the task of a checkpoint completed since it was last told.
    pub(crate) fn notify(&mut self, iteration: &[u64], f: CommittedFn<'_, O>) -> Result<bool> {
        let Some(b) = &self.barriers else { return Ok(false) };
        let completed = b.completed();
        if completed <= self.notified {
            return Ok(false);
        }
        self.notified = completed;
        self.call(iteration, |ctx| f(ctx, completed))?;
        Ok(true)
    }

    /// Calls `f` with a context, then moves what it emitted to every output.
    pub(crate) fn call<R>(
        &mut self,
        iteration: &[u64],
        f: impl FnOnce(&mut Context<'_, O>) -> Result<R>,
    ) -> Result<R> {
        let before = self.strategy;
        self.wake = None;
        let mut ctx = Context {
            out: &mut self.outputs.emitted,
            info: &self.info,
            comm: self.comm.as_ref(),
            strategy: &mut self.strategy,
            iteration,
            wake: &mut self.wake,
        };
        let r = f(&mut ctx).map_err(|e| match e {
            Error::Task { .. } => e,
            Error::Raised { kind, source, .. } => {
                Error::Raised { task: self.info.to_string(), kind, source }
            }
            other => Error::Task { task: self.info.to_string(), message: other.to_string() },
        })?;
        if self.strategy.period() != before.period() {
            self.next_tick = None;
        }
        let emitted = self.outputs.flush();
        self.stats.emitted += emitted;
        if let Some(o) = &self.observed {
            o.gave(emitted);
        }
        Ok(r)
    }

    pub(crate) fn outputs_have_room(&mut self) -> bool {
        let room = self.outputs.have_room();
        if let Some(o) = &mut self.observed {
            o.room(room);
        }
        room
    }

    pub(crate) fn finish_outputs(&mut self) {
        if !self.done {
            self.done = true;
            self.outputs.finish();
        }
    }

    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let asked = match (self.next_tick, self.wake) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        asked.filter(|_| !self.done)
    }

    pub(crate) fn retired(&self) -> bool {
        self.strategy.max_runs().is_some_and(|k| self.runs >= k)
    }

    /// Whether a timed activation is due (arming the timer on first sight), or the
    /// wake-up the task asked for.
    pub(crate) fn tick_due(&mut self, now: Instant) -> bool {
        if self.wake.is_some_and(|w| now >= w) {
            self.wake = None;
            return true;
        }
        let Some(period) = self.strategy.period() else { return false };
        match self.next_tick {
            None => {
                self.next_tick = Some(now + period);
                false
            }
            Some(t) if now >= t => {
                self.next_tick = Some(t + period).filter(|n| *n > now).or(Some(now + period));
                true
            }
            Some(_) => false,
        }
    }
}
