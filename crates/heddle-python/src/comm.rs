//! `heddle._heddle.comm.Comm`: a communicator with mpi4py's buffer methods (`Allreduce`, `Bcast`,
//! `Reduce`, `Allgather`, `Gather`, `Scatter`, `Alltoall`, their `v` forms, `Send`, `Recv`,
//! `Sendrecv`, `Barrier`) working on the caller's buffers in place. The object methods
//! (`bcast`, `send`, ...) are Python, in `heddle/comm.py`, on top of these.
//!
//! This file holds the class, its Python methods and the world it joins; the methods'
//! bodies are in `comm_collectives.rs`, `comm_vector.rs` and `comm_p2p.rs`, their
//! argument checks in `comm_args.rs`.

use std::sync::{Arc, Mutex};

use heddle_comm::Communicator;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::comm_args::InPlace;
use crate::comm_collectives::Reduction;
use crate::errors::{self, argument};
use crate::interrupt::blocking;

/// The world, once joined (`init` returns the same communicator every time).
static WORLD: Mutex<Option<Arc<Communicator>>> = Mutex::new(None);

/// Joins the job started by `heddle run` (or becomes a world of one) and returns the world
/// communicator. Blocks, without the GIL, until every worker has joined.
#[pyfunction]
pub(crate) fn init(py: Python<'_>) -> PyResult<PyComm> {
    crate::interrupt::install();
    let world = blocking(py, || {
        let mut world = WORLD.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(w) = world.as_ref() {
            return Ok(w.clone());
        }
        let w = Arc::new(heddle_runtime::init()?);
        *world = Some(w.clone());
        Ok(w)
    });
    world.map(|inner| PyComm { inner }).map_err(errors::runtime)
}

/// Aborts the job this process has joined, if it has joined one of several workers: a
/// failure here (an exception of kind `kind` in `task`, described by `message`) that every
/// other worker's calls must now report ([`heddle_comm::JobAbort`]). Returns whether this
/// call aborted the job.
pub(crate) fn abort_job(kind: String, task: Option<String>, message: String) -> bool {
    let world = WORLD.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(w) = world else { return false };
    let mut cause = heddle_comm::AbortCause::new(w.world_rank(w.rank()), kind, message);
    cause.task = task;
    w.abort(cause)
}

/// Aborts the job with an exception that nothing caught (``heddle``'s ``sys.excepthook``
/// calls it before the worker exits): every other worker raises ``heddle.JobAborted``
/// carrying ``message``. Returns whether this call aborted the job.
#[pyfunction]
#[pyo3(signature = (kind, message, task = None))]
pub(crate) fn abort_job_with(kind: String, message: String, task: Option<String>) -> bool {
    abort_job(kind, task, message)
}

/// Whether `init` has joined the job in this process.
#[pyfunction]
pub(crate) fn is_initialized() -> bool {
    WORLD.lock().map(|w| w.is_some()).unwrap_or(false)
}

/// A group of ranks running the same program: rank and size, collectives on buffers,
/// tagged point-to-point messages. Every rank must call the same collectives in the same
/// order. Methods that wait for peers release the GIL.
#[pyclass(subclass, frozen, module = "heddle._heddle.comm", name = "Comm")]
#[derive(Debug)]
pub(crate) struct PyComm {
    inner: Arc<Communicator>,
}

impl PyComm {
    /// The communicator.
    pub(crate) fn comm(&self) -> &Communicator {
        &self.inner
    }

    /// The communicator, shared (for task jobs and data sessions built on it).
    pub(crate) fn shared(&self) -> Arc<Communicator> {
        self.inner.clone()
    }

    /// Wraps a communicator made natively (a task vertex's, a session's).
    pub(crate) fn wrap(comm: Communicator) -> PyComm {
        PyComm { inner: Arc::new(comm) }
    }

    /// The public `heddle.Comm` (the Python subclass) around `comm`.
    pub(crate) fn to_python(py: Python<'_>, comm: Communicator) -> PyResult<Py<PyAny>> {
        let native = Py::new(py, PyComm::wrap(comm))?;
        Ok(py.import("heddle.comm")?.getattr("Comm")?.call1((native,))?.unbind())
    }

