//! A task instance as the executor drives it: when it may run (its strategy, its input,
//! room on its outputs), and its life cycle.

use std::sync::Arc;
use std::time::Instant;

use heddle_comm::Communicator;

use super::barriers::Barriers;
use super::inbox::{lock, SharedInbox};
use super::outputs::TaskOutput;
use super::task_common::Common;
use crate::{Compute, Error, Produced, Result, Source, Strategy, TaskInfo};

/// Records a compute task executes per activation of the executor loop before the loop
/// moves data again.
const STEP_RECORDS: usize = 4096;

/// How long a compute task executes records per activation, at most (checked every 64
/// records), before the loop moves data again.
const STEP_TIME: std::time::Duration = std::time::Duration::from_millis(2);

/// What one task did in a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) moved: bool,
}

/// Counters of one task instance.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct TaskStats {
    /// The task, as `name[index]`.
    pub task: String,
    /// Worker that ran it.
    pub worker: usize,
    /// Records executed (compute) or `next` calls (source).
    pub executed: u64,
    /// Timed activations.
    pub ticks: u64,
    /// Records emitted.
    pub emitted: u64,
    /// Records that arrived after the task retired (its strategy's `at_most`).
    pub discarded: u64,
    /// What its process used, for a task run as an isolated process.
    pub process: Option<crate::ProcessUsage>,
}

/// A type-erased task instance.
pub(crate) trait TaskRun: Send {
    fn prepare(&mut self, iteration: &[u64]) -> Result<()>;
    /// Starts a pass over the input (an iteration).
    fn begin_pass(&mut self, now: Instant);
    fn step(&mut self, now: Instant, iteration: &[u64]) -> Result<Step>;
    /// Whether the task ended its outputs for this pass.
    fn pass_done(&self) -> bool;
    /// When the task next wants to run without input (a timer), if ever.
    fn next_wake(&self) -> Option<Instant>;
    fn close(&mut self, iteration: &[u64]) -> Result<()>;
    fn stats(&self) -> TaskStats;
    /// A stop was requested: sources end their output (compute tasks drain as usual).
    fn stop(&mut self) {}
    /// The pass is over (everything delivered).
    fn end_pass(&mut self) {}
    /// Takes part in the job's checkpoints from now on; `restored` is the checkpoint the
    /// job resumed from (0: none).
    fn checkpoints(&mut self, barriers: Arc<Barriers>, restored: u64);
    /// Reports to `observed` from now on.
    fn observe(&mut self, observed: super::observe::Observed);
    /// Restores the state of a completed checkpoint, and the records it held in flight
    /// to or from the task (before `prepare`).
    fn restore(&mut self, state: Option<&[u8]>, inflight: Option<&[u8]>) -> Result<()>;
    /// The task's state for checkpoint `id`, taken now (between passes).
    fn snapshot_state(&mut self, id: u64) -> Result<Option<Vec<u8>>>;
    /// Snapshots the checkpoint triggered last if the task has not, and tells it of the
    /// last completed one (a task that ended its pass still takes part). Returns whether
    /// it did anything.
    fn checkpoint_ended(&mut self, iteration: &[u64]) -> Result<bool>;
}

/// A source instance.
pub(crate) struct SourceRun<S: Source> {
    task: S,
    common: Common<S::Out>,
}

