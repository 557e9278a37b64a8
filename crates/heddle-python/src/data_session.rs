//! `heddle._heddle.data.Session`: a `heddle_data::Session` for Python records, and the sources
//! of data sets (ranges, lists, generators, text lines and blocks, CSV, JSON lines).

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use heddle_data::{OnMalformed, Session};
use heddle_dataflow::Options;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::checkpointing;
use crate::comm::PyComm;
use crate::data_set::PyDataSet;
use crate::data_text::{self, Native};
use crate::errors::{self, argument, Kind};
use crate::failure;
use crate::interrupt::{blocking, blocking_here};
use crate::record::PyObj;

static SESSIONS: AtomicU64 = AtomicU64::new(1);

/// Bytes per native block behind `text_file` (for its words: lines are read natively).
const LINES_BLOCK_BYTES: u64 = 256 << 10;

/// The entry point of the data API on every worker (see ``heddle.data.Session``).
#[pyclass(unsendable, module = "heddle._heddle.data", name = "Session")]
pub(crate) struct PySession {
    pub(crate) s: Session,
    pub(crate) id: u64,
}

impl std::fmt::Debug for PySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PySession")
            .field("rank", &self.s.rank())
            .field("partitions", &self.s.partitions())
            .finish()
    }
}

fn on_malformed(skip: bool) -> OnMalformed {
    if skip {
        OnMalformed::Skip
    } else {
        OnMalformed::Fail
    }
}

/// Calls `f(arg)`; a Python exception is recorded and gives `None`.
pub(crate) fn call_or_none<A: for<'py> IntoPyObject<'py>>(f: &Py<PyAny>, arg: A) -> PyObj {
    Python::attach(|py| {
        if failure::failed() {
            return PyObj::none(py);
        }
        match f.bind(py).call1((arg,)) {
            Ok(r) => PyObj::new(r),
            Err(e) => {
                failure::record(e);
                PyObj::none(py)
            }
        }
    })
}

impl PySession {
    fn wrap(&self, ds: heddle_data::DataSet<PyObj>) -> PyDataSet {
        PyDataSet { ds, session: self.id, native: None }
    }
}

