//! The adapters that run a Python task object as a native source or compute task
//! ([`PySource`], [`PyCompute`]), calling its methods (`prepare`, `next` / `execute`,
//! `tick`, `end_of_input`, `committed`, `close`) through a [`PyTask`]. At a checkpoint the
//! task's `ctx.state` is pickled; a resumed job unpickles it before `prepare`.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};

use heddle_task::{Compute, Context, Produced, Source, TaskInfo};
use pyo3::prelude::*;

use crate::comm::PyComm;
use crate::errors::argument;
use crate::failure;
use crate::record::{self, PyObj};
use crate::task_context::{CtxOps, PyContext};
use crate::task_records::{InRec, OutRec};

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
    has_committed: bool,
}

/// The task-system error for a Python exception raised by task `info` (the exception is
/// recorded and raised as itself when the job returns; in an isolated process, which
/// ends on it, its text is the error the worker reports).
fn task_error(info: &TaskInfo, e: PyErr) -> heddle_task::Error {
    let message = e.to_string();
    if !FORKED.load(Ordering::Relaxed) {
        failure::record(e);
    }
    heddle_task::Error::Task { task: info.to_string(), message }
}

/// Set in an isolated task's process, whose failures end it (and reach the worker as
/// text) instead of being recorded to be raised.
static FORKED: AtomicBool = AtomicBool::new(false);

/// Whether this is an isolated task's process.
pub(crate) fn forked() -> bool {
    FORKED.load(Ordering::Relaxed)
}

/// The hooks every isolated task of a Python worker forks through (a task graph's
/// vertex or a data set's stage alike).
pub(crate) const FORK_HOOKS: heddle_task::ForkHooks =
    heddle_task::ForkHooks { fork: fork_interpreter, before_exit: flush_output };

/// Forks the process of an isolated Python task as `os.fork` does: the interpreter's
/// lock held across the fork (no other thread is inside Python when it happens), its
/// `os.register_at_fork` hooks run, and its state reset in the child, whose only thread
/// is this one. The child starts with everything the worker imported (heddle, numpy,
/// the task object as built): the worker is its own fork server.
fn fork_interpreter(fork: &mut dyn FnMut() -> i32) -> i32 {
    Python::attach(|_py| {
        // SAFETY: called with the interpreter's lock held, as the C API asks, and each
        // `PyOS_AfterFork_*` on the side of the fork it is for.
        unsafe {
            pyo3::ffi::PyOS_BeforeFork();
            let pid = fork();
            if pid == 0 {
                pyo3::ffi::PyOS_AfterFork_Child();
                FORKED.store(true, Ordering::Relaxed);
            } else {
                pyo3::ffi::PyOS_AfterFork_Parent();
            }
            pid
        }
    })
}

/// Flushes `sys.stdout` and `sys.stderr` (an isolated process leaves with `_exit`, not
/// Python's own exit, which would).
fn flush_output() {
    Python::attach(|py| {
        if let Ok(sys) = py.import("sys") {
            for name in ["stdout", "stderr"] {
                if let Ok(stream) = sys.getattr(name) {
                    let _ = stream.call_method0("flush");
                }
            }
        }
    });
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
                        has_committed: has("committed"),
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
                        has_committed: false,
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
                    self.ctx.bind(py).borrow().set_comm(comm);
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

    /// `ctx.state` pickled (`None`: no state). Refused once the run has failed: the
    /// records whose calls were skipped must not count as done in a checkpoint.
    fn snapshot(
        &self,
        ctx: &mut dyn CtxOps,
        checkpoint: u64,
    ) -> heddle_task::Result<Option<Vec<u8>>> {
        let info = ctx.info().clone();
        if failure::failed() {
            return Err(heddle_task::Error::Task {
                task: info.to_string(),
                message: format!(
                    "checkpoint {checkpoint} is not taken: the job failed (an earlier Python \
                     exception)"
                ),
            });
        }
        Python::attach(|py| {
            let Some(state) = self.ctx.bind(py).borrow().state(py) else { return Ok(None) };
            record::dumps(state.bind(py)).map(Some).map_err(|e| {
                let why = format!(
                    "ctx.state of task {info} does not pickle for checkpoint {checkpoint}: {e}"
                );
                task_error(&info, pyo3::exceptions::PyTypeError::new_err(why))
            })
        })
    }

    /// Sets `ctx.state` from a checkpoint (before `prepare`).
    fn restore(&self, ctx: &mut dyn CtxOps, state: &[u8]) -> heddle_task::Result<()> {
        let info = ctx.info().clone();
        Python::attach(|py| {
            // The user's own file, private and owner-checked when it was read.
            let s = record::loads(py, state).map_err(|e| task_error(&info, e))?;
            self.ctx.bind(py).borrow().set_state_object(Some(s.unbind()));
            Ok(())
        })
    }

    /// Calls `committed(ctx, checkpoint)` if the task has it.
    fn committed(&self, ctx: &mut dyn CtxOps, checkpoint: u64) -> heddle_task::Result<()> {
        if self.has_committed && self.obj.is_some() {
            let id = Python::attach(|py| {
                PyObj::new(checkpoint.into_pyobject(py).expect("an int").into_any())
            });
            self.call(ctx, Some("committed"), Some(id))?;
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

    fn snapshot(
        &mut self,
        ctx: &mut Context<'_, O>,
        id: u64,
    ) -> heddle_task::Result<Option<Vec<u8>>> {
        self.task.snapshot(ctx, id)
    }

    fn restore(&mut self, ctx: &mut Context<'_, O>, state: &[u8]) -> heddle_task::Result<()> {
        self.task.restore(ctx, state)
    }

    fn committed(&mut self, ctx: &mut Context<'_, O>, id: u64) -> heddle_task::Result<()> {
        self.task.committed(ctx, id)
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

    fn snapshot(
        &mut self,
        ctx: &mut Context<'_, O>,
        id: u64,
    ) -> heddle_task::Result<Option<Vec<u8>>> {
        self.task.snapshot(ctx, id)
    }

    fn restore(&mut self, ctx: &mut Context<'_, O>, state: &[u8]) -> heddle_task::Result<()> {
        self.task.restore(ctx, state)
    }

    fn committed(&mut self, ctx: &mut Context<'_, O>, id: u64) -> heddle_task::Result<()> {
        self.task.committed(ctx, id)
    }

    fn close(&mut self, ctx: &mut Context<'_, O>) -> heddle_task::Result<()> {
        self.task.close(ctx)
    }
}
