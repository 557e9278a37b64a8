//! Python tasks inside the native task system: `heddle._heddle.Context` (what a Python
//! task method receives) and the source and compute adapters that call the methods of a
//! Python task object (`prepare`, `next` / `execute`, `tick`, `end_of_input`, `close`).

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::ptr::NonNull;

use heddle_comm::Communicator;
use heddle_dataflow::TaskId;
use heddle_task::{Compute, Context, Produced, Source, Strategy, TaskInfo};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::comm::PyComm;
use crate::errors::{argument, Kind};
use crate::failure;
use crate::record::{pair_from, pair_to, PyKey, PyObj};

/// The shape of the records a task receives, decided by its incoming edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InTag {
    /// A record as it was emitted.
    Obj,
    /// `(task, record)` from a gather edge.
    Tagged,
    /// `(key, value)` from a keyed reduce edge.
    Pair,
    /// `(key, [values])` from a keyed gather edge.
    Group,
}

/// The shape of the records a task emits, decided by its outgoing edges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutTag {
    /// Any object.
    Obj,
    /// `(key, value)` pairs, for keyed edges.
    Pair,
}

/// A record received, handed to Python.
pub(crate) trait InRec: Send + 'static {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>>;
}

impl InRec for PyObj {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        Ok(self.into_bound(py))
    }
}

impl InRec for (TaskId, PyObj) {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        Ok(PyTuple::new(py, [self.0.into_pyobject(py)?.into_any(), self.1.into_bound(py)])?
            .into_any())
    }
}

impl InRec for (PyKey, PyObj) {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        pair_to(py, self.0, self.1.into_bound(py))
    }
}

impl InRec for (PyKey, Vec<PyObj>) {
    fn into_py(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        let values = PyList::new(py, self.1.into_iter().map(|v| v.0))?.into_any();
        pair_to(py, self.0, values)
    }
}

/// A record emitted from Python.
pub(crate) trait OutRec: Clone + Send + 'static {
    const TAG: OutTag;
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self>;
}

impl OutRec for PyObj {
    const TAG: OutTag = OutTag::Obj;
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyObj::new(obj.clone()))
    }
}

impl OutRec for (PyKey, PyObj) {
    const TAG: OutTag = OutTag::Pair;
    fn from_py(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        pair_from(obj)
    }
}

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

/// A strategy from its parts (`on_data`, period in milliseconds, most runs).
pub(crate) fn strategy(
    on_data: bool,
    period_ms: Option<f64>,
    max_runs: Option<u64>,
) -> PyResult<Strategy> {
    let period = match period_ms {
        Some(ms) if !(ms.is_finite() && ms > 0.0) => {
            return Err(argument(format!(
                "a strategy's period must be a positive number of milliseconds, not {ms}"
            )))
        }
        Some(ms) => Some(std::time::Duration::from_secs_f64(ms / 1000.0)),
        None => None,
    };
    let s = match (on_data, period) {
        (true, None) => Strategy::on_data(),
        (true, Some(p)) => Strategy::on_data().every(p),
        (false, Some(p)) => Strategy::periodic(p),
        (false, None) => {
            return Err(argument(
                "a strategy that does not run on data needs a period (every T milliseconds)",
            ))
        }
    };
    Ok(match max_runs {
        Some(k) => s.at_most(k),
        None => s,
    })
}

/// The strategy of a `heddle.task.Strategy` (attributes `runs_on_data`, `period_ms`,
/// `max_runs`).
pub(crate) fn strategy_from(obj: &Bound<'_, PyAny>) -> PyResult<Strategy> {
    let parts = (|| -> PyResult<(bool, Option<f64>, Option<u64>)> {
        Ok((
            obj.getattr("runs_on_data")?.extract()?,
            obj.getattr("period_ms")?.extract()?,
            obj.getattr("max_runs")?.extract()?,
        ))
    })()
    .map_err(|_| argument("expected a heddle.task.Strategy"))?;
    strategy(parts.0, parts.1, parts.2)
}

/// `(on_data, period_ms, max_runs)` of a strategy.
pub(crate) fn strategy_parts(s: Strategy) -> (bool, Option<f64>, Option<u64>) {
    (s.runs_on_data(), s.period().map(|p| p.as_secs_f64() * 1000.0), s.max_runs())
}

