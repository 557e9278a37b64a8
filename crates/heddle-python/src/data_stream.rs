//! `heddle._heddle.data.Stream`: a `heddle_data::Stream` of Python records — sources (lists,
//! paced generators, sockets, growing files, Redis Streams), the record-wise steps of data
//! sets, keyed windows reduced by a Python function, and sinks that run until the sources
//! end or the run is stopped (a stop handle, a timeout, a count of records). Keyed state
//! is in `data_stream_state`, windows in `data_window`; a session's checkpoints apply to
//! every run (its file sinks then commit at each checkpoint).
//!
//! Failures: as in a data set, the first Python exception of a run is kept, the run's later
//! Python calls are skipped and the exception is raised as itself (see `failure`,
//! `data_set`). In a world of one the exception also stops the run's sources; on several
//! workers it aborts the whole job (`failure::record`), so every worker's run ends at once
//! — the others raise `heddle.JobAborted` — even while other workers' sources go on.

use std::collections::HashMap;
use std::io::Write;
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::time::Duration;

use heddle_data::{Error, Stream};
use heddle_task::StopHandle;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::data_output::part_bytes;
use crate::data_session::{call_or_none, PySession};
use crate::data_set::{filter_step, flat_map_step, guarded, key_by_step, map_step};
use crate::data_window::{timestamp, window_of, windowed};
use crate::errors::{self, argument, Kind};
use crate::failure;
use crate::interrupt::abortable;
use crate::record::{pair_from, PyObj};
use crate::task_graph::combine;
use crate::task_job::PyStopHandle;

/// An unbounded, lazily described stream of Python objects (see ``heddle.data.Stream``).
#[pyclass(unsendable, module = "heddle._heddle.data", name = "Stream")]
pub(crate) struct PyStream {
    st: Stream<PyObj>,
    session: u64,
    workers: usize,
}

impl std::fmt::Debug for PyStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.st)
    }
}

/// A Python `str` record.
fn text(line: String) -> PyObj {
    Python::attach(|py| PyObj::new(PyString::new(py, &line).into_any()))
}

/// When a run ends besides its sources ending: its stop handle (stopped by the caller, a
/// timer or a failure) and a number of records reaching this worker's sink.
struct Until {
    stop: StopHandle,
    max_records: Option<u64>,
    seen: AtomicU64,
}

impl Until {
    fn new(stop: Option<&PyStopHandle>, max_records: Option<u64>) -> PyResult<Until> {
        if max_records == Some(0) {
            return Err(argument("max_records must be at least 1 (or None: no limit)"));
        }
        Ok(Until {
            stop: stop.map_or_else(StopHandle::default, |s| s.0.clone()),
            max_records,
            seen: AtomicU64::new(0),
        })
    }

    /// Counts a record reaching the sink, stopping at `max_records`.
    fn arrived(&self) {
        let n = self.seen.fetch_add(1, Ordering::Relaxed) + 1;
        if self.max_records.is_some_and(|m| n >= m) {
            self.stop.stop();
        }
    }
}

/// Stops `stop` after `seconds`, unless the returned sender is dropped first (the run ended).
fn stop_after(stop: StopHandle, seconds: f64) -> PyResult<mpsc::Sender<()>> {
    let after = Duration::try_from_secs_f64(seconds).map_err(|_| {
        argument(format!("timeout must be a non-negative number of seconds, got {seconds}"))
    })?;
    let (alive, ended) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("heddle-stream-timeout".into())
        .spawn(move || {
            if ended.recv_timeout(after) == Err(mpsc::RecvTimeoutError::Timeout) {
                stop.stop();
            }
        })
        .map_err(|e| Kind::Comm.err(format!("could not start the stream's timeout thread: {e}")))?;
    Ok(alive)
}

/// One open connection or file per partition of a sink.
type PerPartition<W> = Mutex<HashMap<u32, W>>;

