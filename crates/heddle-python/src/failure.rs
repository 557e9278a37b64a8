//! The first Python exception raised while a task graph or data set runs natively.
//!
//! Python code runs inside Rust callbacks (task methods, data-set functions, record
//! encoding) that cannot all return a Python exception through the Rust API. The first
//! exception of a run is kept here (per thread: a run stays on the thread that started
//! it) and raised as itself when the run returns. Meanwhile data-set functions see
//! [`failed`] and skip their Python calls, so the run ends quickly and collectively;
//! task methods return a task error, which ends the job. A stream run's sources may never
//! end by themselves, so it is told of its first exception ([`scope_watched`]).

use std::cell::RefCell;

use pyo3::PyErr;

/// What a run does when its first exception is raised.
type OnFailure = Box<dyn Fn(&PyErr)>;

thread_local! {
    static FIRST: RefCell<Option<PyErr>> = const { RefCell::new(None) };
    static ON_FAILURE: RefCell<Option<OnFailure>> = const { RefCell::new(None) };
}

/// Keeps `e` unless an earlier exception of this run is kept already (the first one is
/// also handed to the run's [`scope_watched`] handler).
pub(crate) fn record(e: PyErr) {
    if failed() {
        return;
    }
    ON_FAILURE.with(|h| {
        if let Some(on_failure) = &*h.borrow() {
            on_failure(&e);
        }
    });
    FIRST.with(|f| *f.borrow_mut() = Some(e));
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
pub(crate) fn scope_watched<T>(on_failure: impl Fn(&PyErr) + 'static, f: impl FnOnce() -> T) -> (T, Option<PyErr>) {
    let outer = ON_FAILURE.with(|h| h.replace(Some(Box::new(on_failure))));
    let ran = scope(f);
    ON_FAILURE.with(|h| h.replace(outer));
    ran
}
