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
        }
    }

    fn cell(self) -> &'static PyOnceLock<Py<PyType>> {
        static CELLS: [PyOnceLock<Py<PyType>>; 6] =
            [PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new(), PyOnceLock::new()];
        &CELLS[self as usize]
    }

    /// An exception of this kind carrying `message`.
    pub(crate) fn err(self, message: impl Into<String>) -> PyErr {
        self.err_with_rank(message.into(), None)
    }

    fn err_with_rank(self, message: String, rank: Option<usize>) -> PyErr {
        Python::attach(|py| {
            let class = match self.cell().import(py, "heddle.errors", self.class_name()) {
                Ok(class) => class,
                // The package is broken: still say what went wrong.
                Err(_) => return pyo3::exceptions::PyRuntimeError::new_err(message),
            };
            match class.call1((message,)) {
                Ok(value) => {
                    if let Some(rank) = rank {
                        if let Err(e) = value.setattr("rank", rank) {
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

/// Maps a communication-layer error to its exception.
pub(crate) fn comm(e: heddle_comm::Error) -> PyErr {
    use heddle_comm::Error as E;
    let message = e.to_string();
    match e {
        E::PeerLost { rank, .. } => Kind::WorkerFailed.err_with_rank(message, Some(rank)),
        E::Timeout { .. } => Kind::Timeout.err(message),
        E::InvalidArgument(_) => Kind::Argument.err(message),
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
