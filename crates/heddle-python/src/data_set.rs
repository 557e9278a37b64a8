//! `heddle._heddle.data.DataSet`: a `heddle_data::DataSet` of Python records, with Python
//! functions in its steps.
//!
//! Every step that calls Python is a native `flat_map` (or a keyed operation) whose
//! function records the first Python exception and, from then on, skips its Python calls
//! and emits nothing: the action still ends on every worker, and then raises the
//! exception as itself (see `failure`). Keyed operations take `(key, value)` tuples; keys
//! are compared by their canonical encoding (see `record`).

use std::path::PathBuf;

use heddle_data::DataSet;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::data_text::{self, Native};
use crate::errors::{self, argument};
use crate::failure;
use crate::interrupt::abortable;
use crate::record::{pair_from, pair_to, PyKey, PyObj};
use crate::task_graph::combine;

/// A lazy distributed collection of Python objects (see ``heddle.data.DataSet``).
#[pyclass(unsendable, module = "heddle._heddle.data", name = "DataSet")]
pub(crate) struct PyDataSet {
    pub(crate) ds: DataSet<PyObj>,
    pub(crate) session: u64,
    /// What is known natively about the records (text read from files), if anything.
    pub(crate) native: Option<Native>,
}

impl std::fmt::Debug for PyDataSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.ds)
    }
}

/// Runs `f(py)` unless the run has failed; a Python exception is recorded and gives
/// `None`.
pub(crate) fn guarded<T>(f: impl FnOnce(Python<'_>) -> PyResult<T>) -> Option<T> {
    if failure::failed() {
        return None;
    }
    Python::attach(|py| match f(py) {
        Ok(v) => Some(v),
        Err(e) => {
            failure::record(e);
            None
        }
    })
}

/// The records of a Python iterable (lists and tuples read directly).
fn records_of(r: &Bound<'_, PyAny>) -> PyResult<Vec<PyObj>> {
    if r.is_none() {
        return Ok(Vec::new());
    }
    if let Ok(l) = r.cast::<PyList>() {
        return Ok(l.iter().map(PyObj::new).collect());
    }
    if let Ok(t) = r.cast::<PyTuple>() {
        return Ok(t.iter().map(PyObj::new).collect());
    }
    r.try_iter()?.map(|x| x.map(PyObj::new)).collect()
}

// The record-wise steps of data sets and streams.

/// `map`: each record through `f`; after a failure records pass unchanged (the run raises
/// anyway).
pub(crate) fn map_step(f: Py<PyAny>) -> impl Fn(PyObj) -> PyObj + Send + Sync + 'static {
    move |x: PyObj| {
        if failure::failed() {
            return x;
        }
        Python::attach(|py| match f.bind(py).call1((x.bind(py),)) {
            Ok(y) => PyObj::new(y),
            Err(e) => {
                failure::record(e);
                x
            }
        })
    }
}

/// `flat_map`: each record to the records of the iterable `f` returns.
pub(crate) fn flat_map_step(f: Py<PyAny>) -> impl Fn(PyObj) -> Vec<PyObj> + Send + Sync + 'static {
    move |x: PyObj| {
        guarded(|py| records_of(&f.bind(py).call1((x.into_bound(py),))?)).unwrap_or_default()
    }
}

/// `filter`: whether `f(record)` is true.
pub(crate) fn filter_step(f: Py<PyAny>) -> impl Fn(&PyObj) -> bool + Send + Sync + 'static {
    move |x: &PyObj| guarded(|py| f.bind(py).call1((x.bind(py),))?.is_truthy()).unwrap_or(false)
}

/// `key_by` (a flat map): the tuple `(f(record), record)`.
pub(crate) fn key_by_step(f: Py<PyAny>) -> impl Fn(PyObj) -> Option<PyObj> + Send + Sync + 'static {
    move |x: PyObj| {
        guarded(|py| {
            let k = f.bind(py).call1((x.bind(py),))?;
            Ok(PyObj::new(PyTuple::new(py, [k, x.into_bound(py)])?.into_any()))
        })
    }
}

