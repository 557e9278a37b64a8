//! `heddle._heddle.bridge.Bridge`: the host side of one bridged process, for Python
//! (`heddle.bridge.Bridge`, and `TaskGraph.bridge`'s tasks). Records cross as wire triples
//! `(codec, key, payload)`; `heddle._bridge` turns Python values into them and back. Every
//! call that waits for the filter releases the GIL.

use std::time::Duration;

use heddle_bridge::{Bridge, BridgeConfig, FilterCommand, Record, Transport};
use heddle_wire::Codec;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::errors;

/// A record as Python sees it: `(codec, key, payload)`.
pub(crate) type Triple = (u8, Vec<u8>, Vec<u8>);

/// The record of a wire triple.
pub(crate) fn record(t: Triple) -> PyResult<Record> {
    let codec = Codec::from_u8(t.0).map_err(|e| errors::argument(e.to_string()))?;
    Ok(Record { codec, key: t.1, payload: t.2 })
}

/// The wire triple of a record.
pub(crate) fn triple<'py>(py: Python<'py>, r: &Record) -> PyResult<Bound<'py, PyAny>> {
    (r.codec.to_u8(), PyBytes::new(py, &r.key), PyBytes::new(py, &r.payload))
        .into_pyobject(py)
        .map(|t| t.into_any())
}

fn triples<'py>(py: Python<'py>, rs: Vec<Record>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    rs.iter().map(|r| triple(py, r)).collect()
}

/// Runs `call` without the GIL, collecting the results it passes on, as triples.
fn collected<'py>(
    py: Python<'py>,
    call: impl FnOnce(&mut dyn FnMut(Record)) -> heddle_bridge::Result<()> + Send,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let mut out = Vec::new();
    py.detach(|| call(&mut |x| out.push(x))).map_err(errors::bridge)?;
    triples(py, out)
}

/// The program and settings of a bridge made from Python (`Bridge`, `DataSet.pipe`);
/// `what` names the caller in errors.
#[allow(clippy::too_many_arguments)]
pub(crate) fn config(
    what: &str,
    command: &[String],
    task: String,
    transport: &str,
    args: Vec<String>,
    credits: u32,
    max_record: u64,
    timeout_s: f64,
    policy: Option<String>,
) -> PyResult<(FilterCommand, BridgeConfig)> {
    let Some((program, rest)) = command.split_first() else {
        return Err(errors::argument(format!("{what}: the command is empty")));
    };
    if !(timeout_s.is_finite() && timeout_s > 0.0) {
        return Err(errors::argument(format!(
            "{what}: timeout_s must be a positive number of seconds, not {timeout_s}"
        )));
    }
    let transport: Transport = transport.parse().map_err(errors::bridge)?;
    let mut cfg = BridgeConfig::new(task)
        .transport(transport)
        .args(args)
        .credits(credits)
        .max_record(max_record);
    cfg.start_timeout = Duration::from_secs_f64(timeout_s);
    cfg.idle_timeout = Duration::from_secs_f64(timeout_s);
    if let Some(p) = policy {
        cfg.policy = Some(heddle_bridge::Policy::parse(&p).map_err(errors::bridge)?);
    }
    Ok((FilterCommand::new(program).args(rest.iter().cloned()), cfg))
}

/// One running bridged process.
#[pyclass(name = "Bridge", module = "heddle._heddle.bridge", frozen)]
pub(crate) struct PyBridge {
    inner: Bridge,
}

