//! `heddle._heddle.task.Context`: what a Python task method receives, valid during that call
//! ([`PyContext`]), over a native task context with its output type erased ([`CtxOps`]).

use std::cell::{Cell, RefCell};
use std::ptr::NonNull;

use heddle_comm::Communicator;
use heddle_task::{Context, Strategy, TaskInfo};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::errors::{argument, Kind};
use crate::task_records::OutRec;
use crate::task_strategy::{strategy_from, PyStrategy};

/// A native task context with its output type erased.
pub(crate) trait CtxOps {
    fn emit(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()>;
    fn emitted(&self) -> usize;
    fn info(&self) -> &TaskInfo;
    fn strategy(&self) -> Strategy;
    fn set_strategy(&mut self, s: Strategy);
    fn iteration(&self) -> &[u64];
    fn comm(&self) -> Option<&Communicator>;
}

impl<O: OutRec> CtxOps for Context<'_, O> {
    fn emit(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let record = O::from_py(obj)?;
        Context::emit(self, record);
        Ok(())
    }
    fn emitted(&self) -> usize {
        Context::emitted(self)
    }
    fn info(&self) -> &TaskInfo {
        Context::info(self)
    }
    fn strategy(&self) -> Strategy {
        Context::strategy(self)
    }
    fn set_strategy(&mut self, s: Strategy) {
        Context::set_strategy(self, s);
    }
    fn iteration(&self) -> &[u64] {
        Context::iteration(self)
    }
    fn comm(&self) -> Option<&Communicator> {
        Context::comm(self).ok()
    }
}

/// What a Python task method receives as ``ctx``: emit records, see who and where the
/// task is, its iteration, its vertex's communicator, and change its strategy. Valid only
/// during the call it was passed to; its ``state`` is the task's own (checkpointed).
#[pyclass(unsendable, module = "heddle._heddle.task", name = "Context")]
pub(crate) struct PyContext {
    current: Cell<Option<NonNull<dyn CtxOps>>>,
    busy: Cell<bool>,
    comm: RefCell<Option<Py<PyAny>>>,
    /// The task's state (``ctx.state``): pickled at each checkpoint, restored on resume.
    state: RefCell<Option<Py<PyAny>>>,
}

impl std::fmt::Debug for PyContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyContext")
            .field("active", &self.current.get().is_some())
            .finish_non_exhaustive()
    }
}

/// Clears a context's task call when the call returns (or unwinds).
pub(crate) struct Installed<'a>(&'a PyContext);

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        self.0.current.set(None);
    }
}

impl PyContext {
    /// A context with no task call in progress.
    pub(crate) fn new() -> PyContext {
        PyContext {
            current: Cell::new(None),
            busy: Cell::new(false),
            comm: RefCell::new(None),
            state: RefCell::new(None),
        }
    }

    /// The task's state (``None``: it keeps none).
    pub(crate) fn state(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.state.borrow().as_ref().map(|s| s.clone_ref(py))
    }

    /// Sets the task's state (restored from a checkpoint).
    pub(crate) fn set_state_object(&self, state: Option<Py<PyAny>>) {
        *self.state.borrow_mut() = state;
    }

    /// Makes `ctx` the context of the task call in progress.
    pub(crate) fn install<'a>(&'a self, ctx: &mut dyn CtxOps) -> Installed<'a> {
        let p: NonNull<dyn CtxOps + '_> = NonNull::from(ctx);
        // SAFETY: only the lifetime is erased; the pointer is cleared by `Installed` before
        // the call that borrowed `ctx` returns, and every use checks it is set.
        let p: NonNull<dyn CtxOps + 'static> = unsafe { std::mem::transmute(p) };
        self.current.set(Some(p));
        Installed(self)
    }

    /// Sets the communicator `comm()` returns (a collective vertex's, made in `prepare`).
    pub(crate) fn set_comm(&self, comm: Py<PyAny>) {
        *self.comm.borrow_mut() = Some(comm);
    }

    fn with<R>(&self, f: impl FnOnce(&mut dyn CtxOps) -> PyResult<R>) -> PyResult<R> {
        let Some(mut p) = self.current.get() else {
            return Err(argument(
                "this task context is used outside the task call it was passed to",
            ));
        };
        if self.busy.replace(true) {
            return Err(argument(
                "the task context is already in use (a nested call from inside emit)",
            ));
        }
        // SAFETY: set only during the task call (see `install`); `busy` rules out a second
        // mutable reference from a nested call.
        let r = f(unsafe { p.as_mut() });
        self.busy.set(false);
        r
    }
}

