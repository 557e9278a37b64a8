//! Thread or isolated process (Squirrel's placement): a task instance runs as a thread
//! of its worker, or as a child process of its own, confined by control groups to its
//! contract ([`crate::Resources`]): a task over its memory contract is killed by the
//! kernel and the job fails naming the task, its contract and its peak, while the
//! worker and the other tasks go on until the job's abort; a task with `cpus = 0.5` gets
//! half a core however hard it spins.
//!
//! A vertex built with [`crate::TaskGraph::isolated`] (or whose instances are wrapped
//! in [`Isolated`]) is placed by its resources' [`Isolation`]: `Process`, `Thread`, or
//! `Auto` (the default: a process when there is a memory contract to enforce).
//!
//! ```
//! use heddle_task::{Compute, Context, Isolated, Isolation, Resources, Result};
//! struct Double;
//! impl Compute for Double {
//!     type In = u64;
//!     type Out = u64;
//!     fn execute(&mut self, ctx: &mut Context<'_, u64>, x: u64) -> Result<()> {
//!         ctx.emit(2 * x);
//!         Ok(())
//!     }
//! }
//! let _task = Isolated::new(Double);
//! let contract = Resources::new(0.5, 64 << 20).isolation(Isolation::Process);
//! assert_eq!(contract.isolation, Isolation::Process);
//! ```

mod confine;
mod fork_hooks;
mod process;

use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use confine::Confinement;
pub use confine::Enforcement;
pub use fork_hooks::{set_fork_hooks, CallFailed, ForkHooks};
use process::{Child, Reply, Request};

use crate::{Compute, Context, Error, Produced, Result};

/// Where a task instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// A process when the task has a memory or I/O contract to enforce, else a thread.
    #[default]
    Auto,
    /// A thread of its worker (nothing enforced).
    Thread,
    /// A child process with its own control groups.
    Process,
}

impl std::str::FromStr for Isolation {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Isolation, String> {
        match s {
            "auto" => Ok(Isolation::Auto),
            "thread" => Ok(Isolation::Thread),
            "process" => Ok(Isolation::Process),
            other => Err(format!("isolation {other:?}: use auto, thread or process")),
        }
    }
}

/// What placing a task in a process costs against a thread, as `heddle bench
/// isolation` measured it (one worker; the start is a job of one record, most of it the
/// kernel moving the process into its v1 memory group).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostTable {
    /// Where and when it was measured.
    pub measured: &'static str,
    /// Milliseconds to start a thread task (a job of one record).
    pub thread_start_ms: f64,
    /// Milliseconds to start a process task.
    pub process_start_ms: f64,
    /// Nanoseconds per record through a thread task.
    pub thread_record_ns: f64,
    /// Nanoseconds per record through a process task (batched over shared-memory rings).
    pub process_record_ns: f64,
}

/// The costs `Isolation::Auto` weighs: a process only where a memory or I/O contract must
/// be enforced, since every record through it costs an order of magnitude more.
pub const COSTS: CostTable = CostTable {
    measured: "heddle bench isolation, 2 cores, 2026-11-28",
    thread_start_ms: 0.25,
    process_start_ms: 15.0,
    thread_record_ns: 18.0,
    process_record_ns: 224.0,
};

/// Whether a vertex of [`crate::TaskGraph::isolated`] with `contract` runs its instances
/// as processes.
pub(crate) fn runs_as_process(contract: &crate::Resources) -> bool {
    match contract.isolation {
        Isolation::Process => true,
        Isolation::Thread => false,
        Isolation::Auto => contract.memory > 0 || contract.io_bytes_per_s > 0,
    }
}

/// What an isolated task's process used, measured when it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProcessUsage {
    /// Peak memory in bytes: the control group's peak, else the process's peak resident
    /// set (which also counts pages it shares with its worker).
    pub peak_bytes: u64,
    /// CPU seconds (user and system).
    pub cpu_s: f64,
    /// Seconds from its start to its end.
    pub wall_s: f64,
    /// Seconds from the worker placing the task to the process answering its first
    /// call: making its groups, forking, moving it into them and its first call.
    pub start_s: f64,
    /// Of `start_s`, the seconds spent making the groups and moving the process in.
    pub confine_s: f64,
    /// How its contract was enforced.
    pub enforcement: Enforcement,
}

impl ProcessUsage {
    /// Cores used on average: CPU seconds over wall seconds.
    pub fn cpu_cores(&self) -> f64 {
        if self.wall_s > 0.0 {
            self.cpu_s / self.wall_s
        } else {
            0.0
        }
    }
}

/// A task that runs as its vertex's [`Isolation`] says: as a thread, calling the task
/// directly, or as a child process confined to the vertex's contract, its records
/// crossing shared memory (which is why they must serialize).
pub struct Isolated<C: Compute> {
    task: Option<C>,
    /// Placed, as a thread or a process (decided once, at the first call).
    placed: bool,
    running: Option<Running>,
    usage: Option<ProcessUsage>,
}

