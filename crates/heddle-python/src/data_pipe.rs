//! `DataSet.pipe`: a data set's records through a bridged program in any language
//! (`heddle_data::DataSet::pipe`). Python turns each record into a wire triple
//! `(codec, key, payload)` (`heddle._bridge.to_wire`) and back (`from_wire`); this module
//! moves the triples in and out of bridge records.

use heddle_bridge::Record;
use pyo3::prelude::*;

use crate::bridge;
use crate::data_set::{guarded, PyDataSet};
use crate::record::PyObj;

/// The records of `ds` (wire triples) through `command` on each partition, as wire triples.
#[pyfunction]
#[pyo3(signature = (ds, command, transport, args, credits, max_record, timeout_s, policy=None))]
#[allow(clippy::too_many_arguments)]
fn pipe(
    ds: &PyDataSet,
    command: Vec<String>,
    transport: &str,
    args: Vec<String>,
    credits: u32,
    max_record: u64,
    timeout_s: f64,
    policy: Option<String>,
) -> PyResult<PyDataSet> {
    let (cmd, cfg) = bridge::config(
        "pipe",
        &command,
        "pipe".into(),
        transport,
        args,
        credits,
        max_record,
        timeout_s,
        policy,
    )?;
    let records = ds.ds.map(|x: PyObj| {
        guarded(|py| bridge::record(x.bind(py).extract()?))
            .unwrap_or_else(|| Record::bytes(Vec::new()))
    });
    let out = records.pipe_with::<Record>(cmd, cfg).map(|r: Record| {
        Python::attach(|py| match bridge::triple(py, &r) {
            Ok(t) => PyObj::new(t),
            Err(e) => {
                crate::failure::record(e);
                PyObj::new(py.None().into_bound(py))
            }
        })
    });
    Ok(PyDataSet { ds: out, session: ds.session, native: None })
}

/// The records of `ds`, each in the partition `f(record)` (an int) picks.
#[pyfunction]
fn partition_by(ds: &PyDataSet, f: Py<PyAny>) -> PyDataSet {
    let out = ds.ds.partition_by(move |x: &PyObj| {
        guarded(|py| f.bind(py).call1((x.bind(py),))?.extract::<u64>()).unwrap_or(0)
    });
    PyDataSet { ds: out, session: ds.session, native: None }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pipe, m)?)?;
    m.add_function(wrap_pyfunction!(partition_by, m)?)
}
