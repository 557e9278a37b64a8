//! Non-blocking point-to-point messages for Python: `heddle._heddle.comm.Request` and the
//! functions that post them (`isend`, `irecv`, `irecv_bytes`), wait for several
//! (`waitall`, `waitany`), and probe. `heddle.MPI` builds mpi4py's `Request`, `Status`,
//! `Isend`/`Irecv`, wildcard receives and probes on these.

use pyo3::prelude::*;
use pyo3::types::PyByteArray;

use heddle_comm::{Request, Status};

use crate::buffer::Buffer;
use crate::comm::PyComm;
use crate::comm_args::tag_arg;
use crate::errors::{self, argument};
use crate::interrupt::blocking;

/// A buffer export kept alive, so its memory stays put, while a request uses it: only
/// its release, when dropped, matters.
struct Held {
    _export: Buffer,
}

// SAFETY: the export is only created and released with the GIL held (the request is a
// Python object, dropped by Python); the engine only touches the memory it points to.
unsafe impl Send for Held {}
unsafe impl Sync for Held {}

/// A non-blocking send or receive under way (``heddle._heddle.comm.Request``). Its
/// buffer is held until it is dropped; ``heddle.MPI.Request`` wraps it.
#[pyclass(module = "heddle._heddle.comm", name = "Request")]
pub(crate) struct PyRequest {
    // Declared before `held`: dropping the request detaches it from the engine before
    // the buffer's export is released.
    req: Request,
    held: Option<Held>,
}

/// A status as a tuple `(source, tag, bytes)`.
type StatusTuple = (usize, u32, usize);

fn tuple(s: Option<Status>) -> Option<StatusTuple> {
    s.map(|s| (s.source, s.tag, s.bytes))
}

#[pymethods]
impl PyRequest {
    /// Blocks until finished; returns ``(source, tag, bytes)`` for a receive, ``None``
    /// for a send or a cancelled receive. Waiting again returns the same at once.
    fn wait(&mut self, py: Python<'_>) -> PyResult<Option<StatusTuple>> {
        let req = &mut self.req;
        blocking(py, || req.wait()).map(tuple).map_err(errors::comm)
    }

    /// Moves the links once; returns whether it has finished.
    fn test(&mut self, py: Python<'_>) -> PyResult<bool> {
        let req = &mut self.req;
        blocking(py, || req.test()).map_err(errors::comm)
    }

    /// Whether it has finished, without moving the links (cheaper than ``test``).
    #[getter]
    fn done(&mut self) -> bool {
        self.req.is_done()
    }

    /// ``(source, tag, bytes)`` of the received message once finished.
    fn status(&self) -> Option<StatusTuple> {
        tuple(self.req.status())
    }

    /// Cancels a receive no message has started to match; returns whether it did.
    fn cancel(&mut self) -> bool {
        self.req.cancel()
    }

    /// Whether ``cancel`` cancelled it.
    #[getter]
    fn cancelled(&self) -> bool {
        self.req.is_cancelled()
    }

    /// The message of a finished ``irecv_bytes`` as a ``bytearray`` (once).
    fn take_bytes<'py>(&mut self, py: Python<'py>) -> Option<Bound<'py, PyByteArray>> {
        self.req.take_bytes().map(|v| PyByteArray::new(py, &v))
    }

    /// Releases the buffer of a finished request at once.
    fn release(&mut self) -> PyResult<()> {
        if !self.req.is_done() {
            return Err(argument("release: the request has not finished"));
        }
        self.held = None;
        Ok(())
    }
}

fn source_arg(comm: &PyComm, source: Option<i64>) -> PyResult<Option<usize>> {
    source.map(|s| comm.rank_arg(s, "source")).transpose()
}

fn any_tag_arg(tag: Option<i64>) -> PyResult<Option<u32>> {
    tag.map(tag_arg).transpose()
}

/// Starts sending ``buf`` (any contiguous buffer; typed if numeric) to ``dest``;
/// ``sync=True``: the request finishes once a receive on ``dest`` has matched it
/// (``Issend``), not when the data has left.
#[pyfunction]
#[pyo3(signature = (comm, buf, dest, tag = 0, sync = false))]
fn isend(
    comm: &PyComm,
    buf: &Bound<'_, PyAny>,
    dest: i64,
    tag: i64,
    sync: bool,
) -> PyResult<PyRequest> {
    let dest = comm.rank_arg(dest, "dest")?;
    let tag = tag_arg(tag)?;
    let b = Buffer::get(buf, false, "buf")?;
    let region = b.region();
    let (ptr, dtype) = (region.ptr.cast_const(), b.dtype.wire());
    let c = comm.comm();
    // SAFETY: the request holds the export until it has finished or detached.
    let req = unsafe {
        if sync {
            c.issend_raw(ptr, region.len, dtype, dest, tag)
        } else {
            c.isend_raw(ptr, region.len, dtype, dest, tag)
        }
    }
    .map_err(errors::comm)?;
    Ok(PyRequest { req, held: Some(Held { _export: b }) })
}