#[pymethods]
impl PySession {
    /// A session over a copy of ``comm`` (collective), with ``partitions`` partitions per
    /// data set (default: one per worker), holding up to ``memory_budget`` bytes of records
    /// per partition in sorts and shuffles before spilling to ``spill_dirs``; its streams
    /// checkpoint every ``checkpoint_interval`` seconds into ``checkpoint_dir`` as job
    /// ``job`` (see `checkpointing`).
    #[new]
    #[pyo3(signature = (
        comm,
        partitions = None,
        memory_budget = None,
        spill_dirs = None,
        checkpoint_interval = None,
        checkpoint_dir = None,
        job = None
    ))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, all with defaults
    fn new(
        py: Python<'_>,
        comm: &PyComm,
        partitions: Option<u32>,
        memory_budget: Option<usize>,
        spill_dirs: Option<Vec<PathBuf>>,
        checkpoint_interval: Option<f64>,
        checkpoint_dir: Option<PathBuf>,
        job: Option<String>,
    ) -> PyResult<PySession> {
        let c = comm.shared();
        let own = blocking(py, || c.split(Some(0), c.rank() as i64)).map_err(errors::comm)?;
        let own =
            own.ok_or_else(|| Kind::Comm.err("could not copy the communicator for the session"))?;
        // One executor thread: Python code runs under the GIL anyway, and a run's first
        // exception is kept per thread (see `failure`).
        let s = blocking_here(py, || Session::new(own))
            .and_then(|s| s.with_threads(1))
            .map_err(errors::data)?;
        let s = match partitions {
            Some(p) => s.with_partitions(p).map_err(errors::data)?,
            None => s,
        };
        let s = if memory_budget.is_some() || spill_dirs.is_some() {
            let defaults = Options::batch().spill;
            let dirs = spill_dirs.filter(|d| !d.is_empty()).unwrap_or(defaults.dirs);
            if let Some(missing) = dirs.iter().find(|d| !d.is_dir()) {
                return Err(argument(format!(
                    "spill directory {} does not exist: create it, or leave spill_dirs out to use \
                     the system temp directory",
                    missing.display()
                )));
            }
            s.with_spill(memory_budget.unwrap_or(defaults.budget_bytes), dirs)
                .map_err(errors::data)?
        } else {
            s
        };
        let env = s.stream_checkpoints().cloned();
        let job =
            job.unwrap_or_else(|| env.as_ref().map_or("heddle-job".into(), |c| c.job.clone()));
        let s = match checkpointing::resolve(
            checkpoint_interval,
            checkpoint_dir,
            &job,
            env.as_ref(),
        )? {
            Some(c) => s.with_checkpoints(c.dir, c.interval, &c.job).map_err(errors::data)?,
            None => s,
        };
        Ok(PySession { s, id: SESSIONS.fetch_add(1, Ordering::Relaxed) })
    }

    /// This worker's rank.
    #[getter]
    fn rank(&self) -> usize {
        self.s.rank()
    }

    /// Number of workers.
    #[getter]
    fn size(&self) -> usize {
        self.s.comm().size()
    }

    /// Partitions of every data set.
    #[getter]
    fn partitions(&self) -> u32 {
        self.s.partitions()
    }

    /// The checkpoints of its streams as ``(dir, job, interval in seconds or None)``, or
    /// ``None`` if they take none.
    #[getter]
    fn stream_checkpoints(&self) -> Option<(PathBuf, String, Option<f64>)> {
        self.s.stream_checkpoints().map(checkpointing::described)
    }

    /// The integers ``start .. end``, split evenly.
    fn range(&self, start: i64, end: i64) -> PyDataSet {
        let n = end.saturating_sub(start).max(0) as u64;
        self.wrap(self.s.generate(n, move |i| {
            Python::attach(|py| {
                PyObj::new((start + i as i64).into_pyobject(py).expect("an int").into_any())
            })
        }))
    }

    /// The records of ``records`` (the same list on every worker), split evenly in order.
    #[pyo3(name = "from_list")]
    fn of_records(&self, records: &Bound<'_, PyAny>) -> PyResult<PyDataSet> {
        let v: Vec<PyObj> =
            records.try_iter()?.map(|r| r.map(PyObj::new)).collect::<PyResult<_>>()?;
        Ok(self.wrap(self.s.from_vec(v)))
    }

    /// ``f(0) .. f(n - 1)``, each partition making its own share.
    fn generate(&self, n: u64, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.s.generate(n, move |i| call_or_none(&f, i)))
    }

    /// The lines of a text file, of a directory's files, or of a glob's files (UTF-8).
    fn text_file(&self, path: PathBuf) -> PyResult<PyDataSet> {
        let lines = self.s.text_file(&path).map_err(errors::data)?;
        let blocks = data_text::blocks(&self.s, &path, LINES_BLOCK_BYTES, false)
            .map_err(|e| input_error(e.to_string()))?;
        let records = data_text::line_records(&lines);
        Ok(PyDataSet {
            ds: records,
            session: self.id,
            native: Some(Native::Lines { lines, blocks }),
        })
    }

    /// Blocks of whole lines (``str``, or ``bytes`` if ``binary``; each line ending with a
    /// newline) of about ``block_bytes`` from the files of ``path``.
    #[pyo3(signature = (path, block_bytes, binary = false))]
    fn text_blocks(&self, path: PathBuf, block_bytes: u64, binary: bool) -> PyResult<PyDataSet> {
        let blocks = data_text::blocks(&self.s, &path, data_text::block_size(block_bytes)?, binary)
            .map_err(|e| input_error(e.to_string()))?;
        let records = data_text::block_records(&blocks, binary);
        Ok(PyDataSet {
            ds: records,
            session: self.id,
            native: Some(Native::Blocks { blocks, binary }),
        })
    }

    /// Rows of CSV files: with ``header``, dicts of str keyed by the first file's header
    /// (each file's first line, its header, is skipped), else lists of str; malformed rows
    /// fail with file and line, or are skipped and counted.
    #[pyo3(signature = (path, header, skip_malformed = false))]
    fn read_csv(&self, path: PathBuf, header: bool, skip_malformed: bool) -> PyResult<PyDataSet> {
        let rows = self
            .s
            .read_csv::<Vec<String>>(&path, header, on_malformed(skip_malformed))
            .map_err(errors::data)?;
        if !header {
            return Ok(self.wrap(rows.map(|row: Vec<String>| {
                Python::attach(|py| {
                    PyObj::new(PyList::new(py, row).expect("a list of str").into_any())
                })
            })));
        }
        let names = Arc::new(self.s.csv_header(&path).map_err(errors::data)?);
        Ok(self.wrap(rows.map(move |row: Vec<String>| {
            Python::attach(|py| {
                let d = PyDict::new(py);
                for (k, v) in names.iter().zip(row) {
                    d.set_item(k, v).expect("str keys");
                }
                PyObj::new(d.into_any())
            })
        })))
    }

    /// Records of JSON-lines files (one value per line; blank lines ignored).
    #[pyo3(signature = (path, skip_malformed = false))]
    fn read_json_lines(&self, path: PathBuf, skip_malformed: bool) -> PyResult<PyDataSet> {
        let rows = self
            .s
            .read_json_lines::<serde_json::Value>(&path, on_malformed(skip_malformed))
            .map_err(errors::data)?;
        Ok(self.wrap(rows.map(|v: serde_json::Value| {
            Python::attach(|py| match crate::json::to_py(py, &v) {
                Ok(o) => PyObj::new(o),
                Err(e) => {
                    failure::record(e);
                    PyObj::none(py)
                }
            })
        })))
    }

    /// Rows of Parquet files (only ``columns``, if given, each of which every file must
    /// have): dicts of the columns, or the values of a lone column ``item``.
    #[pyo3(signature = (path, columns = None))]
    fn read_parquet(&self, path: PathBuf, columns: Option<Vec<String>>) -> PyResult<PyDataSet> {
        Ok(self.wrap(crate::data_parquet::read(&self.s, &path, columns)?))
    }

    /// Malformed rows skipped so far on all workers (collective).
    fn skipped_rows(&self, py: Python<'_>) -> PyResult<u64> {
        let s = &self.s;
        blocking_here(py, || s.skipped_rows()).map_err(errors::data)
    }
}

