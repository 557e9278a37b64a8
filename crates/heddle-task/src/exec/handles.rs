//! Handles that end a job from outside it: a stop (drain and end) and an abort (end now).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::{Error, Result};

/// Asks a streaming job to end: its sources end their output, and the job drains.
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<AtomicBool>);

impl StopHandle {
    /// Requests the end.
    pub fn stop(&self) {
        self.0.store(true, Ordering::Release);
    }

    pub(crate) fn requested(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Ends a job on this worker at once, with [`Error::Aborted`]: for Ctrl-C, or a failure
/// outside the job. Unlike [`StopHandle`] nothing drains; records in flight are dropped,
/// and peers still in the job find this worker gone (or time out), so a program should
/// end (or at least not reuse the communicator's pending operations) after an abort.
#[derive(Debug, Clone, Default)]
pub struct AbortHandle(Arc<AbortState>);

#[derive(Debug, Default)]
struct AbortState {
    requested: AtomicBool,
    reason: Mutex<String>,
}

impl AbortHandle {
    /// Requests the abort, saying why (the first reason is kept).
    pub fn abort(&self, reason: impl Into<String>) {
        let mut r = self.0.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.0.requested.load(Ordering::Acquire) {
            *r = reason.into();
            self.0.requested.store(true, Ordering::Release);
        }
    }

    /// Whether an abort was requested.
    pub fn requested(&self) -> bool {
        self.0.requested.load(Ordering::Acquire)
    }

    /// Whether `other` is this handle (or a clone of it).
    pub fn same(&self, other: &AbortHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Clears a request, so the handle can serve a new job.
    pub fn reset(&self) {
        let _r = self.0.reason.lock().unwrap_or_else(PoisonError::into_inner);
        self.0.requested.store(false, Ordering::Release);
    }

    /// The error of a requested abort.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.requested() {
            return Ok(());
        }
        Err(Error::Aborted(self.0.reason.lock().unwrap_or_else(PoisonError::into_inner).clone()))
    }
}
