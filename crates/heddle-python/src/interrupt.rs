//! Blocking calls without the GIL, and Ctrl-C while one is blocked.
//!
//! Every call that may wait for peers runs through [`blocking`], which releases the GIL.
//! Python's own SIGINT handler only sets a flag that the interpreter checks between
//! bytecodes, so a worker stuck in a collective whose peers never arrive would not notice
//! Ctrl-C until `HEDDLE_TIMEOUT_S`. [`install`] therefore adds a SIGINT action (chained
//! after Python's handler, which still runs): if a blocking call is in progress, a watchdog
//! thread gives it [`GRACE`] to return, in which case Python raises `KeyboardInterrupt` as
//! usual. A task job, data-set action or stream run ([`abortable`]) is aborted on this
//! worker instead: it returns within [`ABORT_GRACE`] with `heddle_task::Error::Aborted`,
//! which `errors` raises as `KeyboardInterrupt`. Otherwise the call cannot be abandoned
//! safely (peers are mid-collective), so the worker exits with status 130 and `heddle run`
//! stops the rest of the job.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, PoisonError};
use std::time::{Duration, Instant};

use heddle_task::AbortHandle;
use pyo3::Python;

/// How long a blocked call may still return after Ctrl-C before the worker exits.
const GRACE: Duration = Duration::from_millis(250);
/// How long an aborted job may take to return after Ctrl-C before the worker exits.
const ABORT_GRACE: Duration = Duration::from_secs(5);
/// The reason an interrupted job gives.
const INTERRUPTED: &str = "interrupted (SIGINT)";

/// Jobs that Ctrl-C aborts (the runs in [`abortable`] now).
static ABORTABLE: Mutex<Vec<AbortHandle>> = Mutex::new(Vec::new());

/// Blocking calls in progress (any thread).
static BLOCKING: AtomicUsize = AtomicUsize::new(0);
/// SIGINT arrived while a call was blocked and that call has not returned yet.
static PENDING: AtomicBool = AtomicBool::new(false);
/// Write end of the pipe that wakes the watchdog (-1 until installed).
static WAKE: AtomicI32 = AtomicI32::new(-1);
static INSTALL: Once = Once::new();

/// Installs the SIGINT action and its watchdog thread (once per process).
pub(crate) fn install() {
    INSTALL.call_once(|| {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 fills the two descriptors.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return;
        }
        let read_end = fds[0];
        let spawned =
            std::thread::Builder::new().name("heddle-interrupt".into()).spawn(move || loop {
                let mut byte = 0u8;
                // SAFETY: reads one byte into a local.
                let n = unsafe { libc::read(read_end, (&mut byte as *mut u8).cast(), 1) };
                if n == 1 {
                    watch();
                } else if n == 0
                    || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted
                {
                    return;
                }
            });
        if spawned.is_err() {
            return;
        }
        WAKE.store(fds[1], Ordering::SeqCst);
        // SAFETY: the action only touches atomics and calls write(2), both async-signal-safe.
        let _ = unsafe { signal_hook::low_level::register(signal_hook::consts::SIGINT, on_sigint) };
    });
}

fn on_sigint() {
    if BLOCKING.load(Ordering::SeqCst) > 0 {
        PENDING.store(true, Ordering::SeqCst);
        let fd = WAKE.load(Ordering::SeqCst);
        if fd >= 0 {
            // SAFETY: write(2) of one static byte.
            unsafe { libc::write(fd, b"!".as_ptr().cast(), 1) };
        }
    }
}

/// After a SIGINT during a blocking call: abort the abortable jobs, and exit unless the
/// call returns within [`GRACE`] (or [`ABORT_GRACE`] if it was a job).
fn watch() {
    let start = Instant::now();
    let jobs = ABORTABLE.lock().unwrap_or_else(PoisonError::into_inner).clone();
    jobs.iter().for_each(|j| j.abort(INTERRUPTED));
    let grace = if jobs.is_empty() { GRACE } else { ABORT_GRACE };
    while start.elapsed() < grace {
        if !PENDING.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if PENDING.load(Ordering::SeqCst) && BLOCKING.load(Ordering::SeqCst) > 0 {
        let msg = b"heddle: interrupted (SIGINT) while blocked in a communication call; \
                    exiting with status 130\n";
        // SAFETY: write(2) and _exit(2): the process ends here without unwinding into Python.
        unsafe {
            libc::write(2, msg.as_ptr().cast(), msg.len());
            libc::_exit(130);
        }
    }
}

/// Marks a blocking call in progress.
struct InProgress;

impl InProgress {
    fn enter() -> InProgress {
        BLOCKING.fetch_add(1, Ordering::SeqCst);
        InProgress
    }
}

impl Drop for InProgress {
    fn drop(&mut self) {
        if BLOCKING.fetch_sub(1, Ordering::SeqCst) == 1 {
            PENDING.store(false, Ordering::SeqCst);
        }
    }
}

/// Runs `f` with the GIL released, as an interruptible blocking call.
pub(crate) fn blocking<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> T {
    py.detach(|| {
        let _in_progress = InProgress::enter();
        f()
    })
}

/// [`blocking_here`] for a run of task jobs that `abort` aborts: Ctrl-C while it runs
/// aborts it, rather than ending the worker. A request left from an earlier run is cleared
/// first.
pub(crate) fn abortable<T, F: FnOnce() -> T>(py: Python<'_>, abort: &AbortHandle, f: F) -> T {
    abort.reset();
    ABORTABLE.lock().unwrap_or_else(PoisonError::into_inner).push(abort.clone());
    /// Unregisters the handle however the run ends.
    struct Registered<'a>(&'a AbortHandle);
    impl Drop for Registered<'_> {
        fn drop(&mut self) {
            let mut jobs = ABORTABLE.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(at) = jobs.iter().position(|j| j.same(self.0)) {
                jobs.swap_remove(at);
            }
        }
    }
    let _registered = Registered(abort);
    blocking_here(py, f)
}

/// Moves a value that is not `Send` across [`blocking`]'s boundary.
struct Here<X>(X);

// SAFETY: `blocking` runs its closure on the calling thread (it only releases the GIL), so
// the value never leaves this thread. The task and data objects it carries (not `Send`) are
// reachable from Python only through `unsendable` classes, which refuse other threads.
unsafe impl<X> Send for Here<X> {}

impl<X> Here<X> {
    fn into_inner(self) -> X {
        self.0
    }
}

/// [`blocking`] for work on this thread's task graphs and data sets (not `Send`): the GIL
/// is released while it runs; Python callbacks inside take it back as they need it.
pub(crate) fn blocking_here<T, F: FnOnce() -> T>(py: Python<'_>, f: F) -> T {
    let f = Here(f);
    blocking(py, move || {
        let f = f.into_inner();
        Here(f())
    })
    .into_inner()
}
