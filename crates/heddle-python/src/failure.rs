//! The first Python exception raised while a task graph or data set runs natively.
//!
//! Python code runs inside Rust callbacks (task methods, data-set functions, record
//! encoding) that cannot all return a Python exception through the Rust API. The first
//! exception of a run is kept here (per thread: a run stays on the thread that started
//! it) and raised as itself when the run returns. Meanwhile data-set functions see
//! [`failed`] and skip their Python calls, so the run ends quickly and collectively;
//! task methods return a task error, which ends the job.

use std::cell::RefCell;

use pyo3::PyErr;

thread_local! {
    static FIRST: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps `e` unless an earlier exception of this run is kept already.
pub(crate) fn record(e: PyErr) {
    FIRST.with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(e);
        }
    });
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
