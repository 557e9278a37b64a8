//! Job-wide abort: one failure stops the whole job, with its cause.
//!
//! When a worker fails — a task raises, a collective or dataflow operation fails — it
//! records an [`AbortCause`] in its world's [`JobAbort`] and reports it (through the
//! reporter the runtime installs: a message to the job master, which tells every other
//! worker). From then on every pending and future blocking call of every rank returns
//! [`Error::Aborted`](crate::Error::Aborted) carrying the origin's cause, so no rank goes on
//! to emit a result computed without the failed rank's data.
//!
//! In a world of one there is nobody to tell and nothing to protect: [`JobAbort::raise`]
//! records nothing, so a failed call leaves the communicator usable (a notebook goes on).
//!
//! ```
//! use heddle_comm::{local_world, AbortCause, CommConfig, Error};
//! let comms = local_world(2, CommConfig::default())?;
//! comms[1].abort(AbortCause::new(1, "ValueError", "bad record 17").in_task("parse"));
//! let err = comms[0].barrier().unwrap_err();
//! assert!(matches!(&err, Error::Aborted(cause) if cause.origin == 1));
//! assert!(err.to_string().contains("rank 1 (task parse) failed: ValueError: bad record 17"));
//! # Ok::<(), heddle_comm::Error>(())
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Why a job was aborted: which rank failed, in which task, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortCause {
    /// The world rank that failed first.
    pub origin: usize,
    /// The task that failed, when a task did.
    pub task: Option<String>,
    /// The kind of error: an error variant (`Timeout`, `PeerLost`, ...) or a Python
    /// exception class (`ValueError`).
    pub kind: String,
    /// The error's message (for Python, with its traceback).
    pub message: String,
}

impl AbortCause {
    /// A cause of kind `kind` at rank `origin`.
    pub fn new(origin: usize, kind: impl Into<String>, message: impl Into<String>) -> AbortCause {
        AbortCause { origin, task: None, kind: kind.into(), message: message.into() }
    }

    /// The same cause, inside task `task`.
    pub fn in_task(mut self, task: impl Into<String>) -> AbortCause {
        self.task = Some(task.into());
        self
    }
}

impl fmt::Display for AbortCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rank {}", self.origin)?;
        if let Some(task) = &self.task {
            write!(f, " (task {task})")?;
        }
        write!(f, " failed: {}: {}", self.kind, self.message)
    }
}

/// Reports a local failure to the rest of the job.
pub type Reporter = Box<dyn Fn(&AbortCause) + Send + Sync>;

/// The abort state of one world, shared by its communicators (and, in a world inside one
/// process, by all its ranks).
pub struct JobAbort {
    world_size: usize,
    aborted: AtomicBool,
    cause: OnceLock<AbortCause>,
    reporter: Mutex<Option<Reporter>>,
    /// Rung when the job is aborted, so that idle threads sleeping on them hear it at once
    /// (one per rank sharing this abort).
    bells: Mutex<Vec<crate::transport::doorbell::Doorbell>>,
}

impl JobAbort {
    pub(crate) fn new(world_size: usize) -> JobAbort {
        JobAbort {
            world_size,
            aborted: AtomicBool::new(false),
            cause: OnceLock::new(),
            reporter: Mutex::new(None),
            bells: Mutex::new(Vec::new()),
        }
    }

    /// Rings `bell` (a rank's doorbell) when the job is aborted.
    pub(crate) fn ring_on_abort(&self, bell: crate::transport::doorbell::Doorbell) {
        self.bells.lock().unwrap_or_else(PoisonError::into_inner).push(bell);
    }

    /// A local failure: records `cause` (the first one wins) and reports it through the
    /// reporter. Returns whether this call aborted the job. Does nothing in a world of one.
    pub fn raise(&self, cause: AbortCause) -> bool {
        if self.world_size <= 1 || !self.record(cause) {
            return false;
        }
        if let (Some(report), Some(cause)) =
            (&*self.reporter.lock().unwrap_or_else(PoisonError::into_inner), self.cause.get())
        {
            report(cause);
        }
        true
    }

    /// A failure elsewhere, heard from the job master: recorded, not reported again.
    pub fn receive(&self, cause: AbortCause) {
        self.record(cause);
    }

    fn record(&self, cause: AbortCause) -> bool {
        let first = self.cause.set(cause).is_ok();
        self.aborted.store(true, Ordering::Release);
        for bell in self.bells.lock().unwrap_or_else(PoisonError::into_inner).iter() {
            bell.ring();
        }
        first
    }

    /// Whether the job was aborted.
    pub fn is_aborted(&self) -> bool {
        self.aborted.load(Ordering::Acquire)
    }

    /// The cause, once the job was aborted.
    pub fn cause(&self) -> Option<&AbortCause> {
        self.cause.get()
    }

    /// `Err(Error::Aborted)` once the job was aborted.
    ///
    /// # Errors
    /// [`Error::Aborted`] with the cause.
    pub fn check(&self) -> Result<()> {
        if !self.is_aborted() {
            return Ok(());
        }
        Err(Error::Aborted(
            self.cause
                .get()
                .cloned()
                .unwrap_or_else(|| AbortCause::new(usize::MAX, "Aborted", "cause unknown")),
        ))
    }

    /// Installs how local failures are reported (the runtime: to the job master).
    pub fn set_reporter(&self, reporter: Reporter) {
        *self.reporter.lock().unwrap_or_else(PoisonError::into_inner) = Some(reporter);
    }

    /// Raises `e`, a local failure of an operation at world rank `rank`, unless it is
    /// itself an abort; returns `e`.
    pub(crate) fn fail(&self, rank: usize, e: Error) -> Error {
        if !matches!(e, Error::Aborted(_)) {
            self.raise(AbortCause::new(rank, e.kind(), e.to_string()));
        }
        e
    }
}

impl fmt::Debug for JobAbort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobAbort")
            .field("world_size", &self.world_size)
            .field("cause", &self.cause.get())
            .finish()
    }
}