impl<S: Source> SourceRun<S>
where
    S::Out: Clone,
{
    pub(crate) fn new(
        task: S,
        info: TaskInfo,
        outs: Vec<Arc<dyn TaskOutput<S::Out>>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Self {
        SourceRun { task, common: Common::new(info, outs, strategy, comm) }
    }
}

impl<S: Source> TaskRun for SourceRun<S>
where
    S::Out: Clone,
{
    fn prepare(&mut self, iteration: &[u64]) -> Result<()> {
        let task = &mut self.task;
        self.common.call(iteration, |ctx| task.prepare(ctx))
    }

    fn begin_pass(&mut self, _now: Instant) {
        self.common.done = false;
        self.common.next_tick = None;
    }

    fn step(&mut self, now: Instant, iteration: &[u64]) -> Result<Step> {
        if self.common.barriers.is_some() && self.checkpoint_ended(iteration)? {
            return Ok(Step { moved: true });
        }
        let c = &mut self.common;
        if c.done || !c.outputs_have_room() {
            return Ok(Step::default());
        }
        if c.retired() {
            c.finish_outputs();
            return Ok(Step { moved: true });
        }
        if c.strategy.period().is_some() && !c.tick_due(now) {
            return Ok(Step::default());
        }
        let task = &mut self.task;
        let emitted = c.stats.emitted;
        let produced = c.call(iteration, |ctx| task.next(ctx))?;
        c.runs += 1;
        c.stats.executed += 1;
        if produced == Produced::Done || c.retired() {
            c.finish_outputs();
            return Ok(Step { moved: true });
        }
        // A source with nothing to give right now (an idle socket) lets the job wait.
        Ok(Step { moved: c.stats.emitted > emitted })
    }

    fn pass_done(&self) -> bool {
        self.common.done
    }

    fn next_wake(&self) -> Option<Instant> {
        self.common.next_wake()
    }

    fn close(&mut self, iteration: &[u64]) -> Result<()> {
        let task = &mut self.task;
        self.common.call(iteration, |ctx| task.close(ctx))
    }

    fn stats(&self) -> TaskStats {
        self.common.stats.clone()
    }

    fn stop(&mut self) {
        self.common.finish_outputs();
    }

    fn checkpoints(&mut self, barriers: Arc<Barriers>, restored: u64) {
        self.common.take_part(barriers, restored);
    }

    fn observe(&mut self, observed: super::observe::Observed) {
        self.common.observed = Some(observed);
    }

    fn restore(&mut self, state: Option<&[u8]>, inflight: Option<&[u8]>) -> Result<()> {
        let task = &mut self.task;
        if let Some(state) = state {
            self.common.call(&[], |ctx| task.restore(ctx, state))?;
        }
        let inputs = self.common.restore_outputs(inflight)?;
        if !inputs.is_empty() {
            return Err(Error::Graph(format!(
                "a checkpoint holds input records for source {}",
                self.common.info
            )));
        }
        Ok(())
    }

    fn snapshot_state(&mut self, id: u64) -> Result<Option<Vec<u8>>> {
        let task = &mut self.task;
        self.common.call(&[], |ctx| task.snapshot(ctx, id))
    }

    fn checkpoint_ended(&mut self, iteration: &[u64]) -> Result<bool> {
        let task = &mut self.task;
        let mut moved = false;
        if let Some(id) = self.common.due_checkpoint().filter(|_| !self.common.pending()) {
            self.common.snapshot(id, iteration, &mut |ctx, id| task.snapshot(ctx, id), None)?;
            moved = true;
        }
        moved |= self.common.settle(Some(None));
        moved |= self.common.notify(iteration, &mut |ctx, id| task.committed(ctx, id))?;
        Ok(moved)
    }
}

/// A compute (or sink) instance.
pub(crate) struct ComputeRun<C: Compute> {
    task: C,
    common: Common<C::Out>,
    inbox: SharedInbox<C::In>,
    inputs: usize,
    /// `end_of_input` ran this pass: `drain` until it is done.
    draining: bool,
}

impl<C: Compute> ComputeRun<C>
where
    C::Out: Clone,
{
    pub(crate) fn new(
        task: C,
        info: TaskInfo,
        inbox: SharedInbox<C::In>,
        inputs: usize,
        outs: Vec<Arc<dyn TaskOutput<C::Out>>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Self {
        ComputeRun {
            task,
            common: Common::new(info, outs, strategy, comm),
            inbox,
            inputs,
            draining: false,
        }
    }

    /// A retired task: what still arrives is counted and dropped; its outputs end.
    /// Returns whether anything changed.
    fn retire(&mut self) -> bool {
        let dropped = std::mem::take(&mut lock(&self.inbox).items).len() as u64;
        self.common.stats.discarded += dropped;
        let mut moved = dropped > 0;
        if !self.common.done {
            self.common.finish_outputs();
            moved = true;
        }
        moved
    }

    /// Executes up to `limit` waiting records (fewer if the task retires).
    fn execute_waiting(&mut self, iteration: &[u64], limit: usize) -> Result<bool> {
        // Within what the strategy still allows, take a batch off the inbox and execute it
        // in one context (one flush of what it emits).
        let allowed = self
            .common
            .strategy
            .max_runs()
            .map_or(usize::MAX, |k| k.saturating_sub(self.common.runs) as usize);
        let take = limit.min(allowed);
        let batch: Vec<C::In> = {
            let mut inbox = lock(&self.inbox);
            let n = take.min(inbox.items.len());
            inbox.items.drain(..n).collect()
        };
        if batch.is_empty() {
            return Ok(false);
        }
        let task = &mut self.task;
        let before = self.common.strategy;
        let mut items = batch.into_iter();
        let mut done = 0u64;
        let started = Instant::now();
        self.common.call(iteration, |ctx| {
            for item in items.by_ref() {
                task.execute(ctx, item)?;
                done += 1;
                if ctx.strategy() != before {
                    break; // the rest waits for the new strategy
                }
                // A slow task yields now and then: edges, timers and checkpoints go on.
                if done.is_multiple_of(64) && started.elapsed() >= STEP_TIME {
                    break;
                }
            }
            task.executed(ctx)
        })?;
        // What the call left goes back in front, in order.
        let mut inbox = lock(&self.inbox);
        for item in items.rev() {
            inbox.items.push_front(item);
        }
        self.common.runs += done;
        self.common.stats.executed += done;
        if let Some(o) = &self.common.observed {
            o.took(done);
        }
        Ok(true)
    }
}

impl<C: Compute> TaskRun for ComputeRun<C>
where
    C::Out: Clone,
{
    fn prepare(&mut self, iteration: &[u64]) -> Result<()> {
        let task = &mut self.task;
        self.common.call(iteration, |ctx| task.prepare(ctx))
    }

    fn begin_pass(&mut self, _now: Instant) {
        self.common.done = false;
        self.draining = false;
        self.common.next_tick = None;
        lock(&self.inbox).begin_pass();
    }

    fn step(&mut self, now: Instant, iteration: &[u64]) -> Result<Step> {
        let mut moved = false;
        if self.common.barriers.is_some() {
            moved |= self.checkpoint_ended(iteration)?;
        }
        if self.common.retired() {
            return Ok(Step { moved: self.retire() });
        }
        if self.common.done || !self.common.outputs_have_room() {
            return Ok(Step::default());
        }
        if self.common.strategy.runs_on_data() {
            moved |= self.execute_waiting(iteration, STEP_RECORDS)?;
            if self.common.barriers.is_some() {
                moved |= self.checkpoint_ended(iteration)?;
            }
        }
        if self.common.tick_due(now) && !self.common.retired() {
            if !self.common.strategy.runs_on_data() {
                moved |= self.execute_waiting(iteration, usize::MAX)?;
            }
            if !self.common.retired() {
                let (task, emitted) = (&mut self.task, self.common.stats.emitted);
                self.common.call(iteration, |ctx| task.tick(ctx))?;
                self.common.runs += 1;
                self.common.stats.ticks += 1;
                // A tick that gave nothing does not keep the job from napping (its next
                // tick bounds the nap).
                moved |= self.common.stats.emitted > emitted || self.common.retired();
            }
        }
        let ended = {
            let inbox = lock(&self.inbox);
            inbox.ended >= self.inputs && inbox.items.is_empty()
        };
        if ended && !self.common.done {
            let task = &mut self.task;
            if self.draining {
                if self.common.call(iteration, |ctx| task.drain(ctx))? == Produced::Done {
                    self.draining = false;
                    self.common.finish_outputs();
                }
            } else {
                self.common.call(iteration, |ctx| task.end_of_input(ctx))?;
                self.draining = true;
            }
            moved = true;
        } else if self.common.retired() {
            moved |= self.retire();
        }
        Ok(Step { moved })
    }

    fn end_pass(&mut self) {
        if self.common.retired() {
            self.retire();
        }
    }

    fn pass_done(&self) -> bool {
        self.common.done
    }

    fn next_wake(&self) -> Option<Instant> {
        self.common.next_wake()
    }

    fn close(&mut self, iteration: &[u64]) -> Result<()> {
        let task = &mut self.task;
        self.common.call(iteration, |ctx| task.close(ctx))
    }

    fn stats(&self) -> TaskStats {
        TaskStats { process: self.task.usage(), ..self.common.stats.clone() }
    }

    fn checkpoints(&mut self, barriers: Arc<Barriers>, restored: u64) {
        self.common.take_part(barriers, restored);
    }

    fn observe(&mut self, observed: super::observe::Observed) {
        self.common.observed = Some(observed);
    }

    fn restore(&mut self, state: Option<&[u8]>, inflight: Option<&[u8]>) -> Result<()> {
        let task = &mut self.task;
        if let Some(state) = state {
            self.common.call(&[], |ctx| task.restore(ctx, state))?;
        }
        let inputs = self.common.restore_outputs(inflight)?;
        if !inputs.is_empty() {
            lock(&self.inbox).restore(&inputs)?;
        }
        Ok(())
    }

    fn snapshot_state(&mut self, id: u64) -> Result<Option<Vec<u8>>> {
        let task = &mut self.task;
        self.common.call(&[], |ctx| task.snapshot(ctx, id))
    }

    /// A running task snapshots once its inputs have aligned on the barrier, or, once the
    /// checkpoint is overdue, as soon as the barrier has arrived on one input (unaligned:
    /// its queue is copied, and what its other inputs deliver before their barriers); one
    /// that ended its pass (its inputs all ended) as soon as a checkpoint is triggered.
    fn checkpoint_ended(&mut self, iteration: &[u64]) -> Result<bool> {
        let task = &mut self.task;
        let mut moved = false;
        let due = if self.common.pending() {
            None
        } else if self.common.done {
            lock(&self.inbox).retire();
            self.common.due_checkpoint().map(|id| (id, None))
        } else {
            let overdue = self.common.barriers.as_ref().is_some_and(|b| b.overdue());
            let mut inbox = lock(&self.inbox);
            match inbox.aligned() {
                Some(id) => Some((id, None)),
                None if overdue => {
                    let due = self.common.due_checkpoint();
                    inbox.go_unaligned(due).map(|(id, copy)| (id, Some(copy)))
                }
                None => None,
            }
        };
        if let Some((id, inputs)) = due {
            let aligned = inputs.is_none();
            self.common.snapshot(id, iteration, &mut |ctx, id| task.snapshot(ctx, id), inputs)?;
            if aligned {
                lock(&self.inbox).release();
            }
            moved = true;
        }
        if self.common.pending() {
            let captured = {
                let mut inbox = lock(&self.inbox);
                if inbox.capturing() {
                    inbox.captured().map(Some)
                } else {
                    Some(None)
                }
            };
            moved |= self.common.settle(captured);
        }
        moved |= self.common.notify(iteration, &mut |ctx, id| task.committed(ctx, id))?;
        Ok(moved)
    }
}