/// `(key, value)` pairs of a data set of Python pairs.
fn pairs(ds: &DataSet<PyObj>) -> DataSet<(PyKey, PyObj)> {
    ds.flat_map(|x: PyObj| guarded(|py| pair_from(x.bind(py))))
}

/// Python tuples from native `(key, value)` pairs, the value made by `value`.
fn tuples<V: heddle_task::Record>(
    ds: &DataSet<(PyKey, V)>,
    value: impl Fn(Python<'_>, V) -> PyResult<Bound<'_, PyAny>> + Send + Sync + 'static,
) -> DataSet<PyObj> {
    ds.flat_map(move |(k, v): (PyKey, V)| {
        guarded(|py| Ok(PyObj::new(pair_to(py, k, value(py, v)?)?)))
    })
}

fn option(py: Python<'_>, v: Option<PyObj>) -> Bound<'_, PyAny> {
    v.map_or_else(|| py.None().into_bound(py), |o| o.into_bound(py))
}

/// Runs an action on data set `on` with the GIL released (Ctrl-C aborts it); raises the
/// first Python exception it met.
fn action<R: heddle_task::Record, T>(
    py: Python<'_>,
    on: &DataSet<R>,
    f: impl FnOnce() -> heddle_data::Result<T>,
) -> PyResult<T> {
    let (r, raised) = abortable(py, &on.session().abort_handle(), || failure::scope(f));
    errors::of_run(r, raised, errors::data)
}

impl PyDataSet {
    fn wrap(&self, ds: DataSet<PyObj>) -> PyDataSet {
        PyDataSet { ds, session: self.session, native: None }
    }

    fn same_session(&self, other: &PyDataSet) -> PyResult<()> {
        if self.session != other.session {
            return Err(argument("the two data sets belong to different sessions"));
        }
        Ok(())
    }
}

#[pymethods]
impl PyDataSet {
    /// Each record through ``f``.
    fn map(&self, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.ds.map(map_step(f)))
    }

    /// Each record to the records of the iterable ``f`` returns.
    fn flat_map(&self, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.ds.flat_map(flat_map_step(f)))
    }

    /// The records for which ``f`` is true.
    fn filter(&self, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.ds.filter(filter_step(f)))
    }

    /// ``(f(record), record)`` for each record.
    fn key_by(&self, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.ds.flat_map(key_by_step(f)))
    }

    /// Each whole partition (a list) through ``f``, which returns an iterable of records.
    fn map_partitions(&self, f: Py<PyAny>) -> PyDataSet {
        self.wrap(self.ds.map_partitions(move |part: Vec<PyObj>| {
            guarded(|py| {
                let list = PyList::new(py, part.into_iter().map(|o| o.0))?;
                records_of(&f.bind(py).call1((list,))?)
            })
            .unwrap_or_default()
        }))
    }

    /// The records of both data sets.
    fn union(&self, other: &PyDataSet) -> PyResult<PyDataSet> {
        self.same_session(other)?;
        Ok(self.wrap(self.ds.union(&other.ds)))
    }

    /// The same records, the stage that makes them declaring what each partition asks for.
    /// `contract`: `(cpus, memory, net_bytes_per_s, io_bytes_per_s, isolation)`.
    fn resources(&self, contract: crate::task_graph::StageContract) -> PyResult<PyDataSet> {
        Ok(self.wrap(self.ds.resources(crate::task_graph::stage_contract(contract)?)))
    }

    /// The same records dealt round-robin over the partitions.
    fn repartition(&self) -> PyDataSet {
        self.wrap(self.ds.repartition())
    }

    /// Values combined per key with ``f`` (within each partition first).
    fn reduce_by_key(&self, f: Py<PyAny>) -> PyDataSet {
        let reduced = pairs(&self.ds).reduce_by_key(move |a, b| combine(&f, a, b));
        self.wrap(tuples(&reduced, |py, v: PyObj| Ok(v.into_bound(py))))
    }

    /// Values folded per key: ``seq(acc, value)`` from a copy of ``zero``, accumulators
    /// merged with ``comb``.
    fn aggregate_by_key(&self, zero: Py<PyAny>, seq: Py<PyAny>, comb: Py<PyAny>) -> PyDataSet {
        let fresh = move || {
            guarded(|py| {
                Ok(PyObj::new(py.import("copy")?.getattr("deepcopy")?.call1((zero.bind(py),))?))
            })
            .unwrap_or_else(|| Python::attach(PyObj::none))
        };
        let agg = pairs(&self.ds).aggregate_by_key(
            fresh,
            move |a, v| combine(&seq, a, v),
            move |a, b| combine(&comb, a, b),
        );
        self.wrap(tuples(&agg, |py, v: PyObj| Ok(v.into_bound(py))))
    }

    /// Every key once with the list of its values.
    fn group_by_key(&self) -> PyDataSet {
        let grouped = pairs(&self.ds).group_by_key();
        self.wrap(tuples(&grouped, |py, vs: Vec<PyObj>| {
            Ok(PyList::new(py, vs.into_iter().map(|v| v.0))?.into_any())
        }))
    }

    /// Inner join: ``(key, (v, w))`` for every pair of values with equal keys.
    fn join(&self, other: &PyDataSet) -> PyResult<PyDataSet> {
        self.same_session(other)?;
        let j = pairs(&self.ds).join(&pairs(&other.ds)).map_err(errors::data)?;
        Ok(self.wrap(tuples(&j, |py, (v, w): (PyObj, PyObj)| {
            Ok(PyTuple::new(py, [v.into_bound(py), w.into_bound(py)])?.into_any())
        })))
    }

    /// Left outer join: every left pair, with ``None`` where no right value has its key.
    fn left_join(&self, other: &PyDataSet) -> PyResult<PyDataSet> {
        self.same_session(other)?;
        let j = pairs(&self.ds).left_join(&pairs(&other.ds)).map_err(errors::data)?;
        Ok(self.wrap(tuples(&j, |py, (v, w): (PyObj, Option<PyObj>)| {
            Ok(PyTuple::new(py, [v.into_bound(py), option(py, w)])?.into_any())
        })))
    }

    /// Full outer join: matched pairs, and unmatched values of either side with ``None``.
    fn full_outer_join(&self, other: &PyDataSet) -> PyResult<PyDataSet> {
        self.same_session(other)?;
        let j = pairs(&self.ds).full_outer_join(&pairs(&other.ds)).map_err(errors::data)?;
        Ok(self.wrap(tuples(&j, |py, (v, w): (Option<PyObj>, Option<PyObj>)| {
            Ok(PyTuple::new(py, [option(py, v), option(py, w)])?.into_any())
        })))
    }

    /// The words of ``str`` or ``bytes`` records: runs of characters other than ASCII
    /// whitespace (as ``bytes.split()``); split natively for text read from files.
    fn words(&self) -> PyDataSet {
        match self.native.as_ref().and_then(Native::text) {
            Some((blocks, binary)) => PyDataSet {
                ds: data_text::word_records(blocks, binary),
                session: self.session,
                native: Some(Native::Words { blocks: blocks.clone(), binary }),
            },
            None => self.wrap(data_text::split_records(&self.ds)),
        }
    }

    /// ``(record, count)`` for every distinct record (records compared as keys); the
    /// words of text read from files are counted natively as they are split.
    fn value_counts(&self) -> PyDataSet {
        match &self.native {
            Some(Native::Words { blocks, binary }) => {
                self.wrap(data_text::count_words(blocks, *binary))
            }
            _ => self.wrap(data_text::count_records(&self.ds)),
        }
    }

    /// Every distinct record once (by canonical encoding, as keys).
    fn distinct(&self) -> PyDataSet {
        let keys = self.ds.flat_map(|x: PyObj| guarded(|py| PyKey::new(x.bind(py))));
        self.wrap(keys.distinct().flat_map(|k: PyKey| guarded(|py| Ok(PyObj::new(k.into_py(py)?)))))
    }

    /// The records sorted across partitions (samples the keys now: an action): by
    /// themselves (compared as keys), or by the first ``key_bytes`` bytes of ``str`` (as
    /// UTF-8) or ``bytes`` records; lines of ``text_file`` natively.
    #[pyo3(signature = (key_bytes = None))]
    fn sort(&self, py: Python<'_>, key_bytes: Option<usize>) -> PyResult<PyDataSet> {
        if let Some(lines) = self.native.as_ref().and_then(Native::lines) {
            let pairs = action(py, &lines, || data_text::sort_lines(&lines, key_bytes))?;
            let records = data_text::line_records(
                &pairs.map(|(_, line): (heddle_data::BytesKey, String)| line),
            );
            return Ok(PyDataSet {
                ds: records,
                session: self.session,
                native: Some(Native::Sorted { pairs }),
            });
        }
        let p = data_text::sort_pairs(&self.ds, key_bytes);
        let sorted = action(py, &p, || p.sort_by_key())?;
        Ok(self.wrap(sorted.map(|(_, v): (PyKey, PyObj)| v)))
    }

    /// Sorted by key across partitions (samples the keys now: an action).
    fn sort_by_key(&self, py: Python<'_>) -> PyResult<PyDataSet> {
        let p = pairs(&self.ds);
        let sorted = action(py, &p, || p.sort_by_key())?;
        Ok(self.wrap(tuples(&sorted, |py, v: PyObj| Ok(v.into_bound(py)))))
    }

    /// Computes the data set now and keeps every partition in memory.
    fn cache(&self, py: Python<'_>) -> PyResult<PyDataSet> {
        let ds = &self.ds;
        Ok(self.wrap(action(py, ds, || ds.cache())?))
    }

    /// Repeats ``step`` (native data set -> native data set) up to ``max`` times, until
    /// ``done(previous, next)``; returns the last data set and the steps taken. With
    /// ``checkpoint_dir``, checkpoints every ``checkpoint_every`` steps and resumes there.
    #[pyo3(signature = (max, step, done, checkpoint_dir = None, checkpoint_every = 1, job = None))]
    #[allow(clippy::too_many_arguments)] // Python keyword arguments, with defaults
    fn iterate(
        &self,
        py: Python<'_>,
        max: u64,
        step: Py<PyAny>,
        done: Py<PyAny>,
        checkpoint_dir: Option<std::path::PathBuf>,
        checkpoint_every: u64,
        job: Option<String>,
    ) -> PyResult<(PyDataSet, u64)> {
        let job = job.unwrap_or_default();
        let checkpoints = checkpoint_dir.map(|dir| heddle_data::Checkpointing {
            dir,
            every: checkpoint_every,
            job,
        });
        let opts = heddle_data::IterateOptions { max, checkpoints };
        let session = self.session;
        let ds = &self.ds;
        let failed =
            || heddle_data::Error::InvalidArgument("a Python function of iterate failed".into());
        let (last, steps) = action(py, ds, || {
            ds.iterate_with(
                &opts,
                |d| {
                    let r = guarded(|py| {
                        let out = step.bind(py).call1((PyDataSet {
                            ds: d.clone(),
                            session,
                            native: None,
                        },))?;
                        let out = out
                            .cast::<PyDataSet>()
                            .map_err(|_| argument("iterate: step must return a DataSet"))?
                            .borrow();
                        Ok(out.ds.clone())
                    });
                    r.ok_or_else(failed)
                },
                |a, b| {
                    let r = guarded(|py| {
                        done.bind(py)
                            .call1((
                                PyDataSet { ds: a.clone(), session, native: None },
                                PyDataSet { ds: b.clone(), session, native: None },
                            ))?
                            .is_truthy()
                    });
                    r.ok_or_else(failed)
                },
            )
        })?;
        Ok((self.wrap(last), steps))
    }

    /// The task graph and plan an action on this data set would run.
    fn explain(&self) -> PyResult<String> {
        self.ds.explain().map_err(errors::data)
    }

    /// Every record, in partition order, on rank 0 (``None`` elsewhere).
    fn collect<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyList>>> {
        let ds = &self.ds;
        let got = action(py, ds, || ds.collect())?;
        got.map(|v| PyList::new(py, v.into_iter().map(|o| o.0))).transpose()
    }

    /// Every record, in partition order, on every worker.
    fn collect_all<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ds = &self.ds;
        let got = action(py, ds, || ds.collect_all())?;
        PyList::new(py, got.into_iter().map(|o| o.0))
    }

    /// The number of records, on every worker.
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let ds = &self.ds;
        action(py, ds, || ds.count())
    }

    /// All records combined with ``f``, on every worker (``None`` if there are none).
    fn reduce(&self, py: Python<'_>, f: Py<PyAny>) -> PyResult<Option<Py<PyAny>>> {
        let ds = &self.ds;
        let r = action(py, ds, || ds.reduce(move |a, b| combine(&f, a, b)))?;
        Ok(r.map(|o| o.0))
    }

    /// Calls ``f(record)`` for every record, where the record is.
    fn for_each(&self, py: Python<'_>, f: Py<PyAny>) -> PyResult<()> {
        let ds = &self.ds;
        action(py, ds, || {
            ds.for_each(move |_, x| {
                guarded(|py| f.bind(py).call1((x.into_bound(py),)).map(drop));
                Ok(())
            })
        })
    }

    /// Calls ``f(partition, records)`` with every whole partition (a list), where it is.
    fn for_each_partition(&self, py: Python<'_>, f: Py<PyAny>) -> PyResult<()> {
        let ds = &self.ds;
        action(py, ds, || {
            ds.for_each_partition(move |i, part| {
                guarded(|py| {
                    f.bind(py).call1((i, PyList::new(py, part.into_iter().map(|o| o.0))?)).map(drop)
                });
                Ok(())
            })
        })
    }

    /// Writes each record's ``str`` as a line into ``dir/part-NNNNN`` (``mode``: what to do
    /// with a directory that holds files).
    #[pyo3(signature = (dir, mode = "errorifexists"))]
    fn write_text(&self, py: Python<'_>, dir: PathBuf, mode: &str) -> PyResult<()> {
        let out = crate::data_output::output(dir, mode)?;
        if let Some(lines) = self.native.as_ref().and_then(Native::lines) {
            return action(py, &lines, || lines.write_text(out));
        }
        let lines =
            self.ds.flat_map(|x: PyObj| guarded(|py| Ok(x.bind(py).str()?.to_str()?.to_owned())));
        action(py, &lines, || lines.write_text(out))
    }

    /// Writes each record as one line of JSON into ``dir/part-NNNNN``.
    #[pyo3(signature = (dir, mode = "errorifexists"))]
    fn write_json_lines(&self, py: Python<'_>, dir: PathBuf, mode: &str) -> PyResult<()> {
        let out = crate::data_output::output(dir, mode)?;
        let values = self.ds.flat_map(|x: PyObj| guarded(|py| crate::json::from_py(x.bind(py))));
        action(py, &values, || values.write_json_lines(out))
    }

    /// Writes each record (a tuple or list of fields, or one field) as a CSV row.
    #[pyo3(signature = (dir, mode = "errorifexists"))]
    fn write_csv(&self, py: Python<'_>, dir: PathBuf, mode: &str) -> PyResult<()> {
        let out = crate::data_output::output(dir, mode)?;
        let rows = self.ds.flat_map(|x: PyObj| {
            guarded(|py| {
                let x = x.bind(py);
                let field = |f: Bound<'_, PyAny>| -> PyResult<String> {
                    if f.is_none() {
                        Ok(String::new())
                    } else {
                        Ok(f.str()?.to_str()?.to_owned())
                    }
                };
                if x.is_instance_of::<PyTuple>() || x.is_instance_of::<PyList>() {
                    x.try_iter()?.map(|f| field(f?)).collect::<PyResult<Vec<String>>>()
                } else {
                    Ok(vec![field(x.clone())?])
                }
            })
        });
        action(py, &rows, || rows.write_csv(out))
    }

    fn __repr__(&self) -> String {
        format!("<heddle.data.DataSet {:?}>", self.ds)
    }
}

/// Adds the data-set class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDataSet>()
}
