//! The applications' entry points for Python (`heddle.apps` wraps them): MDS over the
//! rows of a dissimilarity matrix that every rank passes whole, and particle-filter SLAM
//! of the simulated robot.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use heddle_apps::mds::{self, Options, Rows};
use heddle_apps::{ad_benchmark, slam};

use crate::buffer::{Buffer, Dtype};
use crate::comm::PyComm;
use crate::errors::{self, argument};

/// A float64 C-order buffer of `len` values (`what` names it in errors), exported.
fn buffer(obj: &Bound<'_, PyAny>, len: usize, what: &str) -> PyResult<Buffer> {
    let b = Buffer::get(obj, false, what)?;
    if b.dtype != Dtype::F64 || b.elements() != len {
        return Err(argument(format!(
            "{what} must hold {len} float64 values, not {}",
            b.describe()
        )));
    }
    if !b.region().aligned_for(8) {
        return Err(argument(format!("{what} must be aligned to 8 bytes (numpy's are)")));
    }
    Ok(b)
}

/// A worker's rows of the `n × n` matrix `obj`, checked whole.
fn rows(
    obj: &Bound<'_, PyAny>,
    n: usize,
    what: &str,
    source: &str,
    comm: &PyComm,
) -> PyResult<Rows> {
    let b = buffer(obj, n * n, what)?;
    let c = comm.comm();
    // SAFETY: the buffer stays exported until `b` drops, after the rows are copied out;
    // float64 and aligned (checked by `buffer`).
    let full = unsafe { b.region().typed::<f64>() };
    Rows::checked(full, n, what, source, c.rank(), c.size()).map_err(errors::apps)
}

/// ``mds_into(comm, distances, n, source, weights, init, out, dim, anneal, max_iter, tol,
/// seed)``: DA-SMACOF of the ``n × n`` float64 ``distances`` (``source`` names them in
/// errors; ``weights`` alike or ``None``), from ``init`` (``n × dim``) or a seeded start;
/// writes the coordinates to ``out`` (``n × dim`` float64) and returns ``(stress,
/// iterations, temperatures)``. Collective over ``comm``; the GIL is released meanwhile.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
#[pyo3(signature = (comm, distances, n, source, weights, init, out, dim, anneal, max_iter, tol, seed))]
fn mds_into(
    py: Python<'_>,
    comm: &PyComm,
    distances: &Bound<'_, PyAny>,
    n: usize,
    source: &str,
    weights: Option<&Bound<'_, PyAny>>,
    init: Option<&Bound<'_, PyAny>>,
    out: &Bound<'_, PyAny>,
    dim: usize,
    anneal: bool,
    max_iter: usize,
    tol: f64,
    seed: u64,
) -> PyResult<(f64, usize, usize)> {
    let c = comm.comm();
    let delta = rows(distances, n, "distances", source, comm)?;
    let weights = weights.map(|w| rows(w, n, "weights", "the weights array", comm)).transpose()?;
    let init = match init {
        // SAFETY: exported until the copy is made; float64 and aligned (checked).
        Some(x) => Some(unsafe { buffer(x, n * dim, "init")?.region().typed::<f64>() }.to_vec()),
        None => None,
    };
    let o = Buffer::get(out, true, "out")?;
    if o.dtype != Dtype::F64 || o.elements() != n * dim || !o.region().aligned_for(8) {
        return Err(argument(format!("out must hold {} float64 values, aligned", n * dim)));
    }
    let opts = Options { dim, anneal, max_iter, tol, seed, ..Options::default() };
    let fit = py
        .detach(|| mds::mds(c, &delta, weights.as_ref(), init.as_deref(), &opts))
        .map_err(errors::apps)?;
    // SAFETY: `out` stays exported (writable) until `o` drops; aligned and sized (above).
    unsafe { o.region().typed_mut::<f64>() }.copy_from_slice(&fit.coords);
    Ok((fit.stress, fit.iterations, fit.temperatures))
}

