//! `heddle._heddle.Comm`: a communicator with mpi4py's buffer methods (`Allreduce`, `Bcast`,
//! `Reduce`, `Allgather`, `Gather`, `Scatter`, `Alltoall`, their `v` forms, `Send`, `Recv`,
//! `Sendrecv`, `Barrier`) working on the caller's buffers in place. The object methods
//! (`bcast`, `send`, ...) are Python, in `heddle/comm.py`, on top of these.

use std::sync::{Arc, Mutex};

use heddle_comm::Communicator;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::buffer::{Buffer, Region};
use crate::errors::{self, argument};
use crate::interrupt::blocking;
use crate::op::{typed, with_element, OpCode, PyOp};

/// Marker for `sendbuf` (or, for `Scatter` at the root, `recvbuf`): the data is already in
/// the other buffer (mpi4py's `MPI.IN_PLACE`).
#[pyclass(frozen, module = "heddle._heddle", name = "InPlace")]
#[derive(Debug)]
pub(crate) struct InPlace;

#[pymethods]
impl InPlace {
    fn __repr__(&self) -> &'static str {
        "heddle.IN_PLACE"
    }

    fn __reduce__(&self) -> &'static str {
        "IN_PLACE"
    }
}

fn in_place(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<InPlace>()
}

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
#[pyclass(subclass, frozen, module = "heddle._heddle", name = "Comm")]
#[derive(Debug)]
pub(crate) struct PyComm {
    inner: Arc<Communicator>,
}

/// The operator argument (SUM when absent).
fn op_code(op: Option<&Bound<'_, PyAny>>) -> PyResult<OpCode> {
    match op {
        None => Ok(OpCode::Sum),
        Some(o) => match o.cast::<PyOp>() {
            Ok(op) => Ok(op.get().code),
            Err(_) => Err(argument(format!(
                "op must be one of heddle.SUM, PROD, MAX, MIN, LAND, LOR, BAND, BOR, BXOR, not {}",
                o.repr().map(|r| r.to_string()).unwrap_or_else(|_| "?".into())
            ))),
        },
    }
}

/// Fails unless the two buffers have the same element type.
fn check_pair(
    what: &str,
    send: &Buffer,
    send_name: &str,
    recv: &Buffer,
    recv_name: &str,
) -> PyResult<()> {
    if !send.same_type(recv) {
        return Err(argument(format!(
            "{what}: {send_name} ({}) and {recv_name} ({}) have different element types",
            send.describe(),
            recv.describe()
        )));
    }
    Ok(())
}

fn check_len(
    what: &str,
    name: &str,
    buf: &Buffer,
    expected_bytes: usize,
    why: &str,
) -> PyResult<()> {
    if buf.bytes() != expected_bytes {
        return Err(argument(format!(
            "{what}: {name} is {} but must hold {} elements ({why})",
            buf.describe(),
            expected_bytes / buf.itemsize
        )));
    }
    Ok(())
}

/// A typed region of `buf`, checked for alignment.
fn aligned(buf: &Buffer, name: &str) -> PyResult<Region> {
    let r = buf.region();
    if !r.aligned_for(buf.itemsize.min(8)) {
        return Err(argument(format!(
            "{name} is not aligned for its {}-byte elements; copy it first",
            buf.itemsize
        )));
    }
    Ok(r)
}

/// A `[buffer, counts]` argument of the `v` collectives (counts in elements).
fn vspec<'py>(obj: &Bound<'py, PyAny>, name: &str) -> PyResult<(Bound<'py, PyAny>, Vec<usize>)> {
    let parts: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<PyList>() {
        l.iter().collect()
    } else if let Ok(t) = obj.cast::<PyTuple>() {
        t.iter().collect()
    } else {
        return Err(argument(format!(
            "{name} must be [buffer, counts] (counts in elements, one per rank)"
        )));
    };
    if parts.len() != 2 {
        return Err(argument(format!(
            "{name} must be [buffer, counts]; displacements and datatypes are not supported (blocks are packed in rank order, the type is the buffer's)"
        )));
    }
    let counts: Vec<i64> = parts[1].extract().map_err(|_| {
        argument(format!("{name}: counts must be a sequence of element counts, one per rank"))
    })?;
    let counts = counts
        .into_iter()
        .map(|c| {
            usize::try_from(c).map_err(|_| argument(format!("{name}: counts must not be negative")))
        })
        .collect::<PyResult<Vec<usize>>>()?;
    Ok((parts[0].clone(), counts))
}