/// What a Python task method receives as ``ctx``: emit records, see who and where the
/// task is, its iteration, its vertex's communicator, and change its strategy. Valid only
/// during the call it was passed to.
#[pyclass(unsendable, module = "heddle._heddle", name = "Context")]
pub(crate) struct PyContext {
    current: Cell<Option<NonNull<dyn CtxOps>>>,
    busy: Cell<bool>,
    comm: RefCell<Option<Py<PyAny>>>,
}

impl std::fmt::Debug for PyContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyContext")
            .field("active", &self.current.get().is_some())
            .finish_non_exhaustive()
    }
}

/// Clears a context's task call when the call returns (or unwinds).
struct Installed<'a>(&'a PyContext);

impl Drop for Installed<'_> {
    fn drop(&mut self) {
        self.0.current.set(None);
    }
}

impl PyContext {
    fn new() -> PyContext {
        PyContext { current: Cell::new(None), busy: Cell::new(false), comm: RefCell::new(None) }
    }

    /// Makes `ctx` the context of the task call in progress.
    fn install<'a>(&'a self, ctx: &mut dyn CtxOps) -> Installed<'a> {
        let p: NonNull<dyn CtxOps + '_> = NonNull::from(ctx);
        // SAFETY: only the lifetime is erased; the pointer is cleared by `Installed` before
        // the call that borrowed `ctx` returns, and every use checks it is set.
        let p: NonNull<dyn CtxOps + 'static> = unsafe { std::mem::transmute(p) };
        self.current.set(Some(p));
        Installed(self)
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
    fn strategy(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let (on_data, period_ms, max_runs) = self.with(|c| Ok(strategy_parts(c.strategy())))?;
        Ok(py
            .import("heddle.task")?
            .getattr("Strategy")?
            .call1((on_data, period_ms, max_runs))?
            .unbind())
    }

    /// Changes when the task runs from now on (a ``heddle.task.Strategy``).
    fn set_strategy(&self, strategy: &Bound<'_, PyAny>) -> PyResult<()> {
        let s = strategy_from(strategy)?;
        self.with(|c| {
            c.set_strategy(s);
            Ok(())
        })
    }

    /// The communicator of the vertex's instances (rank = instance index), for
    /// collectives inside the task; only for vertices marked collective.
    fn comm(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(c) = self.comm.borrow().as_ref() {
            return Ok(c.clone_ref(py));
        }
        let name = self.with(|c| Ok(c.info().to_string()))?;
        Err(Kind::Graph.err(format!("task {name} called comm() but its vertex is not marked collective (TaskGraph.collective)")))
    }

    fn __repr__(&self) -> String {
        match self.with(|c| Ok(c.info().to_string())) {
            Ok(t) => format!("<heddle.task.Context of {t}>"),
            Err(_) => "<heddle.task.Context (inactive)>".into(),
        }
    }
}

/// A Python task object and what the adapters need to call it.
pub(crate) struct PyTask {
    /// The task object, or `None` if its factory failed (the failure is recorded).
    obj: Option<Py<PyAny>>,
    /// The bound `next` or `execute` method.
    main: Option<Py<PyAny>>,
    ctx: Py<PyContext>,
    collective: bool,
    has_prepare: bool,
    has_tick: bool,
    has_end: bool,
    has_close: bool,
}

/// The task-system error for a Python exception raised by task `info` (the exception is
/// recorded and raised as itself when the job returns).
fn task_error(info: &TaskInfo, e: PyErr) -> heddle_task::Error {
    let message = e.to_string();
    failure::record(e);
    heddle_task::Error::Task { task: info.to_string(), message }
}

impl PyTask {
    /// Instance `index` from `factory(index)`.
    pub(crate) fn make(factory: &Py<PyAny>, index: u32, collective: bool, main: &str) -> PyTask {
        Python::attach(|py| {
            let ctx = Py::new(py, PyContext::new()).expect("a context object");
            let made = factory.bind(py).call1((index,)).and_then(|obj| {
                let m = obj.getattr(main).map_err(|_| {
                    argument(format!(
                        "a task object needs a {main}() method; {} has none",
                        obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                    ))
                })?;
                Ok((obj, m))
            });
            match made {
                Ok((obj, m)) => {
                    let has = |name: &str| obj.hasattr(name).unwrap_or(false);
                    PyTask {
                        has_prepare: has("prepare"),
                        has_tick: has("tick"),
                        has_end: has("end_of_input"),
                        has_close: has("close"),
                        obj: Some(obj.unbind()),
                        main: Some(m.unbind()),
                        ctx,
                        collective,
                    }
                }
                Err(e) => {
                    failure::record(e);
                    PyTask {
                        obj: None,
                        main: None,
                        ctx,
                        collective,
                        has_prepare: false,
                        has_tick: false,
                        has_end: false,
                        has_close: false,
                    }
                }
            }
        })
    }

