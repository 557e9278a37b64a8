//! Rust errors as Python exceptions: each error variant becomes an instance of one class of
//! `heddle.errors` (all rooted at `heddle.HeddleError`), with the Rust message as its text.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;

/// The exception classes of `heddle.errors` this module raises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A `HEDDLE_*` setting or the launcher environment is wrong.
    Config,
    /// The caller passed something that cannot be right (bad rank, buffer, dtype, op).
    Argument,
    /// Communication failed (I/O, malformed frame, truncated message, bootstrap protocol).
    Comm,
    /// A blocking call made no progress for `HEDDLE_TIMEOUT_S` (or bootstrap timed out).
    Timeout,
    /// A peer worker is gone; the job cannot continue.
    WorkerFailed,
    /// The launcher could not start the job.
    Launch,
    /// A task graph is malformed.
    Graph,
    /// A task graph cannot be placed on the workers.
    Plan,
    /// A task failed (reported by the native task system).
    Task,
    /// Input data cannot be read or parsed.
    Data,
    /// Another worker failed and the job was aborted.
    JobAborted,
}

impl Kind {
    fn class_name(self) -> &'static str {
        match self {
            Kind::Config => "ConfigError",
            Kind::Argument => "ArgumentError",
            Kind::Comm => "CommError",
            Kind::Timeout => "TimeoutError",
            Kind::WorkerFailed => "WorkerFailed",
            Kind::Launch => "LaunchError",
            Kind::Graph => "GraphError",
            Kind::Plan => "PlanError",
            Kind::Task => "TaskError",
            Kind::Data => "DataError",
            Kind::JobAborted => "JobAborted",
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 11] = [const { PyOnceLock::new() }; 11];
        &CELLS[self as usize]
    }

    /// An exception of this kind carrying `message`.
    pub(crate) fn err(self, message: impl Into<String>) -> PyErr {
        self.err_with_rank(message.into(), None)
    }

    fn err_with_rank(self, message: String, rank: Option<usize>) -> PyErr {
        self.err_with(message, rank.map(|r| vec![("rank", Attr::Int(r))]).unwrap_or_default())
    }

    fn err_with(self, message: String, attributes: Vec<(&'static str, Attr)>) -> PyErr {
        Python::attach(|py| {
            let class = match self.cell().import(py, "heddle.errors", self.class_name()) {
                Ok(class) => class,
                // The package is broken: still say what went wrong.
                Err(_) => return pyo3::exceptions::PyRuntimeError::new_err(message),
            };
            match class.call1((message,)) {
                Ok(value) => {
                    for (name, attr) in attributes {
                        let set = match attr {
                            Attr::Int(i) => value.setattr(name, i),
                            Attr::Str(s) => value.setattr(name, s),
                        };
                        if let Err(e) = set {
                            return e;
                        }
                    }
                    PyErr::from_value(value)
                }
                Err(e) => e,
            }
        })
    }
}

/// The argument error `message` (raised for bad buffers, ranks, dtypes and ops).
pub(crate) fn argument(message: impl Into<String>) -> PyErr {
    Kind::Argument.err(message)
}

/// An attribute set on an exception.
enum Attr {
    Int(usize),
    Str(Option<String>),
}

/// `heddle.JobAborted` for the job-wide abort `cause`: the message, and the origin rank,
/// its task and its error kind as attributes.
fn job_aborted(message: String, cause: heddle_comm::AbortCause) -> PyErr {
    Kind::JobAborted.err_with(
        message,
        vec![
            ("origin", Attr::Int(cause.origin)),
            ("task", Attr::Str(cause.task)),
            ("kind", Attr::Str(Some(cause.kind))),
        ],
    )
}

/// Maps a communication-layer error to its exception.
pub(crate) fn comm(e: heddle_comm::Error) -> PyErr {
    use heddle_comm::Error as E;
    let message = e.to_string();
    match e {
        E::Aborted(cause) => job_aborted(message, cause),
        E::PeerLost { rank, .. } => Kind::WorkerFailed.err_with_rank(message, Some(rank)),
        E::Timeout { .. } => Kind::Timeout.err(message),
        E::InvalidArgument(_) | E::TypeMismatch { .. } | E::CollectiveMismatch { .. } => {
            Kind::Argument.err(message)
        }
        E::Config(_) => Kind::Config.err(message),
        _ => Kind::Comm.err(message),
    }
}

/// Maps a runtime (bootstrap or launcher) error to its exception.
pub(crate) fn runtime(e: heddle_runtime::Error) -> PyErr {
    use heddle_runtime::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::Env(_) => Kind::Config.err(e.to_string()),
        E::Timeout(_) => Kind::Timeout.err(e.to_string()),
        E::Spawn { .. } => Kind::Launch.err(e.to_string()),
        _ => Kind::Comm.err(e.to_string()),
    }
}

/// Maps a task-system error to its exception.
pub(crate) fn task(e: heddle_task::Error) -> PyErr {
    use heddle_task::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::Graph(_) => Kind::Graph.err(e.to_string()),
        E::Plan(_) => Kind::Plan.err(e.to_string()),
        E::Aborted(reason) => interrupted(reason),
        E::Dataflow(inner) => dataflow(inner),
        _ => Kind::Task.err(e.to_string()),
    }
}

/// Maps a dataflow operation's error to its exception.
pub(crate) fn dataflow(e: heddle_dataflow::Error) -> PyErr {
    use heddle_dataflow::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        _ => Kind::Comm.err(e.to_string()),
    }
}

/// The exception of a job aborted by Ctrl-C: whatever Python's SIGINT handler raises now
/// (`KeyboardInterrupt` by default; the signal is consumed here, so it is not raised a
/// second time later), else `KeyboardInterrupt` naming the reason.
fn interrupted(reason: String) -> PyErr {
    Python::attach(|py| match py.check_signals() {
        Err(e) => e,
        Ok(()) => pyo3::exceptions::PyKeyboardInterrupt::new_err(reason),
    })
}

/// Maps a data-API error to its exception.
pub(crate) fn data(e: heddle_data::Error) -> PyErr {
    use heddle_data::Error as E;
    match e {
        // heddle-data reports failures of its own sources and sinks (unreadable or
        // malformed input, unwritable output) as task errors without a task name.
        E::Task(heddle_task::Error::Task { task: name, message }) if name.is_empty() => {
            Kind::Data.err(message)
        }
        E::Task(inner) => task(inner),
        E::Comm(inner) => comm(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        _ => Kind::Data.err(e.to_string()),
    }
}

/// The exception of a native run: the first Python exception raised inside it (the
/// cause of everything else), else the mapped Rust error.
pub(crate) fn of_run<T, E>(
    result: Result<T, E>,
    raised: Option<PyErr>,
    map: impl FnOnce(E) -> PyErr,
) -> PyResult<T> {
    match (result, raised) {
        (_, Some(e)) => Err(e),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(map(e)),
    }
}