/// What `slam_run` returns: the scans used, poses, truth and dead reckoning (x, y, θ per
/// scan, flat), latencies in ms, the two RMSEs, (resamplings, missing, out of order) and
/// the map's cells (worker 0; the other workers get empty lists and `None`).
type SlamRun<'py> = (
    Vec<usize>,
    Vec<f64>,
    Vec<f64>,
    Vec<f64>,
    Vec<f64>,
    (f64, f64),
    (usize, usize, usize),
    Option<Bound<'py, PyBytes>>,
);

/// ``slam_run(comm, particles, beams, scans, rate_hz, max_range, seed, lose, reorder)``:
/// RBPF SLAM of the simulated robot (``heddle::apps::slam``). Collective over ``comm``;
/// the GIL is released meanwhile.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn slam_run<'py>(
    py: Python<'py>,
    comm: &PyComm,
    particles: usize,
    beams: usize,
    scans: usize,
    rate_hz: f64,
    max_range: f64,
    seed: u64,
    lose: f64,
    reorder: f64,
) -> PyResult<SlamRun<'py>> {
    let c = comm.comm();
    let opts = slam::Options { particles, beams, scans, rate_hz, max_range, seed, lose, reorder };
    let run = py.detach(|| slam::slam(c, &opts)).map_err(errors::slam)?;
    let flat = |v: &[slam::Pose]| v.iter().flat_map(|p| [p.x, p.y, p.theta]).collect::<Vec<_>>();
    let ms = run.latencies.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    let map = run.map.as_ref().map(|g| {
        let bytes: Vec<u8> = g.cells().iter().map(|&c| c as u8).collect();
        PyBytes::new(py, &bytes)
    });
    Ok((
        run.scans.clone(),
        flat(&run.poses),
        flat(&run.truth),
        flat(&run.odometry),
        ms,
        (run.rmse_m, run.odometry_rmse_m),
        (run.resamples, run.missing, run.out_of_order),
        map,
    ))
}

/// What `ad_benchmark_run` returns on worker 0: events, views, windows, throughput
/// (events/s), latency p50 and p99 (ms, `None` when no window fired while events flowed),
/// job seconds, and whether every count was right.
type AdReport = (u64, u64, usize, f64, Option<i64>, Option<i64>, f64, bool);

/// ``ad_benchmark_run(comm, redis, rate, seconds, campaigns, ads_per_campaign, window_s,
/// key, output_key, seed)``: the streaming benchmark over Redis
/// (``heddle::apps::ad_benchmark``) on a copy of ``comm``; the report on rank 0, ``None``
/// elsewhere. The GIL is released meanwhile.
#[pyfunction]
#[allow(clippy::too_many_arguments)] // Python keyword arguments
fn ad_benchmark_run(
    py: Python<'_>,
    comm: &PyComm,
    redis: String,
    rate: f64,
    seconds: f64,
    campaigns: u32,
    ads_per_campaign: u32,
    window_s: f64,
    key: String,
    output_key: String,
    seed: u64,
) -> PyResult<Option<AdReport>> {
    if !(window_s >= 0.001 && window_s.is_finite()) {
        return Err(argument(format!("window_s = {window_s}: at least 0.001")));
    }
    let opts = ad_benchmark::Options {
        rate,
        seconds,
        campaigns,
        ads_per_campaign,
        window: std::time::Duration::from_secs_f64(window_s),
        key,
        output_key,
        seed,
        ..ad_benchmark::Options::new(redis)
    };
    let c = comm.comm();
    let report = py
        .detach(|| {
            let own = c.split(Some(0), c.rank() as i64)?.ok_or_else(|| {
                ad_benchmark::Error::InvalidArgument("no copy of the communicator".into())
            })?;
            ad_benchmark::run(own, &opts)
        })
        .map_err(errors::ad_benchmark)?;
    Ok(report.map(|r| {
        (
            r.events,
            r.views,
            r.windows,
            r.throughput_eps,
            r.latency_p50_ms,
            r.latency_p99_ms,
            r.job_s,
            r.correct,
        )
    }))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(mds_into, m)?)?;
    m.add_function(wrap_pyfunction!(slam_run, m)?)?;
    m.add_function(wrap_pyfunction!(ad_benchmark_run, m)?)
}