    /// Calls `method` (or the main method when `None`) with the context and `record`.
    fn call<I: InRec>(
        &self,
        ctx: &mut dyn CtxOps,
        method: Option<&str>,
        record: Option<I>,
    ) -> heddle_task::Result<Py<PyAny>> {
        let info = ctx.info().clone();
        if failure::failed() {
            return Err(heddle_task::Error::Task {
                task: info.to_string(),
                message: "the job failed (an earlier Python exception)".into(),
            });
        }
        let (Some(obj), Some(main)) = (self.obj.as_ref(), self.main.as_ref()) else {
            return Err(heddle_task::Error::Task {
                task: info.to_string(),
                message: "the task could not be made".into(),
            });
        };
        Python::attach(|py| {
            let pyctx = self.ctx.bind(py);
            let holder = pyctx.borrow();
            let _installed = holder.install(ctx);
            let target = match method {
                Some(m) => obj.bind(py).getattr(m),
                None => Ok(main.bind(py).clone()),
            };
            let result = target.and_then(|f| match record {
                Some(r) => f.call1((pyctx, r.into_py(py)?)),
                None => f.call1((pyctx,)),
            });
            result.map(Bound::unbind).map_err(|e| task_error(&info, e))
        })
    }

    fn prepare(&self, ctx: &mut dyn CtxOps) -> heddle_task::Result<()> {
        if self.collective {
            // The vertex's own communicator for Python: a copy (split) of the task's, made
            // by every instance in its prepare, so it outlives nothing it depends on.
            if let Some(c) = ctx.comm() {
                let own = c.split(Some(0), c.rank() as i64)?.ok_or_else(|| {
                    heddle_task::Error::Graph("the vertex communicator split failed".into())
                })?;
                let info = ctx.info().clone();
                Python::attach(|py| {
                    let comm = PyComm::to_python(py, own).map_err(|e| task_error(&info, e))?;
                    *self.ctx.bind(py).borrow().comm.borrow_mut() = Some(comm);
                    Ok::<_, heddle_task::Error>(())
                })?;
            }
        }
        if self.has_prepare {
            self.call::<PyObj>(ctx, Some("prepare"), None)?;
        }
        Ok(())
    }

    fn close(&self, ctx: &mut dyn CtxOps) -> heddle_task::Result<()> {
        if self.has_close && self.obj.is_some() {
            self.call::<PyObj>(ctx, Some("close"), None)?;
        }
        Ok(())
    }
}

/// A Python source task emitting `O`.
pub(crate) struct PySource<O> {
    pub(crate) task: PyTask,
    pub(crate) _out: PhantomData<fn() -> O>,
}

impl<O: OutRec> Source for PySource<O> {
    type Out = O;

    fn prepare(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        self.task.prepare(ctx)
    }

    fn next(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<Produced> {
        let more = self.task.call::<PyObj>(ctx, None, None)?;
        let info = ctx.info().clone();
        Python::attach(|py| more.bind(py).is_truthy())
            .map(|m| if m { Produced::More } else { Produced::Done })
            .map_err(|e| task_error(&info, e))
    }

    fn close(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        self.task.close(ctx)
    }
}

/// A Python compute (or sink) task receiving `I` and emitting `O`.
pub(crate) struct PyCompute<I, O> {
    pub(crate) task: PyTask,
    pub(crate) _io: PhantomData<fn(I) -> O>,
}

impl<I: InRec, O: OutRec> Compute for PyCompute<I, O> {
    type In = I;
    type Out = O;

    fn prepare(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        self.task.prepare(ctx)
    }

    fn execute(&mut self, ctx: &mut Context<'_, O>, input: I) -> heddle_task::Result<()> {
        self.task.call(ctx, None, Some(input)).map(drop)
    }

    fn tick(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        if self.task.has_tick {
            self.task.call::<PyObj>(ctx, Some("tick"), None)?;
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        if self.task.has_end {
            self.task.call::<PyObj>(ctx, Some("end_of_input"), None)?;
        }
        Ok(())
    }

    fn close(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        self.task.close(ctx)
    }
}

/// Adds the context class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyContext>()
}
