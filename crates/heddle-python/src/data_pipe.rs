//! `DataSet.pipe`: a data set's records through a bridged program in any language
//! (`heddle_data::DataSet::pipe`). Python turns each record into a wire triple
//! `(codec, key, payload)` (`heddle._bridge.to_wire`) and back (`from_wire`); this module
//! moves the triples in and out of bridge records.

use std::time::Duration;

use heddle_bridge::{BridgeConfig, FilterCommand, Record, Transport};
use heddle_wire::Codec;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::data_set::{guarded, PyDataSet};
use crate::errors;
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
    let Some((program, rest)) = command.split_first() else {
        return Err(errors::argument("pipe: the command is empty"));
    };
    let transport: Transport =
        transport.parse().map_err(|e: heddle_bridge::Error| errors::argument(e.to_string()))?;
    if !(timeout_s.is_finite() && timeout_s > 0.0) {
        return Err(errors::argument(format!(
            "pipe: timeout_s must be a positive number of seconds, not {timeout_s}"
        )));
    }
    let mut cfg = BridgeConfig::new("pipe")
        .transport(transport)
        .args(args)
        .credits(credits)
        .max_record(max_record);
    cfg.start_timeout = Duration::from_secs_f64(timeout_s);
    cfg.idle_timeout = Duration::from_secs_f64(timeout_s);
    if let Some(p) = policy {
        cfg.policy = Some(heddle_bridge::Policy::parse(&p).map_err(errors::bridge)?);
    }
    let cmd = FilterCommand::new(program).args(rest.iter().cloned());
    let records = ds.ds.map(|x: PyObj| {
        guarded(|py| {
            let (codec, key, payload): (u8, Vec<u8>, Vec<u8>) = x.bind(py).extract()?;
            let codec = Codec::from_u8(codec).map_err(|e| errors::argument(e.to_string()))?;
            Ok(Record { codec, key, payload })
        })
        .unwrap_or_else(|| Record::bytes(Vec::new()))
    });
    let out = records.pipe_with::<Record>(cmd, cfg).map(|r: Record| {
        Python::attach(|py| {
            let t = (r.codec.to_u8(), PyBytes::new(py, &r.key), PyBytes::new(py, &r.payload))
                .into_pyobject(py);
            match t {
                Ok(t) => PyObj::new(t.into_any()),
                Err(e) => {
                    crate::failure::record(e);
                    PyObj::new(py.None().into_bound(py))
                }
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
