//! The first Python exception raised while a task graph or data set runs natively.
//!
//! Python code runs inside Rust callbacks (task methods, data-set functions, record
//! encoding) that cannot all return a Python exception through the Rust API. The first
//! exception of a run is kept here (per thread: a run stays on the thread that started
//! it) and raised as itself when the run returns. Meanwhile data-set functions see
//! [`failed`] and skip their Python calls, so the run ends quickly and collectively;
//! task methods return a task error, which ends the job. A stream run's sources may never
//! end by themselves, so it is told of its first exception ([`scope_watched`]).
//!
//! On several workers the first exception also aborts the whole job at once
//! ([`heddle_comm::JobAbort`]): every other worker's pending and later calls fail with
//! `heddle.JobAborted` carrying this exception's traceback, so no worker finishes the run
//! without this one's records.

use std::cell::RefCell;

use pyo3::prelude::*;

/// What a run does when its first exception is raised.
type OnFailure = Box<dyn Fn(&PyErr)>;

thread_local! {
    static FIRST: RefCell<Option<PyErr>> = const { RefCell::new(None) };
    static ON_FAILURE: RefCell<Option<OnFailure>> = const { RefCell::new(None) };
}

/// Keeps `e` unless an earlier exception of this run is kept already (the first one is
/// also handed to the run's [`scope_watched`] handler).
pub(crate) fn record(e: PyErr) {
    if crate::task_adapters::forked() {
        // An isolated stage's process: the exception ends the call it is in, which the
        // worker reports as the stage's error (the job's own channels are the worker's).
        std::panic::resume_unwind(Box::new(heddle_task::CallFailed(described(&e))));
    }
    if failed() {
        return;
    }
    ON_FAILURE.with(|h| {
        if let Some(on_failure) = &*h.borrow() {
            on_failure(&e);
        }
    });
    Python::attach(|py| {
        crate::comm::abort_job(
            e.get_type(py).name().map_or_else(|_| "Exception".into(), |n| n.to_string()),
            None,
            described(&e),
        )
    });
    FIRST.with(|f| *f.borrow_mut() = Some(e));
}

/// An exception with its traceback, as Python prints it.
pub(crate) fn described(e: &PyErr) -> String {
    Python::attach(|py| {
        let lines = py.import("traceback").and_then(|tb| {
            tb.call_method1("format_exception", (e.get_type(py), e.value(py), e.traceback(py)))
        });
        lines
            .and_then(|l| l.extract::<Vec<String>>())
            .map_or_else(|_| format!("{e}\n"), |l| l.concat())
    })
}

/// Whether this run has failed.
pub(crate) fn failed() -> bool {
    FIRST.with(|f| f.borrow().is_some())
}

/// Runs `f` as a run of its own (a run inside another keeps the outer one's exception
/// aside) and returns its result with its first exception.
pub(crate) fn scope<T>(f: impl FnOnce() -> T) -> (T, Option<PyErr>) {
    let outer = FIRST.with(|c| c.borrow_mut().take());
    let result = f();
    let mine = FIRST.with(|c| std::mem::replace(&mut *c.borrow_mut(), outer));
    (result, mine)
}

/// [`scope`] that calls `on_failure` with the run's first exception as it is raised.
pub(crate) fn scope_watched<T>(
    on_failure: impl Fn(&PyErr) + 'static,
    f: impl FnOnce() -> T,
) -> (T, Option<PyErr>) {
    let outer = ON_FAILURE.with(|h| h.replace(Some(Box::new(on_failure))));
    let ran = scope(f);
    ON_FAILURE.with(|h| h.replace(outer));
    ran
}