/// Writes `bytes` to partition `i`'s writer, opening it with `open` first if needed.
fn write_to<W: Write>(
    writers: &PerPartition<W>,
    i: u32,
    bytes: &[u8],
    open: impl FnOnce() -> std::io::Result<W>,
) -> std::io::Result<()> {
    let mut writers = writers.lock().unwrap_or_else(PoisonError::into_inner);
    let w = match writers.entry(i) {
        std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
        std::collections::hash_map::Entry::Vacant(v) => v.insert(open()?),
    };
    w.write_all(bytes)
}

/// A record's `str` and a newline (`None` once the run has failed: nothing is written).
fn line_of(x: &PyObj) -> Option<String> {
    guarded(|py| Ok(format!("{}\n", x.bind(py).str()?)))
}

impl PyStream {
    fn wrap(&self, st: Stream<PyObj>) -> PyStream {
        PyStream { st, session: self.session, workers: self.workers }
    }

    fn of(session: &PySession, st: Stream<PyObj>) -> PyStream {
        PyStream { st, session: session.id, workers: session.s.comm().size() }
    }

    /// Whether runs of the stream take checkpoints.
    fn checkpointed(&self) -> bool {
        self.st.session().stream_checkpoints().is_some()
    }

    /// The output directory of a file sink: with checkpoints it is resumed (committed part
    /// by part), so only the default ``mode`` applies.
    fn output(&self, dir: PathBuf, mode: &str) -> PyResult<heddle_data::Output> {
        if self.checkpointed() && mode != "errorifexists" {
            return Err(argument(format!(
                "mode={mode:?}: a checkpointed stream resumes its output directory, committing \
                 part files at each checkpoint; leave mode out (write to an empty or new \
                 directory)"
            )));
        }
        crate::data_output::output(dir, mode)
    }

    /// Runs the stream into `each` on every worker until its sources end or `until` (or
    /// `timeout` seconds) stops it; raises the first Python exception of the run, which
    /// also stops it (and on several workers aborts the job).
    fn run_into(
        &self,
        py: Python<'_>,
        stop: Option<&PyStopHandle>,
        timeout: Option<f64>,
        max_records: Option<u64>,
        each: impl Fn(u32, PyObj) -> heddle_data::Result<()> + Send + Sync + 'static,
    ) -> PyResult<()> {
        self.run_sink(py, stop, timeout, max_records, move |st, stop| st.run(each, Some(stop)))
    }

    /// [`PyStream::run_into`] with a sink of its own: `sink(stream, stop)` runs the stream
    /// (counted for `max_records`) into it until `stop` is stopped.
    fn run_sink(
        &self,
        py: Python<'_>,
        stop: Option<&PyStopHandle>,
        timeout: Option<f64>,
        max_records: Option<u64>,
        sink: impl FnOnce(&Stream<PyObj>, StopHandle) -> heddle_data::Result<()>,
    ) -> PyResult<()> {
        let until = Arc::new(Until::new(stop, max_records)?);
        let _timer = timeout.map(|t| stop_after(until.stop.clone(), t)).transpose()?;
        let stop = until.stop.clone();
        let stop2 = stop.clone();
        let abort = self.st.session().abort_handle();
        let abort2 = abort.clone();
        // A checkpointed run must not drain into a last checkpoint: the records whose
        // Python calls were skipped would count as done, and a restarted job would never
        // see them. It ends at once instead, resuming from its last complete checkpoint.
        let checkpointed = self.checkpointed();
        let on_failure = move |_: &PyErr| match checkpointed {
            true => abort2.abort("a Python function of the stream raised"),
            false => stop2.stop(),
        };
        let counted = self.st.map(move |x: PyObj| {
            until.arrived();
            x
        });
        let (r, raised) =
            abortable(py, &abort, || failure::scope_watched(on_failure, || sink(&counted, stop)));
        errors::of_run(r, raised, errors::data)
    }
}