/// A task placed in its own process.
struct Running {
    child: Child,
    confinement: Confinement,
    /// When placing began, until the first call is answered; then `start_s`.
    placed: Result<f64, Instant>,
    confine_s: f64,
}

impl<C: Compute> std::fmt::Debug for Isolated<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Isolated")
            .field("pid", &self.running.as_ref().map(|r| r.child.pid))
            .field("usage", &self.usage)
            .finish_non_exhaustive()
    }
}

impl<C: Compute> Isolated<C> {
    /// `task`, placed when it first runs.
    pub fn new(task: C) -> Isolated<C> {
        Isolated { task: Some(task), placed: false, running: None, usage: None }
    }
}

impl<C: Compute> Isolated<C>
where
    C::In: Serialize + DeserializeOwned,
    C::Out: Serialize + DeserializeOwned,
{
    /// Places the task on its first call: a process if its contract says so.
    fn place(&mut self, ctx: &Context<'_, C::Out>) -> Result<()> {
        if self.placed {
            return Ok(());
        }
        self.placed = true;
        let info = ctx.info();
        let contract = &info.resources;
        if !runs_as_process(contract) {
            return Ok(());
        }
        let Some(task) = self.task.take() else { return Ok(()) };
        let placed = Instant::now();
        let confinement = Confinement::create(&info.to_string(), info.task, contract);
        let made = placed.elapsed();
        if let Some(w) = &confinement.warning {
            tracing::warn!("{w}");
        }
        let child =
            process::spawn(task, info, &confinement, contract.memory).map_err(|e| Error::Task {
                task: info.to_string(),
                message: format!("cannot start its process: {e}"),
            })?;
        tracing::debug!(task = %info, pid = child.pid, enforcement = ?confinement.enforcement, "isolated task started");
        let confine_s = (made + child.confined).as_secs_f64();
        self.running = Some(Running { child, confinement, placed: Err(placed), confine_s });
        Ok(())
    }

    /// Runs `request` in the task's process, emitting what it emits (a state it
    /// returns goes to `state`). Returns a drain's `more`.
    fn call(
        &mut self,
        ctx: &mut Context<'_, C::Out>,
        request: Request,
        state: &mut Option<Option<Vec<u8>>>,
    ) -> Result<bool> {
        let Some(running) = self.running.as_mut() else { return Err(self.ended(ctx)) };
        let iteration = ctx.iteration().to_vec();
        let outcome = running.child.call(&iteration, request, &mut |reply| match reply {
            Reply::State(s) => {
                *state = Some(s);
                Ok(())
            }
            other => emit(ctx, other),
        });
        if let Err(placed) = running.placed {
            running.placed = Ok(placed.elapsed().as_secs_f64());
        }
        self.outcome(ctx, outcome)
    }

    /// The task's error for a call that failed in the process, or because it is gone.
    fn outcome(
        &mut self,
        ctx: &Context<'_, C::Out>,
        outcome: std::result::Result<bool, Option<String>>,
    ) -> Result<bool> {
        match outcome {
            Ok(more) => Ok(more),
            Err(Some(message)) => {
                self.end();
                Err(Error::Task { task: ctx.info().to_string(), message })
            }
            Err(None) => Err(self.died(ctx)),
        }
    }

    fn ended(&self, ctx: &Context<'_, C::Out>) -> Error {
        Error::Task {
            task: ctx.info().to_string(),
            message: "its isolated process has already ended".into(),
        }
    }

    /// Waits for the process and keeps what it used.
    fn end(&mut self) -> Option<(process::Ended, Confinement)> {
        let Running { child, confinement, placed, confine_s } = self.running.take()?;
        let ended = child.wait();
        let peak = confinement.peak().unwrap_or(ended.max_rss);
        self.usage = Some(ProcessUsage {
            peak_bytes: peak,
            cpu_s: ended.cpu_s,
            wall_s: ended.wall_s,
            start_s: placed.unwrap_or_else(|p| p.elapsed().as_secs_f64()),
            confine_s,
            enforcement: confinement.enforcement.clone(),
        });
        Some((ended, confinement))
    }

    /// The process went away mid-call: why, as the task's error.
    fn died(&mut self, ctx: &Context<'_, C::Out>) -> Error {
        let info = ctx.info();
        let contract = info.resources.memory;
        let pid = self.running.as_ref().map_or(0, |r| r.child.pid);
        let Some((ended, confinement)) = self.end() else {
            return Error::Task { task: info.to_string(), message: "its process is gone".into() };
        };
        let peak = self.usage.as_ref().map_or(0, |u| u.peak_bytes);
        let over_memory = confinement.oom_kills() > 0
            || (ended.status == -libc::SIGKILL && contract > 0 && peak >= contract)
            || (confinement.enforcement == Enforcement::Rlimit && ended.status == -libc::SIGABRT);
        let message = if over_memory {
            let how = match confinement.memory_file() {
                Some(f) => format!("killed by the kernel ({} = {contract})", f.display()),
                None => "its allocation failed past setrlimit(RLIMIT_DATA)".into(),
            };
            format!(
                "its isolated process exceeded its memory contract of {} (peak {}): {how}; \
                 raise the task's memory request or make it use less",
                crate::format_bytes(contract),
                crate::format_bytes(peak),
            )
        } else if ended.status < 0 {
            format!("its isolated process (pid {pid}) was killed by signal {}", -ended.status)
        } else {
            format!(
                "its isolated process ended with status {} in the middle of a call",
                ended.status
            )
        };
        Error::Task { task: info.to_string(), message }
    }
}

