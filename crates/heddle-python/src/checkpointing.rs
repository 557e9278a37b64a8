//! Where and how often Python streams and streaming task jobs checkpoint: the
//! `checkpoint_interval`, `checkpoint_dir` and `job` arguments of ``heddle.data.Session``
//! and ``heddle.task.Job``, over the defaults that `heddle run --checkpoint-interval S
//! --checkpoint-dir DIR` puts in the environment (`HEDDLE_CHECKPOINT_INTERVAL_S`,
//! `HEDDLE_CHECKPOINT_DIR`, which `heddle_data::Session::new` reads).
//!
//! The job's name is the Python side's (the script's name unless given): the Rust default,
//! the program's name, would be `python3` for every Python job, and two of them would then
//! share (and refuse, or worse resume) each other's checkpoints.

use std::path::PathBuf;
use std::time::Duration;

use heddle_task::Checkpointing;
use pyo3::prelude::*;

use crate::errors::argument;

/// `checkpoint_interval` (seconds) as a duration: positive and finite.
fn interval_of(seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).ok().filter(|d| !d.is_zero()).ok_or_else(|| {
        argument(format!(
            "checkpoint_interval must be a positive number of seconds (or None: only a last \
             checkpoint when the sources end), got {seconds}"
        ))
    })
}

/// The checkpoints asked for, if any: `interval` and `dir` given here win over `env`
/// (what the environment asks for); without them the interval is the environment's (or
/// none: one last checkpoint when the sources end) and the directory is
/// `HEDDLE_CHECKPOINT_DIR`, else this user's private default for `job`. Nothing given and
/// nothing in the environment: no checkpoints.
pub(crate) fn resolve(
    interval: Option<f64>,
    dir: Option<PathBuf>,
    job: &str,
    env: Option<&Checkpointing>,
) -> PyResult<Option<Checkpointing>> {
    if interval.is_none() && dir.is_none() && env.is_none() {
        return Ok(None);
    }
    if job.is_empty() || job.contains(['/', '\0']) || job == "." || job == ".." {
        return Err(argument(format!(
            "job={job:?} must name the job (a non-empty name without '/'): its checkpoints \
             are its own"
        )));
    }
    let interval = match interval {
        Some(s) => Some(interval_of(s)?),
        None => env.and_then(|c| c.interval),
    };
    let dir = match dir.filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d,
        None => match std::env::var_os(heddle_comm::settings::CHECKPOINT_DIR)
            .filter(|d| !d.is_empty())
        {
            Some(d) => PathBuf::from(d),
            None => heddle_data::run_dir(job).map_err(crate::errors::data)?,
        },
    };
    let alignment_timeout =
        heddle_data::alignment_timeout_from_env().map_err(crate::errors::data)?;
    Ok(Some(Checkpointing { dir, job: job.to_string(), interval, alignment_timeout }))
}

/// A checkpoint configuration as ``(dir, job, interval in seconds or None)``.
pub(crate) fn described(c: &Checkpointing) -> (PathBuf, String, Option<f64>) {
    (c.dir.clone(), c.job.clone(), c.interval.map(|i| i.as_secs_f64()))
}