#[pymethods]
impl PyStream {
    /// The records of ``records`` (the same list on every worker), split evenly in order:
    /// a finite stream (a replay).
    #[staticmethod]
    fn from_list(session: &PySession, records: &Bound<'_, PyAny>) -> PyResult<PyStream> {
        let v: Vec<PyObj> =
            records.try_iter()?.map(|r| r.map(PyObj::new)).collect::<PyResult<_>>()?;
        Ok(PyStream::of(session, session.s.stream_from_vec(v)))
    }

    /// ``f(0), f(1), ...`` split over the partitions (partition i makes the numbers
    /// congruent to i), at most ``rate`` per second per partition, until ``limit`` in all.
    #[staticmethod]
    #[pyo3(signature = (session, f, rate = None, limit = None))]
    fn generate(
        session: &PySession,
        f: Py<PyAny>,
        rate: Option<u64>,
        limit: Option<u64>,
    ) -> PyResult<PyStream> {
        if rate == Some(0) {
            return Err(argument(
                "rate must be at least 1 record per second (or None: as fast as possible)",
            ));
        }
        Ok(PyStream::of(
            session,
            session.s.stream_generate(rate, limit, move |i| call_or_none(&f, i)),
        ))
    }

    /// Lines (str) read from a TCP server at ``addr`` until it closes the connection.
    #[staticmethod]
    fn socket_text(session: &PySession, addr: &str) -> PyStream {
        PyStream::of(session, session.s.socket_text(addr).map(text))
    }

    /// The lines (str) of a file as it grows, until a line equal to ``end_marker``.
    #[staticmethod]
    #[pyo3(signature = (session, path, end_marker = None))]
    fn follow_file(session: &PySession, path: PathBuf, end_marker: Option<&str>) -> PyStream {
        PyStream::of(session, session.s.follow_file(path, end_marker).map(text))
    }