impl PyComm {
    fn comm(&self) -> &Communicator {
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

    fn rank_arg(&self, r: i64, what: &str) -> PyResult<usize> {
        match usize::try_from(r) {
            Ok(u) if u < self.inner.size() => Ok(u),
            _ => Err(argument(format!(
                "{what} {r} is outside this communicator of {} ranks",
                self.inner.size()
            ))),
        }
    }

    fn counts_arg(&self, counts: &[usize], what: &str, itemsize: usize) -> PyResult<Vec<usize>> {
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

fn tag_arg(tag: i64) -> PyResult<u32> {
    u32::try_from(tag).map_err(|_| argument(format!("tag {tag} is not in 0..=4294967295")))
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
        let code = op_code(op)?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        code.check(recv.dtype, "Allreduce")?;
        let region = aligned(&recv, "recvbuf")?;
        if !in_place(sendbuf) && !sendbuf.is(recvbuf) {
            let send = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair("Allreduce", &send, "sendbuf", &recv, "recvbuf")?;
            check_len("Allreduce", "sendbuf", &send, recv.bytes(), "as many as recvbuf")?;
            // SAFETY: both buffers are exported; recvbuf is writable.
            unsafe { region.copy_from(send.region()) };
        }
        let (comm, dtype) = (self.comm(), recv.dtype);
        // SAFETY: recvbuf stays exported until after the call; it is writable and aligned.
        blocking(py, || with_element!(dtype, T => comm.allreduce(unsafe { region.typed_mut::<T>() }, typed::<T>(code))))
            .map_err(errors::comm)
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
        let root = self.rank_arg(root, "root")?;
        let code = op_code(op)?;
        let is_root = self.inner.rank() == root;
        let recv = match (is_root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(r)) => Some(Buffer::get(r, true, "recvbuf")?),
            (true, None) => return Err(argument("Reduce: the root must pass a recvbuf")),
            (false, _) => None,
        };
        let send =
            if in_place(sendbuf) { None } else { Some(Buffer::get(sendbuf, false, "sendbuf")?) };
        let mut _temp = None;
        let (send_region, dtype) = match (send.as_ref(), recv.as_ref()) {
            (None, None) => {
                return Err(argument("Reduce: sendbuf may be heddle.IN_PLACE only at the root"))
            }
            (None, Some(r)) => {
                // SAFETY: recvbuf is exported.
                let (words, copy) = unsafe { r.region().to_temp() };
                _temp = Some(words);
                (copy, r.dtype)
            }
            (Some(s), r) => {
                let mut region = aligned(s, "sendbuf")?;
                if let Some(r) = r {
                    check_pair("Reduce", s, "sendbuf", r, "recvbuf")?;
                    check_len("Reduce", "recvbuf", r, s.bytes(), "as many as sendbuf")?;
                    // SAFETY: sendbuf is exported.
                    (region, _temp) = unsafe { region.apart_from(r.region()) };
                }
                (region, s.dtype)
            }
        };
        code.check(dtype, "Reduce")?;
        let recv_region = match recv.as_ref() {
            Some(r) => aligned(r, "recvbuf")?,
            None => Region::scratch(0).1,
        };
        let comm = self.comm();
        // SAFETY: every region is exported (or owned here) until after the call, the
        // receive region is writable and distinct from the send region, both aligned.
        let result = blocking(py, || {
            with_element!(dtype, T => comm.reduce(
                unsafe { send_region.typed::<T>() },
                unsafe { recv_region.typed_mut::<T>() },
                typed::<T>(code),
                root
            ))
        });
        drop(send);
        result.map_err(errors::comm)
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
        let code = op_code(op)?;
        if in_place(sendbuf) {
            return Err(argument(
                "Reduce_scatter_block: heddle.IN_PLACE is not supported; pass sendbuf",
            ));
        }
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        check_pair("Reduce_scatter_block", &send, "sendbuf", &recv, "recvbuf")?;
        check_len(
            "Reduce_scatter_block",
            "sendbuf",
            &send,
            recv.bytes() * self.inner.size(),
            "size blocks as large as recvbuf",
        )?;
        code.check(recv.dtype, "Reduce_scatter_block")?;
        let (send_region, recv_region) = (aligned(&send, "sendbuf")?, aligned(&recv, "recvbuf")?);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let (comm, dtype) = (self.comm(), recv.dtype);
        // SAFETY: as in `Reduce`.
        blocking(py, || {
            with_element!(dtype, T => comm.reduce_scatter_block(
                unsafe { send_region.typed::<T>() },
                unsafe { recv_region.typed_mut::<T>() },
                typed::<T>(code)
            ))
        })
        .map_err(errors::comm)
    }

    /// Copies ``buf`` at ``root`` into ``buf`` on every rank (every rank passes a buffer of
    /// the same size and type).
    #[pyo3(name = "Bcast", signature = (buf, root = 0))]
    fn bcast_buf(&self, py: Python<'_>, buf: &Bound<'_, PyAny>, root: i64) -> PyResult<()> {
        let root = self.rank_arg(root, "root")?;
        let is_root = self.inner.rank() == root;
        let b = Buffer::get(buf, !is_root, "buf")?;
        let mut region = b.region();
        let mut _temp = None;
        if is_root && !b.writable {
            // The algorithm may write the root's own bytes back: give it a private copy.
            // SAFETY: buf is exported.
            let (words, copy) = unsafe { region.to_temp() };
            (region, _temp) = (copy, Some(words));
        }
        let comm = self.comm();
        // SAFETY: buf (or its copy) stays alive until after the call and is writable.
        blocking(py, || comm.broadcast(unsafe { region.bytes_mut() }, root)).map_err(errors::comm)
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
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.inner.size(), self.inner.rank());
        let recv = match (me == root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(r)) => Some(Buffer::get(r, true, "recvbuf")?),
            (true, None) => return Err(argument("Gather: the root must pass a recvbuf")),
            (false, _) => None,
        };
        let send =
            if in_place(sendbuf) { None } else { Some(Buffer::get(sendbuf, false, "sendbuf")?) };
        let mut _temp = None;
        let mut send_region = match (send.as_ref(), recv.as_ref()) {
            (None, None) => {
                return Err(argument("Gather: sendbuf may be heddle.IN_PLACE only at the root"))
            }
            (None, Some(r)) => {
                if r.bytes() % p != 0 {
                    return Err(argument(format!(
                        "Gather: recvbuf ({}) does not split into {p} equal blocks",
                        r.describe()
                    )));
                }
                let block = r.bytes() / p;
                // SAFETY: recvbuf is exported.
                let (words, copy) = unsafe { r.region().slice(me * block, block).to_temp() };
                _temp = Some(words);
                copy
            }
            (Some(s), r) => {
                if let Some(r) = r {
                    check_pair("Gather", s, "sendbuf", r, "recvbuf")?;
                    check_len("Gather", "recvbuf", r, s.bytes() * p, "one sendbuf per rank")?;
                }
                s.region()
            }
        };
        let recv_region = recv.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        if send.is_some() && send_region.overlaps(recv_region) {
            // SAFETY: sendbuf is exported.
            let (words, copy) = unsafe { send_region.to_temp() };
            (send_region, _temp) = (copy, Some(words));
        }
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.gather(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() }, root)
        })
        .map_err(errors::comm)
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
        let root = self.rank_arg(root, "root")?;
        let (p, is_root) = (self.inner.size(), self.inner.rank() == root);
        let send = match (is_root, sendbuf.filter(|s| !s.is_none())) {
            (true, Some(s)) => Some(Buffer::get(s, false, "sendbuf")?),
            (true, None) => return Err(argument("Scatter: the root must pass a sendbuf")),
            (false, _) => None,
        };
        let mut _temp = None;
        let (recv, recv_region) = if in_place(recvbuf) {
            let Some(s) = send.as_ref() else {
                return Err(argument("Scatter: recvbuf may be heddle.IN_PLACE only at the root"));
            };
            if s.bytes() % p != 0 {
                return Err(argument(format!(
                    "Scatter: sendbuf ({}) does not split into {p} equal blocks",
                    s.describe()
                )));
            }
            let (words, scratch) = Region::scratch(s.bytes() / p);
            _temp = Some(words);
            (None, scratch)
        } else {
            let r = Buffer::get(recvbuf, true, "recvbuf")?;
            let region = r.region();
            (Some(r), region)
        };
        let send_region = send.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        if let (Some(s), Some(r)) = (send.as_ref(), recv.as_ref()) {
            check_pair("Scatter", s, "sendbuf", r, "recvbuf")?;
            check_len("Scatter", "sendbuf", s, r.bytes() * p, "one recvbuf per rank")?;
        }
        // SAFETY: sendbuf is exported.
        let (send_region, _send_copy) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.scatter(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() }, root)
        })
        .map_err(errors::comm)
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
        let (p, me) = (self.inner.size(), self.inner.rank());
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let recv_region = recv.region();
        let mut _temp = None;
        let (_send, send_region) = if in_place(sendbuf) {
            if recv.bytes() % p != 0 {
                return Err(argument(format!(
                    "Allgather: recvbuf ({}) does not split into {p} equal blocks",
                    recv.describe()
                )));
            }
            let block = recv.bytes() / p;
            // SAFETY: recvbuf is exported.
            let (words, copy) = unsafe { recv_region.slice(me * block, block).to_temp() };
            _temp = Some(words);
            (None, copy)
        } else {
            let s = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair("Allgather", &s, "sendbuf", &recv, "recvbuf")?;
            check_len("Allgather", "recvbuf", &recv, s.bytes() * p, "one sendbuf per rank")?;
            let mut region = s.region();
            // SAFETY: sendbuf is exported.
            (region, _temp) = unsafe { region.apart_from(recv_region) };
            (Some(s), region)
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.allgather(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() })
        })
        .map_err(errors::comm)
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
        let p = self.inner.size();
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let recv_region = recv.region();
        if recv.bytes() % p != 0 {
            return Err(argument(format!(
                "Alltoall: recvbuf ({}) does not split into {p} equal blocks",
                recv.describe()
            )));
        }
        let mut _temp = None;
        let (_send, send_region) = if in_place(sendbuf) || sendbuf.is(recvbuf) {
            // SAFETY: recvbuf is exported.
            let (words, copy) = unsafe { recv_region.to_temp() };
            _temp = Some(words);
            (None, copy)
        } else {
            let s = Buffer::get(sendbuf, false, "sendbuf")?;
            check_pair("Alltoall", &s, "sendbuf", &recv, "recvbuf")?;
            check_len("Alltoall", "sendbuf", &s, recv.bytes(), "as many as recvbuf")?;
            let mut region = s.region();
            // SAFETY: sendbuf is exported.
            (region, _temp) = unsafe { region.apart_from(recv_region) };
            (Some(s), region)
        };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.alltoall(unsafe { send_region.bytes() }, unsafe { recv_region.bytes_mut() })
        })
        .map_err(errors::comm)
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
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.inner.size(), self.inner.rank());
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let (recv, counts) = match (me == root, recvbuf.filter(|r| !r.is_none())) {
            (true, Some(spec)) => {
                let (b, counts) = vspec(spec, "recvbuf")?;
                let r = Buffer::get(&b, true, "recvbuf")?;
                check_pair("Gatherv", &send, "sendbuf", &r, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Gatherv", r.itemsize)?;
                (Some(r), counts)
            }
            (true, None) => {
                return Err(argument("Gatherv: the root must pass recvbuf = [buffer, counts]"))
            }
            (false, _) => {
                // Only the root reads counts; ours must match our buffer.
                let mut counts = vec![0; p];
                counts[me] = send.bytes();
                (None, counts)
            }
        };
        let send_region = send.region();
        let recv_region = recv.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.gatherv(
                unsafe { send_region.bytes() },
                unsafe { recv_region.bytes_mut() },
                &counts,
                root,
            )
        })
        .map_err(errors::comm)
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
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let (b, counts) = vspec(recvbuf, "recvbuf")?;
        let recv = Buffer::get(&b, true, "recvbuf")?;
        check_pair("Allgatherv", &send, "sendbuf", &recv, "recvbuf")?;
        let counts = self.counts_arg(&counts, "Allgatherv", recv.itemsize)?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.allgatherv(
                unsafe { send_region.bytes() },
                unsafe { recv_region.bytes_mut() },
                &counts,
            )
        })
        .map_err(errors::comm)
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
        let root = self.rank_arg(root, "root")?;
        let (p, me) = (self.inner.size(), self.inner.rank());
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let (send, counts) = match (me == root, sendbuf.filter(|s| !s.is_none())) {
            (true, Some(spec)) => {
                let (b, counts) = vspec(spec, "sendbuf")?;
                let s = Buffer::get(&b, false, "sendbuf")?;
                check_pair("Scatterv", &s, "sendbuf", &recv, "recvbuf")?;
                let counts = self.counts_arg(&counts, "Scatterv", s.itemsize)?;
                (Some(s), counts)
            }
            (true, None) => {
                return Err(argument("Scatterv: the root must pass sendbuf = [buffer, counts]"))
            }
            (false, _) => {
                let mut counts = vec![0; p];
                counts[me] = recv.bytes();
                (None, counts)
            }
        };
        let send_region = send.as_ref().map_or(Region::scratch(0).1, Buffer::region);
        let recv_region = recv.region();
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.scatterv(
                unsafe { send_region.bytes() },
                &counts,
                unsafe { recv_region.bytes_mut() },
                root,
            )
        })
        .map_err(errors::comm)
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
        let (sb, send_counts) = vspec(sendbuf, "sendbuf")?;
        let (rb, recv_counts) = vspec(recvbuf, "recvbuf")?;
        let send = Buffer::get(&sb, false, "sendbuf")?;
        let recv = Buffer::get(&rb, true, "recvbuf")?;
        check_pair("Alltoallv", &send, "sendbuf", &recv, "recvbuf")?;
        let send_counts = self.counts_arg(&send_counts, "Alltoallv", send.itemsize)?;
        let recv_counts = self.counts_arg(&recv_counts, "Alltoallv", recv.itemsize)?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        blocking(py, || {
            comm.alltoallv(
                unsafe { send_region.bytes() },
                &send_counts,
                unsafe { recv_region.bytes_mut() },
                &recv_counts,
            )
        })
        .map_err(errors::comm)
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
        let dest = self.rank_arg(dest, "dest")?;
        let tag = tag_arg(tag)?;
        let b = Buffer::get(buf, false, "buf")?;
        let (region, dtype) = (b.region(), b.dtype.wire());
        let comm = self.comm();
        // SAFETY: buf stays exported until after the call.
        blocking(py, || comm.send_as(unsafe { region.bytes() }, dtype, dest, tag))
            .map_err(errors::comm)
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
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(tag)?;
        let b = Buffer::get(buf, true, "buf")?;
        let (region, dtype) = (b.region(), b.dtype.wire());
        let comm = self.comm();
        // SAFETY: buf stays exported until after the call and is writable.
        let n = blocking(py, || comm.recv_as(unsafe { region.bytes_mut() }, dtype, source, tag))
            .map_err(errors::comm)?;
        if n % b.itemsize != 0 {
            return Err(argument(format!(
                "Recv: rank {source} sent {n} bytes, not a whole number of {}-byte elements of the receive buffer ({})",
                b.itemsize,
                b.describe()
            )));
        }
        Ok(n / b.itemsize)
    }

    /// Sends ``sendbuf`` to ``dest`` and receives from ``source`` into ``recvbuf`` at once
    /// (no deadlock when ranks exchange pairwise); returns the number of elements received.
    /// Both directions use one tag: ``recvtag`` defaults to ``sendtag`` and must equal it.
    #[pyo3(name = "Sendrecv", signature = (sendbuf, dest, sendtag = 0, recvbuf = None, source = None, recvtag = None))]
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
        let dest = self.rank_arg(dest, "dest")?;
        let Some(source) = source else {
            return Err(argument("Sendrecv: pass source= (heddle has no ANY_SOURCE)"));
        };
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(sendtag)?;
        if recvtag.is_some_and(|t| t != sendtag) {
            return Err(argument(
                "Sendrecv: heddle uses one tag for both directions; recvtag must equal sendtag",
            ));
        }
        let Some(recvbuf) = recvbuf else { return Err(argument("Sendrecv: pass recvbuf=")) };
        let send = Buffer::get(sendbuf, false, "sendbuf")?;
        let recv = Buffer::get(recvbuf, true, "recvbuf")?;
        let (send_region, recv_region) = (send.region(), recv.region());
        // SAFETY: sendbuf is exported.
        let (send_region, _temp) = unsafe { send_region.apart_from(recv_region) };
        let comm = self.comm();
        // SAFETY: regions stay alive until after the call; the receive side is writable.
        let n = blocking(py, || {
            comm.sendrecv(
                unsafe { send_region.bytes() },
                dest,
                unsafe { recv_region.bytes_mut() },
                source,
                tag,
            )
        })
        .map_err(errors::comm)?;
        Ok(n / recv.itemsize)
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
        let source = self.rank_arg(source, "source")?;
        let tag = tag_arg(tag)?;
        let comm = self.comm();
        let v = blocking(py, || comm.recv_bytes(source, tag)).map_err(errors::comm)?;
        Ok(PyBytes::new(py, &v))
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