/// Emits a record the process sent.
fn emit<O: DeserializeOwned>(
    ctx: &mut Context<'_, O>,
    reply: Reply,
) -> std::result::Result<(), String> {
    if let Reply::Out(bytes) = reply {
        let o: O = bincode::deserialize(&bytes)
            .map_err(|e| format!("a record from the isolated process did not decode: {e}"))?;
        ctx.emit(o);
    }
    Ok(())
}

fn encode<T: Serialize>(ctx: &Context<'_, impl Sized>, value: &T) -> Result<Vec<u8>> {
    bincode::serialize(value).map_err(|e| Error::Task {
        task: ctx.info().to_string(),
        message: format!("a record for the isolated process did not encode: {e}"),
    })
}

/// Calls the task itself when it runs as a thread, else `$request` in its process.
macro_rules! placed {
    ($self:ident, $ctx:ident, |$t:ident| $direct:expr, $request:expr) => {{
        $self.place($ctx)?;
        if let Some($t) = $self.task.as_mut() {
            return $direct;
        }
        $self.call($ctx, $request, &mut None)
    }};
}

impl<C: Compute> Compute for Isolated<C>
where
    C::In: Serialize + DeserializeOwned,
    C::Out: Serialize + DeserializeOwned,
{
    type In = C::In;
    type Out = C::Out;

    fn prepare(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<()> {
        placed!(self, ctx, |t| t.prepare(ctx), Request::Prepare).map(drop)
    }

    fn execute(&mut self, ctx: &mut Context<'_, C::Out>, input: C::In) -> Result<()> {
        self.place(ctx)?;
        if let Some(t) = self.task.as_mut() {
            return t.execute(ctx, input);
        }
        let bytes = encode(ctx, &input)?;
        let Some(running) = self.running.as_mut() else { return Err(self.ended(ctx)) };
        let iteration = ctx.iteration().to_vec();
        let queued = running.child.execute(&iteration, bytes, &mut |r| emit(ctx, r));
        self.outcome(ctx, queued.map(|()| false)).map(drop)
    }

    fn executed(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<()> {
        if let Some(t) = self.task.as_mut() {
            return t.executed(ctx);
        }
        let Some(running) = self.running.as_mut() else { return Ok(()) };
        let iteration = ctx.iteration().to_vec();
        let flushed = running.child.flush(&iteration, &mut |r| emit(ctx, r));
        self.outcome(ctx, flushed.map(|()| false)).map(drop)
    }

    fn tick(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<()> {
        placed!(self, ctx, |t| t.tick(ctx), Request::Tick).map(drop)
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<()> {
        placed!(self, ctx, |t| t.end_of_input(ctx), Request::EndOfInput).map(drop)
    }

    fn drain(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<Produced> {
        let more = placed!(self, ctx, |t| t.drain(ctx), Request::Drain)?;
        Ok(if more { Produced::More } else { Produced::Done })
    }

    fn snapshot(
        &mut self,
        ctx: &mut Context<'_, C::Out>,
        checkpoint: u64,
    ) -> Result<Option<Vec<u8>>> {
        self.place(ctx)?;
        if let Some(t) = self.task.as_mut() {
            return t.snapshot(ctx, checkpoint);
        }
        let mut state = None;
        self.call(ctx, Request::Snapshot(checkpoint), &mut state)?;
        Ok(state.flatten())
    }

    fn restore(&mut self, ctx: &mut Context<'_, C::Out>, saved: &[u8]) -> Result<()> {
        placed!(self, ctx, |t| t.restore(ctx, saved), Request::Restore(saved.to_vec())).map(drop)
    }

    fn committed(&mut self, ctx: &mut Context<'_, C::Out>, checkpoint: u64) -> Result<()> {
        placed!(self, ctx, |t| t.committed(ctx, checkpoint), Request::Committed(checkpoint))
            .map(drop)
    }

    fn close(&mut self, ctx: &mut Context<'_, C::Out>) -> Result<()> {
        if self.running.is_none() && self.usage.is_some() {
            return Ok(()); // the process already ended (it failed)
        }
        let closed = placed!(self, ctx, |t| t.close(ctx), Request::Close);
        self.end();
        closed.map(drop)
    }

    fn usage(&self) -> Option<ProcessUsage> {
        self.usage.clone()
    }
}

impl<C: Compute> Drop for Isolated<C> {
    fn drop(&mut self) {
        if let Some(Running { child, .. }) = self.running.take() {
            // SAFETY: our own child; the job ended without closing the task.
            unsafe { libc::kill(child.pid, libc::SIGKILL) };
            let _ = child.wait();
        }
    }
}
