//! Planning and running task graphs of Python tasks: `heddle._heddle.task.Plan`, `Job` and
//! `StopHandle`, and `discover` (the workers of a communicator).

use std::path::PathBuf;
use std::sync::Arc;

use heddle_comm::Communicator;
use heddle_dataflow::Options;
use heddle_task::{
    AbortHandle, DataLocality, Enforcement, FirstFit, Job, Plan, Report, RoundRobin, Scheduler,
    StopHandle, WorkerSpec,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::checkpointing;
use crate::comm::PyComm;
use crate::errors::{self, argument};
use crate::failure;
use crate::interrupt::{abortable, blocking, blocking_here};
use crate::task_graph::PyTaskGraph;

/// A worker as ``(rank, host, cpu, memory)``.
type WorkerTuple = (usize, String, f64, u64);

/// Every worker of ``comm`` with its host and what it offers: its share of the host's
/// cores and memory (machine, control groups, Slurm) or ``heddle run --cpus-per-worker
/// --memory-per-worker`` (collective).
#[pyfunction]
pub(crate) fn discover(py: Python<'_>, comm: &PyComm) -> PyResult<Vec<WorkerTuple>> {
    let c = comm.shared();
    let specs = blocking(py, || WorkerSpec::discover(&c)).map_err(errors::task)?;
    Ok(specs.into_iter().map(|w| (w.rank, w.host, w.cpus, w.memory)).collect())
}

/// Bytes in an amount such as ``"200MiB"``; ``ValueError`` saying what is wrong.
#[pyfunction]
pub(crate) fn parse_bytes(text: &str) -> PyResult<u64> {
    heddle_task::parse_bytes(text).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Cores in ``text`` (positive); ``ValueError`` saying what is wrong.
#[pyfunction]
pub(crate) fn parse_cpus(text: &str) -> PyResult<f64> {
    heddle_task::parse_cpus(text).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Where every task instance of a graph runs (see ``heddle.task.Plan``).
#[pyclass(frozen, module = "heddle._heddle.task", name = "Plan")]
#[derive(Debug)]
pub(crate) struct PyPlan {
    plan: Plan,
}

/// Plans ``graph`` on ``workers`` with the scheduler named ``scheduler``.
#[pyfunction]
pub(crate) fn make_plan(
    py: Python<'_>,
    graph: &PyTaskGraph,
    workers: Vec<WorkerTuple>,
    scheduler: &str,
) -> PyResult<PyPlan> {
    let g = graph.build(py)?;
    let world: Vec<WorkerSpec> = workers
        .into_iter()
        .map(|(rank, host, cpu, memory)| WorkerSpec { rank, host, cpus: cpu, memory })
        .collect();
    let s: &dyn Scheduler = match scheduler {
        "round_robin" => &RoundRobin,
        "first_fit" => &FirstFit,
        "data_locality" => &DataLocality,
        other => {
            return Err(argument(format!(
                "unknown scheduler {other:?}; use round_robin, first_fit or data_locality"
            )))
        }
    };
    Ok(PyPlan { plan: Plan::new(&g, &world, s).map_err(errors::task)? })
}

#[pymethods]
impl PyPlan {
    /// For each vertex, the worker (index into ``world``) of each instance.
    #[getter]
    fn workers(&self) -> Vec<Vec<usize>> {
        self.plan.workers.clone()
    }

    /// Task id of instance 0 of each vertex.
    #[getter]
    fn first_task(&self) -> Vec<u32> {
        self.plan.first_task.clone()
    }

    /// ``(name, kind, parallelism)`` of each vertex (kind: source, compute or sink).
    #[getter]
    fn vertices(&self) -> Vec<(String, String, u32)> {
        self.plan
            .vertices
            .iter()
            .map(|(n, k, p)| (n.clone(), format!("{k:?}").to_lowercase(), *p))
            .collect()
    }

    /// ``(from, to, kind, chained)`` of each edge.
    #[getter]
    fn edges(&self) -> Vec<(usize, usize, String, bool)> {
        self.plan.edges.iter().map(|e| (e.from, e.to, format!("{:?}", e.kind), e.chained)).collect()
    }

    /// The workers planned for, as ``(rank, host, cpu, memory)``.
    #[getter]
    fn world(&self) -> Vec<WorkerTuple> {
        self.plan.world.iter().map(|w| (w.rank, w.host.clone(), w.cpus, w.memory)).collect()
    }

    fn __str__(&self) -> String {
        self.plan.to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "<heddle.task.Plan of {} vertices on {} workers>",
            self.plan.vertices.len(),
            self.plan.world.len()
        )
    }
}

/// Ends a streaming job or stream run from anywhere (another thread, a task, a callback).
#[pyclass(frozen, module = "heddle._heddle.task", name = "StopHandle")]
#[derive(Debug)]
pub(crate) struct PyStopHandle(pub(crate) StopHandle);

#[pymethods]
impl PyStopHandle {
    /// A handle not stopped yet, to give a stream run (``Stream.run(stop=...)``).
    #[new]
    fn new() -> PyStopHandle {
        PyStopHandle(StopHandle::default())
    }

    /// Asks the job to end: its sources end their output and the job drains.
    fn stop(&self) {
        self.0.stop();
    }
}

/// The task instances of a plan on this worker (see ``heddle.task.Job``).
#[pyclass(unsendable, module = "heddle._heddle.task", name = "Job")]
pub(crate) struct PyJob {
    // Declared before `comm`, so dropped before it: the job borrows the communicator.
    job: Option<Job<'static>>,
    stop: StopHandle,
    /// Aborts a run at Ctrl-C.
    abort: AbortHandle,
    plan: Plan,
    streaming: bool,
    comm: Arc<Communicator>,
}

impl std::fmt::Debug for PyJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyJob")
            .field("open", &self.job.is_some())
            .field("streaming", &self.streaming)
            .finish_non_exhaustive()
    }
}

