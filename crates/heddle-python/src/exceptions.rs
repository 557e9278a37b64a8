//! The exception classes of `heddle.errors`, made here in the extension module and
//! re-exported by `python/heddle/errors.py`: one class per kind of error, all rooted at
//! `HeddleError` (the tree is drawn in that file's docstring).
//!
//! Classes with one base are `create_exception!` types. `create_exception!` cannot give a
//! class a second base, so the four that also are builtin errors (`ConfigError`,
//! `ArgumentError` and `GraphError` are `ValueError`s, `ArgumentError` a `TypeError` too,
//! `TimeoutError` a `builtins.TimeoutError`) are made once by calling
//! `type(name, bases, namespace)` and kept in a [`PyOnceLock`]. Every class says
//! `heddle.errors` as its module, where users find it.

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyTimeoutError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};

/// The module every class names as its own (`__module__`).
const MODULE: &str = "heddle.errors";

create_exception!(
    heddle.errors,
    HeddleError,
    PyException,
    "Base class of every error Heddle raises."
);

create_exception!(
    heddle.errors,
    CommError,
    HeddleError,
    "Communication failed: an I/O error, malformed data from a peer, a message longer than \
     the receive buffer, or a failed job bootstrap."
);

create_exception!(
    heddle.errors,
    WorkerFailed,
    CommError,
    "A peer worker is gone (it exited, crashed or was stopped); the job cannot continue.\n\n\
     ``rank`` is the lost worker's world rank when known, else ``None``."
);

create_exception!(
    heddle.errors,
    LaunchError,
    HeddleError,
    "The launcher could not start a worker program (for example, it does not exist)."
);

create_exception!(
    heddle.errors,
    PlanError,
    HeddleError,
    "A task graph cannot be placed on the workers: the message names the first task that \
     does not fit and what it is short of."
);

create_exception!(
    heddle.errors,
    TaskError,
    HeddleError,
    "A task failed inside the native task system (for example, a task object could not be \
     made). Exceptions raised by Python task code are raised as themselves instead."
);

create_exception!(
    heddle.errors,
    DataError,
    HeddleError,
    "Input data cannot be read or parsed: a missing file, a malformed CSV or JSON row (the \
     message names the file and line), text that is not UTF-8."
);

create_exception!(
    heddle.errors,
    JobAborted,
    HeddleError,
    "Another worker of the job failed, so the whole job stopped: every pending and later \
     call on this worker raises this, and no result is produced.\n\n\
     ``origin`` is the world rank that failed first, ``task`` the task it failed in (or \
     ``None``), ``kind`` its error's kind (a Python exception class such as \
     ``\"ValueError\"``, or a Heddle error kind such as ``\"Timeout\"``); the message \
     carries the origin's error text (for Python, its traceback)."
);

/// A class of `heddle.errors` that is also a builtin error: made on first use by
/// `type(name, bases, {"__doc__": doc, "__module__": "heddle.errors"})`, then kept.
pub(crate) struct MixedClass {
    name: &'static str,
    doc: &'static str,
    bases: fn(Python<'_>) -> Vec<Bound<'_, PyType>>,
    class: PyOnceLock<Py<PyType>>,
}

impl MixedClass {
    /// The class (the same object every time).
    pub(crate) fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyType>> {
        let class = self.class.get_or_try_init(py, || -> PyResult<Py<PyType>> {
            let bases = PyTuple::new(py, (self.bases)(py))?;
            let namespace = PyDict::new(py);
            namespace.set_item("__doc__", self.doc)?;
            namespace.set_item("__module__", MODULE)?;
            let made = py.get_type::<PyType>().call1((self.name, bases, namespace))?;
            Ok(made.cast_into::<PyType>()?.unbind())
        })?;
        Ok(class.bind(py).clone())
    }
}

/// `ConfigError(HeddleError, ValueError)`.
pub(crate) static CONFIG_ERROR: MixedClass = MixedClass {
    name: "ConfigError",
    doc: "A ``HEDDLE_*`` setting, a launcher flag or the launcher environment is wrong.",
    bases: |py| vec![py.get_type::<HeddleError>(), py.get_type::<PyValueError>()],
    class: PyOnceLock::new(),
};

/// `ArgumentError(HeddleError, ValueError, TypeError)`.
pub(crate) static ARGUMENT_ERROR: MixedClass = MixedClass {
    name: "ArgumentError",
    doc: "An argument cannot be right: a rank, root or tag out of range, a buffer of the \
          wrong size, type or layout, an operator that does not apply to the element type.",
    bases: |py| {
        let own = py.get_type::<HeddleError>();
        vec![own, py.get_type::<PyValueError>(), py.get_type::<PyTypeError>()]
    },
    class: PyOnceLock::new(),
};

/// `TimeoutError(CommError, builtins.TimeoutError)`.
pub(crate) static TIMEOUT_ERROR: MixedClass = MixedClass {
    name: "TimeoutError",
    doc: "A blocking call made no progress for ``HEDDLE_TIMEOUT_S`` seconds (or workers did \
          not all join within ``HEDDLE_INIT_TIMEOUT_S``). Also a \
          :class:`builtins.TimeoutError`.",
    bases: |py| vec![py.get_type::<CommError>(), py.get_type::<PyTimeoutError>()],
    class: PyOnceLock::new(),
};

/// `GraphError(HeddleError, ValueError)`.
pub(crate) static GRAPH_ERROR: MixedClass = MixedClass {
    name: "GraphError",
    doc: "A task graph is malformed: a vertex of parallelism 0, duplicate names, an edge \
          into a source, a cycle, a direct edge between vertices of different parallelism, a \
          vertex whose edges deliver records of different shapes.",
    bases: |py| vec![py.get_type::<HeddleError>(), py.get_type::<PyValueError>()],
    class: PyOnceLock::new(),
};

/// Every class, root first, in the order of the tree in `heddle.errors`.
pub(crate) fn all(py: Python<'_>) -> PyResult<Vec<Bound<'_, PyType>>> {
    Ok(vec![
        py.get_type::<HeddleError>(),
        CONFIG_ERROR.get(py)?,
        ARGUMENT_ERROR.get(py)?,
        py.get_type::<CommError>(),
        TIMEOUT_ERROR.get(py)?,
        py.get_type::<WorkerFailed>(),
        py.get_type::<LaunchError>(),
        GRAPH_ERROR.get(py)?,
        py.get_type::<PlanError>(),
        py.get_type::<TaskError>(),
        py.get_type::<DataError>(),
        py.get_type::<JobAborted>(),
    ])
}

/// Adds every class to `m` under its name, with the attributes some of them carry
/// (`WorkerFailed.rank`; `JobAborted.origin`, `.task`, `.kind`) set to `None` on the class.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    py.get_type::<WorkerFailed>().setattr("rank", py.None())?;
    let aborted = py.get_type::<JobAborted>();
    for attribute in ["origin", "task", "kind"] {
        aborted.setattr(attribute, py.None())?;
    }
    for class in all(py)? {
        m.add(class.name()?, class)?;
    }
    Ok(())
}