#[pymethods]
impl PyBridge {
    /// Starts ``command`` and returns once its ``init`` ran.
    #[new]
    #[pyo3(signature = (command, task, instance=0, parallelism=1, bridge_id=1, transport="pipe",
                        args=Vec::new(), credits=64, max_record=64 << 20, timeout_s=60.0,
                        policy=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        command: Vec<String>,
        task: String,
        instance: u32,
        parallelism: u32,
        bridge_id: u32,
        transport: &str,
        args: Vec<String>,
        credits: u32,
        max_record: u64,
        timeout_s: f64,
        policy: Option<String>,
    ) -> PyResult<PyBridge> {
        let (cmd, mut cfg) = config(
            "Bridge", &command, task, transport, args, credits, max_record, timeout_s, policy,
        )?;
        cfg = cfg.instance(instance, parallelism);
        cfg.bridge_id = bridge_id;
        let inner = py.detach(|| Bridge::start(&cmd, cfg)).map_err(errors::bridge)?;
        Ok(PyBridge { inner })
    }

    /// Sends one record; returns the results that arrived meanwhile.
    fn send<'py>(&self, py: Python<'py>, record: Triple) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let r = self::record(record)?;
        collected(py, |sink| self.inner.send(r, sink))
    }

    /// The results received so far.
    fn drain<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        collected(py, |sink| self.inner.drain(sink).map(drop))
    }

    /// One result, waiting up to ``timeout_s`` (``None`` if none came).
    fn recv<'py>(&self, py: Python<'py>, timeout_s: f64) -> PyResult<Option<Bound<'py, PyAny>>> {
        let limit = Duration::from_secs_f64(timeout_s.max(0.0));
        let got = py.detach(|| self.inner.recv(limit)).map_err(errors::bridge)?;
        Ok(triples(py, got.into_iter().collect())?.pop())
    }

    /// Ends the input: the filter's ``finalize`` runs; returns every remaining result.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyAny>>> {
        collected(py, |sink| self.inner.finish(sink).map(drop))
    }

    /// Stops the filter without ``finalize``; returns how it ended.
    fn abort(&self, py: Python<'_>, reason: &str) -> String {
        py.detach(|| self.inner.abort(reason))
    }

    /// Moves the bridge to another transport while it runs; returns the seconds it took.
    fn switch(&self, py: Python<'_>, transport: &str) -> PyResult<f64> {
        let t: Transport = transport.parse().map_err(errors::bridge)?;
        py.detach(|| self.inner.switch(t)).map(|d| d.as_secs_f64()).map_err(errors::bridge)
    }

    /// Pauses (``True``) or resumes the filter.
    fn set_paused(&self, py: Python<'_>, paused: bool) -> PyResult<()> {
        py.detach(|| self.inner.set_paused(paused)).map_err(errors::bridge)
    }

    /// The filter's STATUS answer.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = py.detach(|| self.inner.status()).map_err(errors::bridge)?;
        let d = PyDict::new(py);
        d.set_item("records_in", s.records_in)?;
        d.set_item("records_out", s.records_out)?;
        d.set_item("bytes_in", s.bytes_in)?;
        d.set_item("bytes_out", s.bytes_out)?;
        d.set_item("open_fds", s.open_fds)?;
        d.set_item("rss_bytes", s.rss_bytes)?;
        d.set_item("cpu_us", s.cpu_us)?;
        Ok(d)
    }

    /// The bridge's measurements.
    fn diagnostics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let m = self.inner.diagnostics();
        let d = PyDict::new(py);
        d.set_item("transport", m.transport.name())?;
        d.set_item("epoch", m.epoch)?;
        d.set_item("records_sent", m.records_sent)?;
        d.set_item("records_received", m.records_received)?;
        d.set_item("bytes_sent", m.bytes_sent)?;
        d.set_item("bytes_received", m.bytes_received)?;
        d.set_item("in_flight", m.in_flight)?;
        d.set_item("latency_p50_us", m.latency_p50_us)?;
        d.set_item("latency_p99_us", m.latency_p99_us)?;
        d.set_item("switches_s", m.switches.iter().map(Duration::as_secs_f64).collect::<Vec<_>>())?;
        d.set_item("switch_reasons", m.switch_reasons)?;
        d.set_item("mean_record_bytes", m.mean_record_bytes)?;
        d.set_item("shm_bytes", m.shm_bytes)?;
        d.set_item("host_open_fds", m.host_open_fds)?;
        d.set_item("host_open_sockets", m.host_open_sockets)?;
        Ok(d)
    }

    /// The filter's process id.
    #[getter]
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// The transport in use.
    #[getter]
    fn transport(&self) -> &'static str {
        self.inner.transport().name()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBridge>()
}
