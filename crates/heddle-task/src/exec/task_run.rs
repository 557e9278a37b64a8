//! A task instance as the executor drives it: when it may run (its strategy, its input,
//! room on its outputs), and its life cycle.

use std::sync::Arc;
use std::time::Instant;

use heddle_comm::Communicator;

use super::queues::{lock, SharedInbox, TaskOutput, QUEUE_CAP};
use crate::{Compute, Context, Error, Produced, Result, Source, Strategy, TaskInfo};

/// Records a compute task executes per activation of the executor loop before the loop
/// moves data again.
const STEP_RECORDS: usize = 4096;

/// What one task did in a step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Step {
    pub(crate) moved: bool,
}

/// Counters of one task instance.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
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
}

/// What source and compute runs share: identity, outputs, strategy, counters.
struct Common<O> {
    info: TaskInfo,
    outs: Vec<Arc<dyn TaskOutput<O>>>,
    emitted: Vec<O>,
    strategy: Strategy,
    comm: Option<Communicator>,
    next_tick: Option<Instant>,
    runs: u64,
    stats: TaskStats,
    done: bool,
}

impl<O: Clone> Common<O> {
    fn new(
        info: TaskInfo,
        outs: Vec<Arc<dyn TaskOutput<O>>>,
        strategy: Strategy,
        comm: Option<Communicator>,
    ) -> Self {
        let stats =
            TaskStats { task: info.to_string(), worker: info.worker, ..TaskStats::default() };
        Common {
            info,
            outs,
            emitted: Vec::new(),
            strategy,
            comm,
            next_tick: None,
            runs: 0,
            stats,
            done: false,
        }
    }

    /// Calls `f` with a context, then moves what it emitted to every output.
    fn call<R>(
        &mut self,
        iteration: &[u64],
        f: impl FnOnce(&mut Context<'_, O>) -> Result<R>,
    ) -> Result<R> {
        let before = self.strategy;
        let mut ctx = Context {
            out: &mut self.emitted,
            info: &self.info,
            comm: self.comm.as_ref(),
            strategy: &mut self.strategy,
            iteration,
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
        self.flush();
        Ok(r)
    }

    fn flush(&mut self) {
        if self.emitted.is_empty() {
            return;
        }
        self.stats.emitted += self.emitted.len() as u64;
        if let Some((last, rest)) = self.outs.split_last() {
            for out in rest {
                let mut copy = self.emitted.clone();
                out.push(&mut copy);
            }
            last.push(&mut self.emitted);
        }
        self.emitted.clear();
    }

    fn outputs_have_room(&self) -> bool {
        self.outs.iter().all(|o| o.backlog() < QUEUE_CAP)
    }

    fn finish_outputs(&mut self) {
        if !self.done {
            self.done = true;
            for o in &self.outs {
                o.finish();
            }
        }
    }

    fn next_wake(&self) -> Option<Instant> {
        self.next_tick.filter(|_| !self.done)
    }

    fn retired(&self) -> bool {
        self.strategy.max_runs().is_some_and(|k| self.runs >= k)
    }

    /// Whether a timed activation is due (arming the timer on first sight).
    fn tick_due(&mut self, now: Instant) -> bool {
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
        self.common.call(iteration, |ctx| {
            for item in items.by_ref() {
                task.execute(ctx, item)?;
                done += 1;
                if ctx.strategy() != before {
                    break; // the rest waits for the new strategy
                }
            }
            Ok(())
        })?;
        let mut inbox = lock(&self.inbox);
        for (k, item) in items.enumerate() {
            inbox.items.insert(k, item);
        }
        self.common.runs += done;
        self.common.stats.executed += done;
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
        lock(&self.inbox).ended = 0;
    }

    fn step(&mut self, now: Instant, iteration: &[u64]) -> Result<Step> {
        let mut moved = false;
        if self.common.retired() {
            return Ok(Step { moved: self.retire() });
        }
        if self.common.done || !self.common.outputs_have_room() {
            return Ok(Step::default());
        }
        if self.common.strategy.runs_on_data() {
            moved |= self.execute_waiting(iteration, STEP_RECORDS)?;
        }
        if self.common.tick_due(now) && !self.common.retired() {
            if !self.common.strategy.runs_on_data() {
                moved |= self.execute_waiting(iteration, usize::MAX)?;
            }
            if !self.common.retired() {
                let task = &mut self.task;
                self.common.call(iteration, |ctx| task.tick(ctx))?;
                self.common.runs += 1;
                self.common.stats.ticks += 1;
                moved = true;
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
        self.common.stats.clone()
    }
}
