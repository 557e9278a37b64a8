//! The shapes of the records Python tasks receive and emit ([`InTag`], [`OutTag`]) and
//! their conversion to and from Python objects ([`InRec`], [`OutRec`]).

use heddle_dataflow::TaskId;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

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
