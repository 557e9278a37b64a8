//! The launcher for Python: `heddle run` (the console command and `python -m heddle`)
//! calls [`heddle_runtime::run_job`], the same code as the Rust `heddle run`.

use std::net::SocketAddr;
use std::time::Duration;

use heddle_runtime::{JobOutcome, LaunchSpec};
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;

use crate::errors::{self, Kind};

/// Runs ``command`` as ``workers`` processes — on this machine, or started by ``mpirun`` or
/// Slurm (``launcher``; ``launcher_args`` go to it; ``allocate``: ``salloc`` or ``sbatch``
/// around ``srun``) — and waits for the job: the job master runs in this process, workers get ``HEDDLE_RANK``, ``HEDDLE_WORLD_SIZE``,
/// ``HEDDLE_MASTER`` and ``HEDDLE_JOB_TOKEN`` plus ``env``, their output is prefixed with
/// ``[rank]``; when one fails or on Ctrl-C/SIGTERM the others are stopped; a failed job is
/// started again up to ``restarts`` times. ``heartbeat_interval`` and ``heartbeat_timeout``
/// (seconds; default ``HEDDLE_HEARTBEAT_S`` and ``HEDDLE_HEARTBEAT_TIMEOUT_S``, else 1 and 5)
/// decide when a silent worker is declared failed. Returns the exit code ``heddle run``
/// exits with (0, the failed worker's code, or 128 + signal).
///
/// Installs process-wide SIGINT/SIGTERM/SIGHUP handlers: meant for a launching process
/// such as the ``heddle`` command, not for a process that is itself a worker.
#[pyfunction]
#[pyo3(signature = (
    workers,
    command,
    env = None,
    init_timeout = 60.0,
    master_bind = None,
    kill_grace = 2.0,
    restarts = 0,
    heartbeat_interval = None,
    heartbeat_timeout = None,
    launcher = "local",
    launcher_args = None,
    allocate = None,
    dashboard = "127.0.0.1:0",
    progress = "auto",
    mpi4py = false
))]
#[allow(clippy::too_many_arguments)] // Python keyword arguments, all with defaults
pub(crate) fn run_job(
    py: Python<'_>,
    workers: usize,
    command: Vec<String>,
    env: Option<Vec<(String, String)>>,
    init_timeout: f64,
    master_bind: Option<&str>,
    kill_grace: f64,
    restarts: u32,
    heartbeat_interval: Option<f64>,
    heartbeat_timeout: Option<f64>,
    launcher: &str,
    launcher_args: Option<Vec<String>>,
    allocate: Option<&str>,
    dashboard: &str,
    progress: &str,
    mpi4py: bool,
) -> PyResult<i32> {
    // Every worker would refuse a bad setting: refuse it once, before starting any.
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    vars.extend(env.iter().flatten().cloned());
    heddle_runtime::check_environment(&vars).map_err(errors::runtime)?;
    let master_bind: Option<SocketAddr> = master_bind
        .map(|b| {
            b.parse().map_err(|_| {
                Kind::Config
                    .err(format!("--master-bind {b:?} is not an address such as 127.0.0.1:0"))
            })
        })
        .transpose()?;
    if !kill_grace.is_finite() || kill_grace < 0.0 {
        return Err(Kind::Config.err(format!(
            "kill_grace={kill_grace} must be a finite, non-negative number of seconds"
        )));
    }
    let init_timeout = heddle_comm::settings::seconds(
        &heddle_comm::settings::INIT_TIMEOUT_S,
        &init_timeout.to_string(),
    )
    .map_err(|e| Kind::Config.err(format!("init_timeout: {e}")))?;
    let mut spec = LaunchSpec::new(workers, command);
    // The job's own settings first, then the launcher's environment.
    let job_env = env.unwrap_or_default();
    spec.settings_from(|k| {
        job_env.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone()).or(std::env::var(k).ok())
    })
    .map_err(errors::runtime)?;
    for (name, bounds, value, field) in [
        (
            "heartbeat_interval",
            heddle_comm::settings::HEARTBEAT_S,
            heartbeat_interval,
            &mut spec.heartbeat,
        ),
        (
            "heartbeat_timeout",
            heddle_comm::settings::HEARTBEAT_TIMEOUT_S,
            heartbeat_timeout,
            &mut spec.heartbeat_timeout,
        ),
    ] {
        if let Some(v) = value {
            *field = heddle_comm::settings::seconds(&bounds, &v.to_string())
                .map_err(|e| Kind::Config.err(format!("{name}: {e}")))?;
        }
    }
    heddle_runtime::check_heartbeat(spec.heartbeat, spec.heartbeat_timeout)
        .map_err(errors::runtime)?;
    spec.dashboard = dashboard.parse().map_err(errors::runtime)?;
    spec.progress = progress.parse().map_err(errors::runtime)?;
    spec.mpi4py = mpi4py;
    spec.restarts = restarts;
    spec.env = job_env;
    spec.init_timeout = init_timeout;
    spec.launcher = launcher.parse().map_err(|e| Kind::Config.err(format!("--launcher: {e}")))?;
    spec.launcher_args = launcher_args.unwrap_or_default();
    spec.allocation = match allocate {
        None | Some("srun") => heddle_runtime::Allocation::Srun,
        Some("salloc") => heddle_runtime::Allocation::Salloc,
        Some("sbatch") => heddle_runtime::Allocation::Sbatch,
        Some(other) => {
            return Err(Kind::Config.err(format!("--allocate {other:?}: use salloc or sbatch")))
        }
    };
    spec.master_bind = master_bind.unwrap_or_else(|| heddle_runtime::default_master_bind(&spec));
    spec.check().map_err(errors::runtime)?;
    spec.kill_grace = Duration::from_secs_f64(kill_grace.max(0.0));
    // The launcher polls its own signal flags; workers are stopped before this returns.
    let outcome = py.detach(|| heddle_runtime::run_job(&spec)).map_err(errors::runtime)?;
    if let Err(e) = py.check_signals() {
        // Python's SIGINT handler ran too; the outcome already says the job was interrupted.
        if !(e.is_instance_of::<PyKeyboardInterrupt>(py)
            && matches!(outcome, JobOutcome::Interrupted { .. }))
        {
            return Err(e);
        }
    }
    Ok(outcome.exit_code())
}

/// Checks ``value`` of the setting ``name`` (a ``HEDDLE_*`` variable) as every worker
/// would: raises ``heddle.ConfigError`` naming the variable, the value and what is valid.
#[pyfunction]
pub(crate) fn check_setting(name: String, value: String) -> PyResult<()> {
    heddle_runtime::check_environment(&[(name, value)]).map_err(errors::runtime)
}

/// Reads the config file at ``path`` (``heddle run --config``): returns the ``heddle run``
/// options it sets, as arguments to go before the command line's own, and the
/// ``HEDDLE_*`` settings (``[settings]``, ``[resources]``) for the workers. Raises
/// ``heddle.ConfigError`` naming the file, the line and the key.
#[pyfunction]
pub(crate) fn read_config(
    path: std::path::PathBuf,
) -> PyResult<(Vec<String>, Vec<(String, String)>)> {
    let c = heddle_runtime::config_file::load(&path).map_err(errors::runtime)?;
    Ok((c.args, c.settings))
}

/// Adds the launcher to the module.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(pyo3::wrap_pyfunction!(run_job, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(check_setting, m)?)?;
    m.add_function(pyo3::wrap_pyfunction!(read_config, m)?)?;
    Ok(())
}