fn report(py: Python<'_>, r: &Report) -> PyResult<Py<PyAny>> {
    let d = PyDict::new(py);
    d.set_item("passes", r.passes)?;
    d.set_item("job_s", r.job_s)?;
    let tasks = r
        .tasks
        .iter()
        .map(|t| {
            let x = PyDict::new(py);
            x.set_item("task", &t.task)?;
            x.set_item("worker", t.worker)?;
            x.set_item("executed", t.executed)?;
            x.set_item("ticks", t.ticks)?;
            x.set_item("emitted", t.emitted)?;
            x.set_item("discarded", t.discarded)?;
            if let Some(u) = &t.process {
                let p = PyDict::new(py);
                p.set_item("peak_bytes", u.peak_bytes)?;
                p.set_item("cpu_s", u.cpu_s)?;
                p.set_item("wall_s", u.wall_s)?;
                p.set_item("start_s", u.start_s)?;
                p.set_item("confine_s", u.confine_s)?;
                let how = match u.enforcement {
                    Enforcement::Cgroup { v2: true } => "cgroup v2",
                    Enforcement::Cgroup { v2: false } => "cgroup v1",
                    Enforcement::Rlimit => "rlimit",
                    Enforcement::None => "none",
                };
                p.set_item("enforcement", how)?;
                x.set_item("process", p)?;
            }
            Ok(x)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("tasks", tasks)?;
    let checkpoints = r
        .checkpoints
        .iter()
        .map(|c| (c.checkpoint, c.duration_ms, c.bytes, c.last))
        .collect::<Vec<_>>();
    d.set_item("checkpoints", checkpoints)?;
    Ok(d.into_any().unbind())
}

impl PyJob {
    fn job(&mut self) -> PyResult<&mut Job<'static>> {
        self.job.as_mut().ok_or_else(|| argument("the job has ended (run() or close() was called)"))
    }
}

#[pymethods]
impl PyJob {
    /// Instantiates this worker's tasks of ``plan`` (collective); a streaming job
    /// checkpoints every ``checkpoint_interval`` seconds into ``checkpoint_dir`` as job
    /// ``job`` if either is given (see `checkpointing`).
    #[new]
    #[pyo3(signature = (
        comm,
        graph,
        plan,
        streaming = false,
        budget_bytes = None,
        batch_bytes = None,
        checkpoint_interval = None,
        checkpoint_dir = None,
        job = None
    ))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, all with defaults
    fn new(
        py: Python<'_>,
        comm: &PyComm,
        graph: &PyTaskGraph,
        plan: &PyPlan,
        streaming: bool,
        budget_bytes: Option<u64>,
        batch_bytes: Option<u64>,
        checkpoint_interval: Option<f64>,
        checkpoint_dir: Option<PathBuf>,
        job: Option<String>,
    ) -> PyResult<PyJob> {
        let job_name = job.unwrap_or_else(|| "heddle-job".into());
        let checkpoints =
            checkpointing::resolve(checkpoint_interval, checkpoint_dir, &job_name, None)?;
        if checkpoints.is_some() && !streaming {
            return Err(argument(
                "checkpoints are taken of streaming jobs: give mode=\"streaming\", or leave \
                 checkpoint_interval and checkpoint_dir out",
            ));
        }
        let shared = comm.shared();
        // SAFETY: the job borrows the communicator, which `PyJob` keeps alive (in `comm`)
        // until after the job is dropped (fields drop in declaration order).
        let c: &'static Communicator = unsafe { &*Arc::as_ptr(&shared) };
        let g = graph.build(py)?;
        let mut opts = if streaming { Options::streaming() } else { Options::batch() };
        if let Some(b) = budget_bytes {
            opts.budget_bytes = b;
        }
        if let Some(b) = batch_bytes {
            opts.batch_bytes = b as usize;
        }
        let p = plan.plan.clone();
        // One executor thread, the caller's: Python tasks run under the GIL anyway, and a
        // run's first exception is kept per thread (see `failure`).
        let abort = AbortHandle::default();
        let (job, raised) = blocking_here(py, || {
            failure::scope(|| {
                Job::new(c, &g, &p, opts).map(|j| {
                    let j = j.threads(1).abort_with(abort.clone());
                    match checkpoints {
                        Some(config) => j.checkpoint(config),
                        None => j,
                    }
                })
            })
        });
        let job = errors::of_run(job, raised, errors::task)?;
        Ok(PyJob {
            stop: job.stop_handle(),
            abort,
            job: Some(job),
            plan: plan.plan.clone(),
            streaming,
            comm: shared,
        })
    }

    /// Runs the graph once (prepare, one pass, close) and returns the report.
    fn run(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let job = self
            .job
            .take()
            .ok_or_else(|| argument("the job has ended (run() or close() was called)"))?;
        let (r, raised) = abortable(py, &self.abort, || failure::scope(|| job.run()));
        let r = errors::of_run(r, raised, errors::task)?;
        report(py, &r)
    }

    /// Runs nested loops of passes: ``counts = [outer, inner, ...]``.
    fn iterate(&mut self, py: Python<'_>, counts: Vec<u64>) -> PyResult<()> {
        let abort = self.abort.clone();
        let job = self.job()?;
        let (r, raised) = abortable(py, &abort, || failure::scope(|| job.iterate(&counts)));
        errors::of_run(r, raised, errors::task)
    }

    /// Runs one pass with the iteration counters ``iteration``.
    fn one_pass(&mut self, py: Python<'_>, iteration: Vec<u64>) -> PyResult<()> {
        let abort = self.abort.clone();
        let job = self.job()?;
        let (r, raised) = abortable(py, &abort, || failure::scope(|| job.pass(&iteration)));
        errors::of_run(r, raised, errors::task)
    }

    /// Closes every task and returns the report.
    fn close(&mut self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let job = self
            .job
            .take()
            .ok_or_else(|| argument("the job has ended (run() or close() was called)"))?;
        let (r, raised) = blocking_here(py, || failure::scope(|| job.close()));
        let r = errors::of_run(r, raised, errors::task)?;
        report(py, &r)
    }

    /// A handle that ends a streaming job (from a task or another thread).
    fn stop_handle(&self) -> PyStopHandle {
        PyStopHandle(self.stop.clone())
    }

    /// The plan the job runs.
    #[getter]
    fn plan(&self) -> PyPlan {
        PyPlan { plan: self.plan.clone() }
    }

    /// ``"batch"`` or ``"streaming"``.
    #[getter]
    fn mode(&self) -> &'static str {
        if self.streaming {
            "streaming"
        } else {
            "batch"
        }
    }

    /// Rank of this worker in the job's communicator.
    #[getter]
    fn rank(&self) -> usize {
        self.comm.rank()
    }
}

/// Adds planning and jobs to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPlan>()?;
    m.add_class::<PyJob>()?;
    m.add_class::<PyStopHandle>()?;
    m.add_function(pyo3::wrap_pyfunction!(discover, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(parse_bytes, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(parse_cpus, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(make_plan, m)?)?;
    Ok(())
}
