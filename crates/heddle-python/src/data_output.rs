//! `heddle._heddle.data.OutputCommit`: the commit of a data set's output directory
//! ([`heddle_data::Commit`]) for writers written in Python (`DataSet.write_parquet`), and
//! the parsing of the `mode=` argument of every writer, and what a Python writer function
//! makes of a record (`part_bytes`).

use std::path::PathBuf;

use heddle_data::{Commit, Output, Session, WriteMode};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::data_session::PySession;
use crate::errors;
use crate::record::PyObj;

/// The `Output` of `dir` with the writer's `mode` (``"errorifexists"``, ``"overwrite"``,
/// ``"append"``).
pub(crate) fn output(dir: PathBuf, mode: &str) -> PyResult<Output> {
    let mode: WriteMode = mode.parse().map_err(errors::data)?;
    // A Python function that raised (kept aside by `failure`) abandons the write.
    Ok(Output::new(dir).mode(mode).veto(std::sync::Arc::new(crate::failure::failed)))
}

/// What `f` makes of `x` for a part file: its bytes, a `str`'s UTF-8, or nothing.
pub(crate) fn part_bytes(f: &Py<PyAny>, py: Python<'_>, x: &PyObj) -> PyResult<Vec<u8>> {
    let r = f.bind(py).call1((x.bind(py),))?;
    if r.is_none() {
        Ok(Vec::new())
    } else if let Ok(b) = r.cast::<PyBytes>() {
        Ok(b.as_bytes().to_vec())
    } else if let Ok(text) = r.cast::<PyString>() {
        Ok(text.to_str()?.as_bytes().to_vec())
    } else {
        let type_name = r.get_type().name()?.to_string();
        Err(PyTypeError::new_err(format!(
            "write_parts: f must return bytes, str or None, not {type_name}"
        )))
    }
}

/// A write of one output directory in progress (collective: every worker makes one, writes
/// its partitions to ``temp_path(i)``, then calls ``finish``).
#[pyclass(module = "heddle._heddle.data", name = "OutputCommit")]
pub(crate) struct PyOutputCommit {
    session: Session,
    commit: Commit,
    suffix: String,
}

#[pymethods]
impl PyOutputCommit {
    /// Checks ``directory`` against ``mode`` and makes the write's temporary directory.
    #[new]
    #[pyo3(signature = (session, directory, mode = "errorifexists", suffix = ""))]
    fn new(
        py: Python<'_>,
        session: &PySession,
        directory: PathBuf,
        mode: &str,
        suffix: &str,
    ) -> PyResult<PyOutputCommit> {
        let out = output(directory, mode)?;
        let s = session.s.clone();
        let commit = py.detach(|| Commit::begin(s.comm(), &out)).map_err(errors::data)?;
        Ok(PyOutputCommit { session: session.s.clone(), commit, suffix: suffix.to_string() })
    }

    /// Where partition ``index`` is written until the commit.
    fn temp_path(&self, index: u32) -> PathBuf {
        self.commit.temp_path(index, &self.suffix)
    }

    /// Moves every worker's parts into place and writes ``_SUCCESS`` if every worker
    /// wrote its ``written`` partitions (``failed`` false); otherwise removes the temporary
    /// files. Raises if this or another worker failed.
    fn finish(&self, py: Python<'_>, written: Vec<u32>, failed: bool) -> PyResult<()> {
        let outcome = if failed {
            Err(heddle_data::Error::InvalidArgument("this worker's write failed".into()))
        } else {
            Ok(written)
        };
        py.detach(|| self.commit.finish(self.session.comm(), outcome, &self.suffix))
            .map_err(errors::data)
    }
}

/// Adds the class to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOutputCommit>()?;
    Ok(())
}