    /// Rank `r` of this communicator (`what` names it in the error).
    pub(crate) fn rank_arg(&self, r: i64, what: &str) -> PyResult<usize> {
        match usize::try_from(r) {
            Ok(u) if u < self.inner.size() => Ok(u),
            _ => Err(argument(format!(
                "{what} {r} is outside this communicator of {} ranks",
                self.inner.size()
            ))),
        }
    }

    /// Per-rank `counts` in elements as bytes (`what` names the call in the error).
    pub(crate) fn counts_arg(
        &self,
        counts: &[usize],
        what: &str,
        itemsize: usize,
    ) -> PyResult<Vec<usize>> {
        if counts.len() != self.inner.size() {
            return Err(argument(format!(
                "{what}: {} counts for {} ranks",
                counts.len(),
                self.inner.size()
            )));
        }
        Ok(counts.iter().map(|c| c * itemsize).collect())
    }
}

#[pymethods]
impl PyComm {
    /// A new handle on the same communicator (lets Python subclasses wrap a native one).
    #[new]
    fn new(other: &Bound<'_, PyComm>) -> PyComm {
        PyComm { inner: other.get().inner.clone() }
    }

    /// This process's rank, ``0 .. size - 1``.
    #[getter]
    fn rank(&self) -> usize {
        self.inner.rank()
    }

    /// Number of ranks.
    #[getter]
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// Which attempt of the job this is: 0, then 1, 2 ... after restarts.
    #[getter]
    fn attempt(&self) -> u32 {
        self.inner.attempt()
    }

    /// The host of each world rank: equal numbers mean the same host (shared memory
    /// between them).
    #[getter]
    fn hosts(&self) -> Vec<u32> {
        self.inner.hosts().to_vec()
    }

    /// This process's rank (mpi4py spelling).
    #[pyo3(name = "Get_rank")]
    fn get_rank(&self) -> usize {
        self.inner.rank()
    }

    /// Number of ranks (mpi4py spelling).
    #[pyo3(name = "Get_size")]
    fn get_size(&self) -> usize {
        self.inner.size()
    }

    /// Seconds a blocking call waits without progress before raising
    /// ``heddle.TimeoutError`` (``HEDDLE_TIMEOUT_S``).
    #[getter]
    fn timeout(&self) -> f64 {
        self.inner.timeout().as_secs_f64()
    }

    fn __repr__(&self) -> String {
        format!("<heddle.Comm rank={} size={}>", self.inner.rank(), self.inner.size())
    }

    /// Waits until every rank has called it.
    #[pyo3(name = "Barrier")]
    fn barrier_upper(&self, py: Python<'_>) -> PyResult<()> {
        let comm = self.comm();
        blocking(py, || comm.barrier()).map_err(errors::comm)
    }

