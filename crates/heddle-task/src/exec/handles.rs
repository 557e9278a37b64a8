//! Handles that end a job from outside it: a stop (drain and end) and an abort (end now).
//! Each wakes the workers it was handed to when they sleep until woken.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use heddle_comm::Waker;

use crate::{Error, Result};

/// A request flag, and the sleeping workers to wake when it is set.
#[derive(Debug, Default)]
struct Flag {
    requested: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Flag {
    fn set(&self) {
        self.requested.store(true, Ordering::Release);
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner).iter().for_each(Waker::wake);
    }

    fn get(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    fn wake(&self, waker: Waker) {
        let mut wakers = self.wakers.lock().unwrap_or_else(PoisonError::into_inner);
        if !wakers.iter().any(|w| w.same(&waker)) {
            wakers.push(waker);
        }
    }
}

/// Asks a streaming job to end: its sources end their output, and the job drains.
#[derive(Debug, Clone, Default)]
pub struct StopHandle(Arc<Flag>);

impl StopHandle {
    /// Requests the end.
    pub fn stop(&self) {
        self.0.set();
    }

    pub(crate) fn requested(&self) -> bool {
        self.0.get()
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
    flag: Flag,
    reason: Mutex<String>,
}

impl AbortHandle {
    /// Requests the abort, saying why (the first reason is kept).
    pub fn abort(&self, reason: impl Into<String>) {
        let mut r = self.0.reason.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.0.flag.get() {
            *r = reason.into();
            self.0.flag.set();
        }
    }

    /// Whether an abort was requested.
    pub fn requested(&self) -> bool {
        self.0.flag.get()
    }

    /// Whether `other` is this handle (or a clone of it).
    pub fn same(&self, other: &AbortHandle) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Clears a request, so the handle can serve a new job.
    pub fn reset(&self) {
        let _r = self.0.reason.lock().unwrap_or_else(PoisonError::into_inner);
        self.0.flag.requested.store(false, Ordering::Release);
    }

    /// The error of a requested abort.
    pub(crate) fn check(&self) -> Result<()> {
        if !self.requested() {
            return Ok(());
        }
        Err(Error::Aborted(self.0.reason.lock().unwrap_or_else(PoisonError::into_inner).clone()))
    }
}

/// Has `stop` and `abort` wake the worker of `comm` when it sleeps until woken.
pub(crate) fn wake_on_request(
    stop: &StopHandle,
    abort: &AbortHandle,
    comm: &heddle_comm::Communicator,
) {
    if let Some(waker) = comm.waker() {
        stop.0.wake(waker.clone());
        abort.0.flag.wake(waker);
    }
}