#[pymethods]
impl PyContext {
    /// Sends ``record`` on every outgoing edge of the task.
    fn emit(&self, record: &Bound<'_, PyAny>) -> PyResult<()> {
        self.with(|c| c.emit(record))
    }

    /// Emits every record of ``records`` (any iterable).
    fn emit_all(&self, records: &Bound<'_, PyAny>) -> PyResult<()> {
        self.with(|c| {
            for r in records.try_iter()? {
                c.emit(&r?)?;
            }
            Ok(())
        })
    }

    /// Records emitted in this call so far.
    #[getter]
    fn emitted(&self) -> PyResult<usize> {
        self.with(|c| Ok(c.emitted()))
    }

    /// The vertex's name.
    #[getter]
    fn name(&self) -> PyResult<String> {
        self.with(|c| Ok(c.info().name.clone()))
    }

    /// This instance's index among the vertex's instances.
    #[getter]
    fn index(&self) -> PyResult<u32> {
        self.with(|c| Ok(c.info().index))
    }

    /// The vertex's number of instances.
    #[getter]
    fn parallelism(&self) -> PyResult<u32> {
        self.with(|c| Ok(c.info().parallelism))
    }

    /// The instance's task id (unique in the job).
    #[getter]
    fn task(&self) -> PyResult<u32> {
        self.with(|c| Ok(c.info().task))
    }

    /// Rank of the worker running the task.
    #[getter]
    fn worker(&self) -> PyResult<usize> {
        self.with(|c| Ok(c.info().worker))
    }

    /// The iteration counters, outermost first (empty outside iterations).
    #[getter]
    fn iteration<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let it = self.with(|c| Ok(c.iteration().to_vec()))?;
        PyTuple::new(py, it)
    }

    /// The current strategy (a ``heddle.task.Strategy``).
    #[getter]
    fn strategy(&self) -> PyResult<PyStrategy> {
        self.with(|c| Ok(PyStrategy(c.strategy())))
    }

    /// Changes when the task runs from now on (a ``heddle.task.Strategy``).
    fn set_strategy(&self, strategy: &Bound<'_, PyAny>) -> PyResult<()> {
        let s = strategy_from(strategy)?;
        self.with(|c| {
            c.set_strategy(s);
            Ok(())
        })
    }

    /// The task's own state: any picklable object (``None`` at first), pickled at each
    /// checkpoint of a checkpointed streaming job and restored when it resumes. Unlike the
    /// rest of the context it stays valid between calls.
    #[getter]
    fn get_state(&self, py: Python<'_>) -> Py<PyAny> {
        self.state(py).unwrap_or_else(|| py.None())
    }

    #[setter]
    fn set_state(&self, state: Option<Bound<'_, PyAny>>) {
        let state = state.filter(|s| !s.is_none()).map(Bound::unbind);
        self.set_state_object(state);
    }

    /// The communicator of the vertex's instances (rank = instance index), for
    /// collectives inside the task; only for vertices marked collective.
    fn comm(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(c) = self.comm.borrow().as_ref() {
            return Ok(c.clone_ref(py));
        }
        let name = self.with(|c| Ok(c.info().to_string()))?;
        Err(Kind::Graph.err(format!(
            "task {name} called comm() but its vertex is not marked collective \
             (TaskGraph.collective)"
        )))
    }

    fn __repr__(&self) -> String {
        match self.with(|c| Ok(c.info().to_string())) {
            Ok(t) => format!("<heddle.task.Context of {t}>"),
            Err(_) => "<heddle.task.Context (inactive)>".into(),
        }
    }
}

/// Adds the context class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyContext>()
}