    /// The lines (str) of the files of ``path``, each partition its share of the files,
    /// at most ``rate`` lines per second over all partitions (replayed from byte offsets
    /// with checkpoints).
    #[staticmethod]
    #[pyo3(signature = (session, path, rate = None))]
    fn text_files(session: &PySession, path: PathBuf, rate: Option<f64>) -> PyResult<PyStream> {
        if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Err(argument(format!(
                "rate must be a positive number of lines per second (or None: as fast as \
                 possible), got {}",
                rate.unwrap_or_default()
            )));
        }
        let lines = session.s.stream_text(&path, rate).map_err(errors::data)?;
        Ok(PyStream::of(session, lines.map(text)))
    }

    /// ``(id, {field: value})`` for the entries of the Redis stream ``key`` at ``url``.
    #[staticmethod]
    #[pyo3(signature = (session, url, key, after = "0", end_field = None))]
    fn redis_stream(
        session: &PySession,
        url: &str,
        key: &str,
        after: &str,
        end_field: Option<&str>,
    ) -> PyStream {
        let entries = session.s.redis_stream(url, key, after, end_field, None).map(
            |e: heddle_data::RedisEntry| {
                Python::attach(|py| {
                    let fields = PyDict::new(py);
                    for (f, v) in e.fields {
                        fields.set_item(f, v).expect("str keys and values");
                    }
                    PyObj::new(
                        PyTuple::new(py, [PyString::new(py, &e.id).into_any(), fields.into_any()])
                            .expect("a pair")
                            .into_any(),
                    )
                })
            },
        );
        PyStream::of(session, entries)
    }

    /// Each record through ``f``.
    fn map(&self, f: Py<PyAny>) -> PyStream {
        self.wrap(self.st.map(map_step(f)))
    }

    /// The same records, the stage that makes them declaring what each partition asks for.
    /// `contract`: `(cpus, memory, net_bytes_per_s, io_bytes_per_s, isolation)`.
    fn resources(&self, contract: crate::task_graph::StageContract) -> PyResult<PyStream> {
        Ok(self.wrap(self.st.resources(crate::task_graph::stage_contract(contract)?)))
    }

    /// Each record to the records of the iterable ``f`` returns.
    fn flat_map(&self, f: Py<PyAny>) -> PyStream {
        self.wrap(self.st.flat_map(flat_map_step(f)))
    }

    /// Chunks of at most ``max_records`` consecutive records of a partition (handed over
    /// early ``max_delay_ms`` after their first record arrived) through ``f``: a list to an
    /// iterable of records.
    fn map_chunks(&self, max_records: usize, max_delay_ms: u64, f: Py<PyAny>) -> PyStream {
        let step = flat_map_step(f);
        self.wrap(self.st.map_chunks(
            max_records,
            Duration::from_millis(max_delay_ms),
            move |chunk: Vec<PyObj>| {
                let list = guarded(|py| {
                    Ok(PyObj::new(PyList::new(py, chunk.into_iter().map(|o| o.0))?.into_any()))
                });
                list.map(&step).unwrap_or_default()
            },
        ))
    }

    /// The records for which ``f`` is true.
    fn filter(&self, f: Py<PyAny>) -> PyStream {
        self.wrap(self.st.filter(filter_step(f)))
    }

    /// ``(f(record), record)`` for each record.
    fn key_by(&self, f: Py<PyAny>) -> PyStream {
        self.wrap(self.st.flat_map(key_by_step(f)))
    }

    /// Each ``(key, value)`` record through ``f(key, value, state)``, which returns
    /// ``(output, new_state)``: keyed state, checkpointed with the stream.
    fn map_with_state(&self, f: Py<PyAny>) -> PyStream {
        self.wrap(crate::data_stream_state::map_with_state(&self.st, f))
    }

    /// The records of both streams.
    fn union(&self, other: &PyStream) -> PyResult<PyStream> {
        if self.session != other.session {
            return Err(argument("the two streams belong to different sessions"));
        }
        Ok(self.wrap(self.st.union(&other.st)))
    }

    /// Keyed windows over ``(key, value)`` records: each key's values per window reduced
    /// with ``reduce``, as ``Windowed`` named tuples. ``kind`` names the window; sizes in
    /// ms (count windows: records); ``event`` is ``(out_of_orderness, allowed_lateness)``
    /// in ms for event time, with ``event_time(value)`` giving each value's timestamp.
    #[pyo3(signature = (kind, size, slide, event, reduce, event_time = None))]
    fn window(
        &self,
        kind: &str,
        size: u64,
        slide: u64,
        event: Option<(u64, u64)>,
        reduce: Py<PyAny>,
        event_time: Option<Py<PyAny>>,
    ) -> PyResult<PyStream> {
        let window = window_of(kind, size, slide, event)?;
        let time = move |v: &PyObj| match &event_time {
            Some(f) => guarded(|py| timestamp(&f.bind(py).call1((v.bind(py),))?)).unwrap_or(0),
            None => 0,
        };
        let pairs = self.st.flat_map(|x: PyObj| guarded(|py| pair_from(x.bind(py))));
        let results = pairs.window(window, time, move |a, b| combine(&reduce, a, b));
        Ok(self.wrap(results.flat_map(|w| guarded(|py| windowed(py, w)))))
    }

    /// Records dropped as later than their window's allowed lateness, on this worker so far.
    fn late_records(&self) -> u64 {
        self.st.late_records()
    }

    /// Calls ``f(record)`` for each record as it arrives (``None``: consumes the records),
    /// on the worker where it is, until the sources end or the run is stopped.
    #[pyo3(signature = (f = None, stop = None, timeout = None, max_records = None))]
    fn run(
        &self,
        py: Python<'_>,
        f: Option<Py<PyAny>>,
        stop: Option<PyRef<'_, PyStopHandle>>,
        timeout: Option<f64>,
        max_records: Option<u64>,
    ) -> PyResult<()> {
        self.run_into(py, stop.as_deref(), timeout, max_records, move |_, x| {
            if let Some(f) = &f {
                guarded(|py| f.bind(py).call1((x.into_bound(py),)).map(drop));
            }
            Ok(())
        })
    }

    /// Writes each record's ``str`` as a line to ``dir/part-NNNNN`` (one per partition);
    /// the parts and ``_SUCCESS`` appear when the run ends (``mode`` as the data set
    /// writers'), or with checkpoints as ``part-NNNNN-<checkpoint>`` at each checkpoint.
    #[pyo3(
        signature = (dir, stop = None, timeout = None, max_records = None, mode = "errorifexists")
    )]
    fn write_lines(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        stop: Option<PyRef<'_, PyStopHandle>>,
        timeout: Option<f64>,
        max_records: Option<u64>,
        mode: &str,
    ) -> PyResult<()> {
        let out = self.output(dir, mode)?;
        self.run_sink(py, stop.as_deref(), timeout, max_records, move |st, stop| {
            st.write_parts(out, Some(stop), |w, x| match line_of(&x) {
                Some(line) => w.write_all(line.as_bytes()),
                None => Ok(()),
            })
        })
    }

    /// Writes ``f(record)`` (``bytes``, ``str`` as UTF-8, or ``None``: nothing) for each
    /// record to ``dir/part-NNNNN``, committed as ``write_lines`` commits.
    #[pyo3(signature = (
        dir, f, stop = None, timeout = None, max_records = None, mode = "errorifexists"
    ))]
    #[allow(clippy::too_many_arguments)]
    fn write_parts(
        &self,
        py: Python<'_>,
        dir: PathBuf,
        f: Py<PyAny>,
        stop: Option<PyRef<'_, PyStopHandle>>,
        timeout: Option<f64>,
        max_records: Option<u64>,
        mode: &str,
    ) -> PyResult<()> {
        let out = self.output(dir, mode)?;
        self.run_sink(py, stop.as_deref(), timeout, max_records, move |st, stop| {
            st.write_parts(out, Some(stop), move |w, x| {
                match guarded(|py| part_bytes(&f, py, &x)) {
                    Some(bytes) => w.write_all(&bytes),
                    None => Ok(()),
                }
            })
        })
    }

    /// Sends each record's ``str`` as a line to the TCP server at ``addr`` (one connection
    /// per partition, closed when the run ends).
    #[pyo3(signature = (addr, stop = None, timeout = None, max_records = None))]
    fn write_socket(
        &self,
        py: Python<'_>,
        addr: String,
        stop: Option<PyRef<'_, PyStopHandle>>,
        timeout: Option<f64>,
        max_records: Option<u64>,
    ) -> PyResult<()> {
        let conns: PerPartition<TcpStream> = Mutex::default();
        self.run_into(py, stop.as_deref(), timeout, max_records, move |i, x| {
            let Some(line) = line_of(&x) else { return Ok(()) };
            write_to(&conns, i, line.as_bytes(), || TcpStream::connect(&addr))
                .map_err(|e| Error::Io { path: format!("tcp://{addr}"), source: e })
        })
    }

    /// Appends each record's ``str`` to the Redis stream ``key`` at ``url`` as an entry with
    /// one field, ``value`` (one connection per worker).
    #[pyo3(signature = (url, key, stop = None, timeout = None, max_records = None))]
    fn write_redis(
        &self,
        py: Python<'_>,
        url: String,
        key: String,
        stop: Option<PyRef<'_, PyStopHandle>>,
        timeout: Option<f64>,
        max_records: Option<u64>,
    ) -> PyResult<()> {
        self.run_sink(py, stop.as_deref(), timeout, max_records, move |st, stop| {
            let text =
                st.flat_map(|x: PyObj| guarded(|py| Ok(x.bind(py).str()?.to_str()?.to_owned())));
            text.write_redis(&url, &key, Some(stop))
        })
    }

    fn __repr__(&self) -> String {
        format!("<heddle.data.Stream {:?}>", self.st)
    }
}

/// Adds the stream class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStream>()
}
