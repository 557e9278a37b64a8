//! What users implement: source tasks that produce records, and compute tasks (sinks are
//! compute tasks that emit nothing) that execute each record they receive. The life cycle
//! is DataCutter's: `prepare` once, `execute` per message, `close` once; with iterations,
//! `end_of_input` closes each pass over the input.

use crate::{Context, Result};

/// What a source reports after a call to [`Source::next`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Produced {
    /// More records remain: call `next` again.
    More,
    /// This pass (iteration) is over.
    Done,
}

/// A task that produces records. `next` should emit a bounded slice of records per call
/// (say a few thousand), so the executor can move them and keep memory bounded.
pub trait Source: Send + 'static {
    /// Records it emits.
    type Out: Send + 'static;

    /// Called once, before anything else.
    ///
    /// # Errors
    /// Any failure ends the job: a task's own error as [`crate::Error::Task`], or a lower
    /// layer's error carried whole as [`crate::Error::Raised`] (made by
    /// [`crate::Error::raised`]).
    fn prepare(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// Emits the next records with [`Context::emit`].
    ///
    /// # Errors
    /// As [`Source::prepare`].
    fn next(&mut self, ctx: &mut Context<'_, Self::Out>) -> Result<Produced>;

    /// Checkpoint `checkpoint`: this task's state now, as bytes (`None`, the default: it
    /// keeps none). Called at the task's checkpoint barrier, between two calls of
    /// `next`, on streaming jobs with checkpointing on; the bytes are written
    /// asynchronously while the job goes on. A source's state is its position (a byte
    /// offset, a sequence number), so that a restored job replays what followed it.
    ///
    /// # Errors
    /// As [`Source::prepare`].
    fn snapshot(
        &mut self,
        _ctx: &mut Context<'_, Self::Out>,
        _checkpoint: u64,
    ) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Restores the state [`Source::snapshot`] made, before [`Source::prepare`], when a
    /// job resumes from a completed checkpoint.
    ///
    /// # Errors
    /// As [`Source::prepare`].
    fn restore(&mut self, _ctx: &mut Context<'_, Self::Out>, _state: &[u8]) -> Result<()> {
        Ok(())
    }

    /// Checkpoint `checkpoint` completed on every task of the job (completions close
    /// together are told once, with the newest).
    ///
    /// # Errors
    /// As [`Source::prepare`].
    fn committed(&mut self, _ctx: &mut Context<'_, Self::Out>, _checkpoint: u64) -> Result<()> {
        Ok(())
    }

    /// Called once, after the last iteration.
    ///
    /// # Errors
    /// As [`Source::prepare`].
    fn close(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }
}

/// A task that executes the records it receives and may emit records of its own.
pub trait Compute: Send + 'static {
    /// Records it receives.
    type In: Send + 'static;
    /// Records it emits (`()` for a sink).
    type Out: Send + 'static;

    /// Called once, before anything else.
    ///
    /// # Errors
    /// Any failure ends the job: a task's own error as [`crate::Error::Task`], or a lower
    /// layer's error carried whole as [`crate::Error::Raised`] (made by
    /// [`crate::Error::raised`]).
    fn prepare(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// Executes one received record.
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn execute(&mut self, ctx: &mut Context<'_, Self::Out>, input: Self::In) -> Result<()>;

    /// Called after each batch of [`Compute::execute`] calls (the records that were
    /// waiting when the task ran), in the same context: a task that defers work per
    /// record (an isolated process, a vectorized kernel) finishes it here. Nothing else
    /// is called between the batch and this.
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn executed(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// A timed activation (see [`crate::Strategy::every`]), after the waiting input.
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn tick(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// Every input has ended for this pass (iteration): emit results that need all of it.
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn end_of_input(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// Called after [`Compute::end_of_input`], again and again while it returns
    /// [`Produced::More`] and whenever the task's outputs have room: results too many to
    /// emit in one call (a sorted partition, a large table) go out a bounded slice at a
    /// time, so memory stays bounded. The pass's outputs end when it returns
    /// [`Produced::Done`] (the default, at once).
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn drain(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<Produced> {
        Ok(Produced::Done)
    }

    /// Checkpoint `checkpoint`: this task's state now, as bytes (`None`, the default: it
    /// keeps none). Called once the checkpoint's barrier has arrived on every input and
    /// every record before it was executed (aligned), on streaming jobs with
    /// checkpointing on; the bytes are written asynchronously while the job goes on. A
    /// two-phase sink makes its pending output durable here (pre-commit) and publishes it
    /// in [`Compute::committed`].
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn snapshot(
        &mut self,
        _ctx: &mut Context<'_, Self::Out>,
        _checkpoint: u64,
    ) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }

    /// Restores the state [`Compute::snapshot`] made, before [`Compute::prepare`], when a
    /// job resumes from a completed checkpoint. A two-phase sink commits here what the
    /// restored checkpoint pre-committed (its completion may not have reached it).
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn restore(&mut self, _ctx: &mut Context<'_, Self::Out>, _state: &[u8]) -> Result<()> {
        Ok(())
    }

    /// Checkpoint `checkpoint` completed on every task of the job: publish what it covers
    /// (the commit of a two-phase sink). Every later restore starts at or after it.
    /// Completions that come close together are told once, with the newest: commit
    /// everything up to `checkpoint`.
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn committed(&mut self, _ctx: &mut Context<'_, Self::Out>, _checkpoint: u64) -> Result<()> {
        Ok(())
    }

    /// Called once, after the last iteration (or when the task retires).
    ///
    /// # Errors
    /// As [`Compute::prepare`].
    fn close(&mut self, _ctx: &mut Context<'_, Self::Out>) -> Result<()> {
        Ok(())
    }

    /// What the task's own process used, once it ended: `Some` for a task run as an
    /// isolated process ([`crate::Isolated`]); `None` (the default) for a thread.
    fn usage(&self) -> Option<crate::ProcessUsage> {
        None
    }
}

/// Identity of one task instance.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskInfo {
    /// The vertex's name.
    pub name: String,
    /// The instance's index among the vertex's `parallelism` instances.
    pub index: u32,
    /// Instances of the vertex.
    pub parallelism: u32,
    /// The instance's global task id (unique in the job).
    pub task: u32,
    /// Rank of the worker running it.
    pub worker: usize,
    /// What its vertex requested ([`crate::TaskGraph::resources`]): its contract.
    pub resources: crate::Resources,
}

impl std::fmt::Display for TaskInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}[{}]", self.name, self.index)
    }
}