/// A path that names no file is a bad argument (as in `heddle_data`); a file that cannot
/// be read is a data error.
fn input_error(message: String) -> PyErr {
    if message.ends_with("names no readable file") {
        argument(message)
    } else {
        Kind::Data.err(message)
    }
}

/// The files a path names (a file, a directory's files, a glob's matches), sorted.
#[pyfunction]
pub(crate) fn list_input_files(path: PathBuf) -> PyResult<Vec<PathBuf>> {
    Ok(heddle_data::list_files(&path)
        .map_err(|e| input_error(e.to_string()))?
        .into_iter()
        .map(|f| f.0)
        .collect())
}

/// Checkpoints of a job's loop state, pickled by the Python side
/// (``heddle.data.LoopCheckpoints``): rank 0 writes them to a private directory and reads
/// back only files it owns.
#[pyclass(unsendable, module = "heddle._heddle.data", name = "LoopCheckpoints")]
pub(crate) struct PyLoopCheckpoints(heddle_data::LoopCheckpoints<Vec<u8>>);

#[pymethods]
impl PyLoopCheckpoints {
    #[new]
    fn new(session: &PySession, dir: PathBuf, every: u64, job: String) -> PyResult<Self> {
        let c = session.s.loop_checkpoints(dir, every, job).map_err(errors::data)?;
        Ok(PyLoopCheckpoints(c))
    }

    /// The newest checkpoint as (iterations done, pickled state), or ``None``.
    fn resume<'py>(
        &self,
        py: Python<'py>,
    ) -> PyResult<Option<(u64, Bound<'py, pyo3::types::PyBytes>)>> {
        let found = py.detach(|| self.0.resume()).map_err(errors::data)?;
        Ok(found.map(|(i, bytes)| (i, pyo3::types::PyBytes::new(py, &bytes))))
    }

    /// Records ``iteration`` done with the pickled ``state``; whether a checkpoint was
    /// written.
    fn completed(&self, py: Python<'_>, iteration: u64, state: Vec<u8>) -> PyResult<bool> {
        py.detach(|| self.0.completed(iteration, &state)).map_err(errors::data)
    }
}

/// Adds the session and loop-checkpoint classes to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySession>()?;
    m.add_class::<PyLoopCheckpoints>()?;
    m.add_function(pyo3::wrap_pyfunction!(list_input_files, m)?)?;
    Ok(())
}
