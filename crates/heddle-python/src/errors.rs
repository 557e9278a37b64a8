//! Rust errors as Python exceptions: each variant of each layer's error becomes an
//! instance of one class of `heddle.errors` (made in `exceptions`, all rooted at
//! `heddle.HeddleError`), with the Rust message as its text. The matches name every
//! variant, so a new one does not compile until it is mapped (and `error_samples` checks,
//! through `_heddle._error_mapping`, that each one has a sample).

use pyo3::prelude::*;
use pyo3::types::PyType;

use crate::exceptions::{self as x, ARGUMENT_ERROR, CONFIG_ERROR, GRAPH_ERROR, TIMEOUT_ERROR};

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
    /// The class of this kind.
    fn class(self, py: Python<'_>) -> PyResult<Bound<'_, PyType>> {
        Ok(match self {
            Kind::Config => CONFIG_ERROR.get(py)?,
            Kind::Argument => ARGUMENT_ERROR.get(py)?,
            Kind::Comm => py.get_type::<x::CommError>(),
            Kind::Timeout => TIMEOUT_ERROR.get(py)?,
            Kind::WorkerFailed => py.get_type::<x::WorkerFailed>(),
            Kind::Launch => py.get_type::<x::LaunchError>(),
            Kind::Graph => GRAPH_ERROR.get(py)?,
            Kind::Plan => py.get_type::<x::PlanError>(),
            Kind::Task => py.get_type::<x::TaskError>(),
            Kind::Data => py.get_type::<x::DataError>(),
            Kind::JobAborted => py.get_type::<x::JobAborted>(),
        })
    }

    /// An exception of this kind carrying `message`.
    pub(crate) fn err(self, message: impl Into<String>) -> PyErr {
        self.err_with(message.into(), Vec::new())
    }

    fn err_with(self, message: String, attributes: Vec<(&'static str, Attr)>) -> PyErr {
        Python::attach(|py| {
            let made = self.class(py).and_then(|class| {
                let value = class.call1((message,))?;
                for (name, attr) in attributes {
                    match attr {
                        Attr::Int(i) => value.setattr(name, i)?,
                        Attr::Str(s) => value.setattr(name, s)?,
                    }
                }
                Ok(value)
            });
            match made {
                Ok(value) => PyErr::from_value(value),
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
    let variant = e.kind();
    let err = comm_class(e);
    // `heddle.MPI` maps the variant to an MPI error class (`ERR_TRUNCATE`, ...).
    Python::attach(|py| {
        let _ = err.value(py).setattr("variant", variant);
    });
    err
}

fn comm_class(e: heddle_comm::Error) -> PyErr {
    use heddle_comm::Error as E;
    let message = e.to_string();
    match e {
        E::Aborted(cause) => job_aborted(message, cause),
        E::PeerLost { rank, .. } => {
            Kind::WorkerFailed.err_with(message, vec![("rank", Attr::Int(rank))])
        }
        E::Timeout { .. } => Kind::Timeout.err(message),
        E::InvalidArgument(_) | E::TypeMismatch { .. } | E::CollectiveMismatch { .. } => {
            Kind::Argument.err(message)
        }
        E::Config(_) => Kind::Config.err(message),
        E::Io { .. }
        | E::Wire { .. }
        | E::Truncated { .. }
        | E::NotPrivate { .. }
        | E::Serialization(_) => Kind::Comm.err(message),
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
        E::Io { .. } | E::Auth(_) | E::Refused(_) | E::Protocol(_) => Kind::Comm.err(e.to_string()),
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
        E::Task { .. } => Kind::Task.err(e.to_string()),
        // A checkpoint the job cannot resume from: data it cannot read.
        E::Checkpoint { .. } => Kind::Data.err(e.to_string()),
        // A data-API error raised in a task is itself again; any other layer's is a
        // task failure.
        E::Raised { task: name, kind, source } => match source.downcast::<heddle_data::Error>() {
            Ok(own) => data(*own),
            Err(source) => Kind::Task.err(E::Raised { task: name, kind, source }.to_string()),
        },
    }
}

/// Maps a dataflow operation's error to its exception.
pub(crate) fn dataflow(e: heddle_dataflow::Error) -> PyErr {
    use heddle_dataflow::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        // A record that cannot be encoded, a spill file that cannot be used.
        E::Serialization(_) | E::Io { .. } => Kind::Comm.err(e.to_string()),
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

/// Maps an application's error to its exception.
pub(crate) fn apps(e: heddle_apps::mds::Error) -> PyErr {
    use heddle_apps::mds::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::Input { .. } | E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        E::Output { .. } => Kind::Data.err(e.to_string()),
    }
}

/// Maps a SLAM error to its exception.
pub(crate) fn slam(e: heddle_apps::slam::Error) -> PyErr {
    use heddle_apps::slam::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
    }
}

/// Maps a streaming benchmark's error to its exception.
pub(crate) fn ad_benchmark(e: heddle_apps::ad_benchmark::Error) -> PyErr {
    use heddle_apps::ad_benchmark::Error as E;
    match e {
        E::Comm(inner) => comm(inner),
        E::Data(inner) => data(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        E::Redis(_) | E::Output(_) => Kind::Data.err(e.to_string()),
    }
}

/// Maps a data-API error to its exception.
pub(crate) fn data(e: heddle_data::Error) -> PyErr {
    use heddle_data::Error as E;
    match e {
        E::Task(inner) => task(inner),
        E::Comm(inner) => comm(inner),
        E::InvalidArgument(_) => Kind::Argument.err(e.to_string()),
        E::Io { .. } | E::Parse { .. } | E::Changed { .. } => Kind::Data.err(e.to_string()),
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

/// Maps a bridge's error to its exception: a bad setting is an argument error, a record
/// above the limit a data error, anything the filter did a task error.
pub(crate) fn bridge(e: heddle_bridge::Error) -> PyErr {
    use heddle_bridge::Error as E;
    match e {
        E::Config(_) => Kind::Argument.err(e.to_string()),
        E::RecordTooLarge { .. } | E::Decode { .. } => Kind::Data.err(e.to_string()),
        E::Timeout { .. } => Kind::Timeout.err(e.to_string()),
        _ => Kind::Task.err(e.to_string()),
    }
}