    /// Waits until every rank has called it.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        self.barrier_upper(py)
    }

    /// Combines every rank's ``sendbuf`` element by element with ``op`` into ``recvbuf`` on
    /// every rank. ``sendbuf`` may be ``heddle.IN_PLACE`` (or ``recvbuf`` itself): the input
    /// is then ``recvbuf``, reduced in place without any copy.
    #[pyo3(name = "Allreduce", signature = (sendbuf, recvbuf, op = None))]
    fn allreduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.allreduce(py, sendbuf, recvbuf, op)
    }

    /// Inclusive prefix reduction: rank r's ``recvbuf`` gets ``sendbuf`` of ranks 0 to r
    /// combined with ``op`` in rank order. ``sendbuf`` may be ``heddle.IN_PLACE``.
    #[pyo3(name = "Scan", signature = (sendbuf, recvbuf, op = None))]
    fn scan_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.in_place_reduction(py, Reduction::Scan, sendbuf, recvbuf, op)
    }

    /// Exclusive prefix reduction: rank r's ``recvbuf`` gets ``sendbuf`` of ranks 0 to
    /// r - 1 combined with ``op`` in rank order; rank 0's ``recvbuf`` is left holding its
    /// own ``sendbuf`` (MPI leaves it undefined).
    #[pyo3(name = "Exscan", signature = (sendbuf, recvbuf, op = None))]
    fn exscan_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.in_place_reduction(py, Reduction::Exscan, sendbuf, recvbuf, op)
    }

    /// Combines every rank's ``sendbuf`` with ``op`` into ``recvbuf`` at ``root`` (other
    /// ranks may pass ``None`` as ``recvbuf``). At the root ``sendbuf`` may be
    /// ``heddle.IN_PLACE``: the input is then ``recvbuf``.
    #[pyo3(name = "Reduce", signature = (sendbuf, recvbuf, op = None, root = 0))]
    fn reduce_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        op: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        self.reduce(py, sendbuf, recvbuf, op, root)
    }

    /// Combines ``sendbuf`` (``size`` equal blocks) across ranks with ``op``; rank i
    /// receives reduced block i in ``recvbuf``.
    #[pyo3(name = "Reduce_scatter_block", signature = (sendbuf, recvbuf, op = None))]
    fn reduce_scatter_block_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.reduce_scatter_block(py, sendbuf, recvbuf, op)
    }

    /// Combines ``sendbuf`` (``size`` blocks of ``recvcounts[i]`` elements) across ranks
    /// with ``op``; rank i receives reduced block i (``recvcounts[i]`` elements) in
    /// ``recvbuf``. Without ``recvcounts`` each rank's block is its ``recvbuf``'s size.
    #[pyo3(name = "Reduce_scatter", signature = (sendbuf, recvbuf, recvcounts = None, op = None))]
    fn reduce_scatter_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
        recvcounts: Option<Vec<usize>>,
        op: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        self.reduce_scatter(py, sendbuf, recvbuf, recvcounts, op)
    }

    /// Copies ``buf`` at ``root`` into ``buf`` on every rank (every rank passes a buffer of
    /// the same size and type).
    #[pyo3(name = "Bcast", signature = (buf, root = 0))]
    fn bcast_buf(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i64) -> PyResult<()> {
        self.bcast(py, buf, root)
    }

    /// Gathers every rank's ``sendbuf`` (equal sizes) into ``recvbuf`` at ``root`` in rank
    /// order (``recvbuf`` holds ``size`` blocks there; other ranks may pass ``None``). At
    /// the root ``sendbuf`` may be ``heddle.IN_PLACE``: its block is already in ``recvbuf``.
    #[pyo3(name = "Gather", signature = (sendbuf, recvbuf, root = 0))]
    fn gather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        self.gather(py, sendbuf, recvbuf, root)
    }

    /// Scatters ``sendbuf`` at ``root`` (``size`` equal blocks; other ranks may pass
    /// ``None``): rank i receives block i in ``recvbuf``. At the root ``recvbuf`` may be
    /// ``heddle.IN_PLACE``: its block stays in ``sendbuf``.
    #[pyo3(name = "Scatter", signature = (sendbuf, recvbuf, root = 0))]
    fn scatter_buf(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        self.scatter(py, sendbuf, recvbuf, root)
    }

    /// Every rank receives every rank's ``sendbuf`` (equal sizes) in ``recvbuf``, in rank
    /// order. ``sendbuf`` may be ``heddle.IN_PLACE``: each rank's block is already in place.
    #[pyo3(name = "Allgather")]
    fn allgather_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.allgather(py, sendbuf, recvbuf)
    }

    /// Block j of rank i's ``sendbuf`` (``size`` equal blocks) goes to block i of rank j's
    /// ``recvbuf``. ``sendbuf`` may be ``heddle.IN_PLACE``: the input is then ``recvbuf``.
    #[pyo3(name = "Alltoall")]
    fn alltoall_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.alltoall(py, sendbuf, recvbuf)
    }

    /// Gathers rank i's ``sendbuf`` (``counts[i]`` elements) at ``root`` into
    /// ``recvbuf = [buffer, counts]``, packed in rank order (other ranks may pass ``None``).
    #[pyo3(name = "Gatherv", signature = (sendbuf, recvbuf, root = 0))]
    fn gatherv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: Option<&Bound<'_, PyAny>>,
        root: i64,
    ) -> PyResult<()> {
        self.gatherv(py, sendbuf, recvbuf, root)
    }

    /// Every rank receives rank i's ``sendbuf`` (``counts[i]`` elements) in
    /// ``recvbuf = [buffer, counts]``, packed in rank order.
    #[pyo3(name = "Allgatherv")]
    fn allgatherv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.allgatherv(py, sendbuf, recvbuf)
    }

    /// Scatters ``sendbuf = [buffer, counts]`` at ``root`` (other ranks may pass ``None``):
    /// rank i receives ``counts[i]`` elements in ``recvbuf``.
    #[pyo3(name = "Scatterv", signature = (sendbuf, recvbuf, root = 0))]
    fn scatterv_buf(
        &self,
        py: Python<'_>,
        sendbuf: Option<&Bound<'_, PyAny>>,
        recvbuf: &Bound<'_, PyAny>,
        root: i64,
    ) -> PyResult<()> {
        self.scatterv(py, sendbuf, recvbuf, root)
    }

    /// Rank i sends ``sendcounts[j]`` elements to rank j and receives ``recvcounts[j]``
    /// from it: ``sendbuf = [buffer, sendcounts]``, ``recvbuf = [buffer, recvcounts]``,
    /// blocks packed in rank order.
    #[pyo3(name = "Alltoallv")]
    fn alltoallv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        recvbuf: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.alltoallv(py, sendbuf, recvbuf)
    }

    /// Sends ``buf`` to rank ``dest`` with ``tag``; returns once the data has left ``buf``.
    #[pyo3(name = "Send", signature = (buf, dest, tag = 0))]
    fn send_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        dest: i64,
        tag: i64,
    ) -> PyResult<()> {
        self.send(py, buf, dest, tag)
    }

    /// Receives the message from rank ``source`` with ``tag`` into ``buf``; returns the
    /// number of elements received (the message may be shorter than ``buf``, not longer).
    #[pyo3(name = "Recv", signature = (buf, source, tag = 0))]
    fn recv_buf(
        &self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        source: i64,
        tag: i64,
    ) -> PyResult<usize> {
        self.recv(py, buf, source, tag)
    }

    /// Sends ``sendbuf`` to ``dest`` and receives from ``source`` into ``recvbuf`` at once
    /// (no deadlock when ranks exchange pairwise); returns the number of elements received.
    /// Both directions use one tag: ``recvtag`` defaults to ``sendtag`` and must equal it.
    #[pyo3(
        name = "Sendrecv",
        signature = (sendbuf, dest, sendtag = 0, recvbuf = None, source = None, recvtag = None)
    )]
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_buf(
        &self,
        py: Python<'_>,
        sendbuf: &Bound<'_, PyAny>,
        dest: i64,
        sendtag: i64,
        recvbuf: Option<&Bound<'_, PyAny>>,
        source: Option<i64>,
        recvtag: Option<i64>,
    ) -> PyResult<usize> {
        self.sendrecv(py, sendbuf, dest, sendtag, recvbuf, source, recvtag)
    }

    /// Receives a whole message of any length from ``source`` with ``tag`` as ``bytes``
    /// (used by the object methods).
    #[pyo3(signature = (source, tag = 0))]
    fn _recv_bytes<'py>(
        &self,
        py: Python<'py>,
        source: i64,
        tag: i64,
    ) -> PyResult<Bound<'py, PyBytes>> {
        self.recv_bytes(py, source, tag)
    }

    /// Splits into sub-communicators (collective): ranks passing the same ``color`` form
    /// one, ordered by ``(key, rank)``; a ``color`` of ``None`` or below 0 gives ``None``.
    #[pyo3(signature = (color, key = 0))]
    fn _split(&self, py: Python<'_>, color: Option<i64>, key: i64) -> PyResult<Option<PyComm>> {
        let color = match color {
            None => None,
            Some(c) if c < 0 => None,
            Some(c) => Some(
                u32::try_from(c)
                    .map_err(|_| argument(format!("color {c} is larger than 4294967295")))?,
            ),
        };
        let comm = self.comm();
        let sub = blocking(py, || comm.split(color, key)).map_err(errors::comm)?;
        Ok(sub.map(|c| PyComm { inner: Arc::new(c) }))
    }
}

/// Adds the communicator API to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyComm>()?;
    m.add_class::<InPlace>()?;
    m.add("IN_PLACE", Py::new(m.py(), InPlace)?)?;
    m.add_function(pyo3::wrap_pyfunction!(init, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(is_initialized, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(abort_job_with, m)?)?;
    Ok(())
}