/// Starts receiving into ``buf`` from ``source`` (``None``: any) with ``tag`` (``None``:
/// any); a typed buffer refuses a message of another element type.
#[pyfunction]
#[pyo3(signature = (comm, buf, source = None, tag = None))]
fn irecv(
    comm: &PyComm,
    buf: &Bound<'_, PyAny>,
    source: Option<i64>,
    tag: Option<i64>,
) -> PyResult<PyRequest> {
    let source = source_arg(comm, source)?;
    let tag = any_tag_arg(tag)?;
    let b = Buffer::get(buf, true, "buf")?;
    let region = b.region();
    // SAFETY: as in `isend`; the buffer was exported writable.
    let req = unsafe { comm.comm().irecv_raw(region.ptr, region.len, b.dtype.wire(), source, tag) }
        .map_err(errors::comm)?;
    Ok(PyRequest { req, held: Some(Held { _export: b }) })
}

/// Starts receiving a message of any length (``Request.take_bytes`` gets it).
#[pyfunction]
#[pyo3(signature = (comm, source = None, tag = None))]
fn irecv_bytes(comm: &PyComm, source: Option<i64>, tag: Option<i64>) -> PyResult<PyRequest> {
    let (source, tag) = (source_arg(comm, source)?, any_tag_arg(tag)?);
    let req = comm.comm().irecv_bytes(source, tag).map_err(errors::comm)?;
    Ok(PyRequest { req, held: None })
}

/// ``(source, tag, bytes)`` of the next message from ``source`` with ``tag`` (``None``:
/// any) without receiving it; ``block=False`` only looks (``None`` if there is none).
#[pyfunction]
#[pyo3(signature = (comm, source = None, tag = None, block = true))]
fn probe(
    py: Python<'_>,
    comm: &PyComm,
    source: Option<i64>,
    tag: Option<i64>,
    block: bool,
) -> PyResult<Option<StatusTuple>> {
    let (source, tag) = (source_arg(comm, source)?, any_tag_arg(tag)?);
    let c = comm.comm();
    let found = if block {
        blocking(py, || c.probe(source, tag)).map(Some)
    } else {
        blocking(py, || c.iprobe(source, tag))
    };
    found.map(tuple).map_err(errors::comm)
}

fn requests<'py>(reqs: &[Bound<'py, PyRequest>]) -> PyResult<Vec<PyRefMut<'py, PyRequest>>> {
    reqs.iter().map(|r| r.try_borrow_mut().map_err(|e| argument(e.to_string()))).collect()
}

/// Waits for every request; returns their statuses.
#[pyfunction]
fn waitall(py: Python<'_>, reqs: Vec<Bound<'_, PyRequest>>) -> PyResult<Vec<Option<StatusTuple>>> {
    let mut refs = requests(&reqs)?;
    let mut raw: Vec<&mut Request> = refs.iter_mut().map(|r| &mut r.req).collect();
    let statuses = blocking(py, || Request::wait_all(&mut raw)).map_err(errors::comm)?;
    Ok(statuses.into_iter().map(tuple).collect())
}

/// Waits until one unfinished request finishes; returns its index, or ``None`` if every
/// one had finished before.
#[pyfunction]
fn waitany(py: Python<'_>, reqs: Vec<Bound<'_, PyRequest>>) -> PyResult<Option<usize>> {
    let mut refs = requests(&reqs)?;
    let mut raw: Vec<&mut Request> = refs.iter_mut().map(|r| &mut r.req).collect();
    let found = blocking(py, || Request::wait_any(&mut raw)).map_err(errors::comm)?;
    Ok(found.map(|(i, _)| i))
}

/// The world ranks of a communicator's members, in its rank order.
#[pyfunction]
fn world_ranks(comm: &PyComm) -> Vec<usize> {
    let c = comm.comm();
    (0..c.size()).map(|r| c.world_rank(r)).collect()
}

/// A communicator of this process alone (``COMM_SELF``), made without communicating.
#[pyfunction]
fn self_comm(comm: &PyComm) -> PyComm {
    PyComm::wrap(comm.comm().self_comm())
}

/// The same ranks in a context of their own (``heddle.MPI``'s non-blocking collectives).
#[pyfunction]
fn shadow_comm(comm: &PyComm) -> PyComm {
    PyComm::wrap(comm.comm().shadow())
}

/// Adds the request API to `heddle._heddle.comm`.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyRequest>()?;
    for f in [
        pyo3::wrap_pyfunction!(isend, m)?,
        pyo3::wrap_pyfunction!(irecv, m)?,
        pyo3::wrap_pyfunction!(irecv_bytes, m)?,
        pyo3::wrap_pyfunction!(probe, m)?,
        pyo3::wrap_pyfunction!(waitall, m)?,
        pyo3::wrap_pyfunction!(waitany, m)?,
        pyo3::wrap_pyfunction!(world_ranks, m)?,
        pyo3::wrap_pyfunction!(self_comm, m)?,
        pyo3::wrap_pyfunction!(shadow_comm, m)?,
    ] {
        m.add_function(f)?;
    }
    Ok(())
}
