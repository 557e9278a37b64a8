//! What a runtime embedded in the worker (a Python interpreter) must do around the fork
//! of an isolated task's process and before that process leaves: set once per process
//! by the embedding ([`set_fork_hooks`]), used for every isolated task alike — a task
//! graph's vertex or a data set's stage.

use std::sync::OnceLock;

/// Calls around an isolated task's `fork` and before its process's `_exit`.
#[derive(Debug, Clone, Copy)]
pub struct ForkHooks {
    /// Calls `fork`, which returns what `fork(2)` returns (0 in the child), and returns
    /// the same; an embedded interpreter holds its lock across it and resets its state
    /// in the child.
    pub fork: fn(fork: &mut dyn FnMut() -> i32) -> i32,
    /// Runs in the isolated process before it leaves with `_exit` (which runs no exit
    /// handlers): e.g. flushing the interpreter's buffered output.
    pub before_exit: fn(),
}

static HOOKS: OnceLock<ForkHooks> = OnceLock::new();

/// Sets the hooks for every isolated task this process forks from now on. Returns
/// `false` (and keeps the first) when they were set already.
///
/// ```
/// use heddle_task::{set_fork_hooks, ForkHooks};
/// fn fork(f: &mut dyn FnMut() -> i32) -> i32 {
///     f() // an interpreter would take its lock here
/// }
/// assert!(set_fork_hooks(ForkHooks { fork, before_exit: || {} }));
/// assert!(!set_fork_hooks(ForkHooks { fork, before_exit: || {} }));
/// ```
pub fn set_fork_hooks(hooks: ForkHooks) -> bool {
    HOOKS.set(hooks).is_ok()
}

/// Forks through the hooks, if any.
pub(crate) fn fork() -> i32 {
    // SAFETY: see `process::spawn`, the only caller: the child runs the task loop on
    // this thread's copy of the address space and leaves with `_exit`.
    let mut plain = || unsafe { libc::fork() };
    match HOOKS.get() {
        Some(h) => (h.fork)(&mut plain),
        None => plain(),
    }
}

/// Runs the `before_exit` hook, if any.
pub(crate) fn before_exit() {
    if let Some(h) = HOOKS.get() {
        (h.before_exit)();
    }
}

/// Ends the call under way in an isolated task's process with `message` as the task's
/// error, for code that runs inside the task but cannot return one (a closure of fixed
/// signature, such as a data set's `map` function calling into an interpreter): raised
/// with [`std::panic::resume_unwind`], it is reported as the message alone, and no panic
/// hook prints it.
///
/// ```
/// let unwound = std::panic::catch_unwind(|| {
///     std::panic::resume_unwind(Box::new(heddle_task::CallFailed("ValueError: 3".into())))
/// });
/// let payload = unwound.unwrap_err();
/// assert_eq!(payload.downcast_ref::<heddle_task::CallFailed>().unwrap().0, "ValueError: 3");
/// ```
#[derive(Debug, Clone)]
pub struct CallFailed(pub String);
