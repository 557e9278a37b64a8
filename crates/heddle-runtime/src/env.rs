//! Where a worker learns its place in the job: `HEDDLE_*` variables set by `heddle run`,
//! or the rank and size variables of mpirun, PMI, Slurm and Kubernetes Indexed Jobs.

use std::time::Duration;

use heddle_comm::settings::{self, Bounds};

use crate::{Error, Result};

/// The text of a settings error (without the communication layer's prefix).
fn setting_message(e: heddle_comm::Error) -> String {
    match e {
        heddle_comm::Error::Config(m) => m,
        other => other.to_string(),
    }
}

/// Checks every `HEDDLE_*` variable of the environment `vars` (name, value) before a job
/// starts: no unknown setting, every numeric one in its range (and the transport and
/// algorithms parse). `heddle run` calls it, so a bad value stops the launch with one clear
/// error instead of failing in every worker.
///
/// # Errors
/// [`Error::Env`] naming the variable, the value and what is valid.
pub fn check_environment(vars: &[(String, String)]) -> Result<()> {
    check_known_keys(vars.iter().map(|(k, _)| k.clone()))?;
    let get = |k: &str| vars.iter().rev().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    settings::check_all(get).map_err(|e| Error::Env(setting_message(e)))?;
    if let Some(t) = get("HEDDLE_TRANSPORT").filter(|t| !t.is_empty()) {
        t.parse::<heddle_comm::TransportChoice>().map_err(|e| Error::Env(setting_message(e)))?;
    }
    Ok(())
}

/// A worker's identity in its job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerEnv {
    /// World rank.
    pub rank: usize,
    /// World size.
    pub size: usize,
    /// `host:port` of the job master (absent for a world of one).
    pub master: Option<String>,
    /// The per-job secret (`HEDDLE_JOB_TOKEN`).
    pub token: Option<String>,
    /// How long to wait for every worker to join (`HEDDLE_INIT_TIMEOUT_S`, default 60).
    pub init_timeout: Duration,
    /// How often to tell the job master this worker is alive (`HEDDLE_HEARTBEAT_S`,
    /// default 1).
    pub heartbeat: Duration,
    /// Silence of the job master after which this worker gives the job up
    /// (`HEDDLE_HEARTBEAT_TIMEOUT_S`, default 5).
    pub heartbeat_timeout: Duration,
    /// Which attempt of the job this is (`HEDDLE_ATTEMPT`, 0 for the first; `heddle run
    /// --restarts` counts up).
    pub attempt: u32,
}

/// Heartbeat interval when `HEDDLE_HEARTBEAT_S` is not set.
pub(crate) const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(1);
/// Heartbeat timeout when `HEDDLE_HEARTBEAT_TIMEOUT_S` is not set.
pub(crate) const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);

/// Every `HEDDLE_*` variable a worker reads (with [`heddle_comm::CommConfig::ENV_KEYS`]).
const RUNTIME_KEYS: &[&str] = &[
    "HEDDLE_RANK",
    "HEDDLE_WORLD_SIZE",
    "HEDDLE_MASTER",
    "HEDDLE_JOB_TOKEN",
    "HEDDLE_INIT_TIMEOUT_S",
    "HEDDLE_HEARTBEAT_S",
    "HEDDLE_HEARTBEAT_TIMEOUT_S",
    "HEDDLE_ATTEMPT",
    "HEDDLE_HOST_ID",
    "HEDDLE_LOG",
    // The job directory, where workers register their scratch directories.
    "HEDDLE_JOB_DIR",
    // Executor threads per worker, read by heddle-task's jobs.
    "HEDDLE_TASK_THREADS",
    // Streams' checkpoints, read by heddle-data's sessions.
    "HEDDLE_CHECKPOINT_INTERVAL_S",
    "HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S",
    "HEDDLE_CHECKPOINT_DIR",
    // One id per `heddle run`, the same in every attempt (default checkpoint directories).
    "HEDDLE_RUN_ID",
];

/// Rejects a `HEDDLE_*` variable nobody reads: a misspelled setting must not be ignored.
///
/// # Errors
/// [`Error::Env`] naming the variable and, when one is close, the setting it resembles.
pub fn check_known_keys(keys: impl IntoIterator<Item = String>) -> Result<()> {
    let known: Vec<&str> =
        RUNTIME_KEYS.iter().chain(heddle_comm::CommConfig::ENV_KEYS).copied().collect();
    for k in keys.into_iter().filter(|k| k.starts_with("HEDDLE_")) {
        if !known.contains(&k.as_str()) {
            return Err(Error::Env(match heddle_comm::closest(&k, &known) {
                Some(s) => format!("unknown setting {k}; did you mean {s}?"),
                None => format!("unknown setting {k}; known settings: {}", known.join(", ")),
            }));
        }
    }
    Ok(())
}

/// A heartbeat timeout must leave room for at least two heartbeats.
///
/// # Errors
/// [`Error::Env`] naming both settings.
pub fn check_heartbeat(interval: Duration, timeout: Duration) -> Result<()> {
    if timeout < 2 * interval {
        return Err(Error::Env(format!(
            "the heartbeat timeout ({:.3} s, HEDDLE_HEARTBEAT_TIMEOUT_S or \
             --heartbeat-timeout) must be at least twice the heartbeat interval ({:.3} s, \
             HEDDLE_HEARTBEAT_S or --heartbeat-interval)",
            timeout.as_secs_f64(),
            interval.as_secs_f64()
        )));
    }
    Ok(())
}

const RANK_VARS: &[&str] =
    &["HEDDLE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "JOB_COMPLETION_INDEX"];
const SIZE_VARS: &[&str] =
    &["HEDDLE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"];

impl WorkerEnv {
    /// Reads the process environment.
    ///
    /// # Errors
    /// [`Error::Env`] naming a variable that does not parse or a missing master address.
    pub fn from_env() -> Result<WorkerEnv> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// Reads variables through `get` (for tests).
    ///
    /// # Errors
    /// As [`WorkerEnv::from_env`].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<WorkerEnv> {
        let first = |names: &[&'static str], bounds: Bounds| -> Result<Option<usize>> {
            for n in names {
                if let Some(v) = get(n).filter(|v| !v.is_empty()) {
                    let b = Bounds { name: n, ..bounds };
                    return settings::whole(&b, &v)
                        .map(|x| Some(x as usize))
                        .map_err(|e| Error::Env(setting_message(e)));
                }
            }
            Ok(None)
        };
        let rank = first(RANK_VARS, settings::RANK)?.unwrap_or(0);
        let size = first(SIZE_VARS, settings::WORLD_SIZE)?.unwrap_or(1);
        if size == 0 || rank >= size {
            return Err(Error::Env(format!("rank {rank} is not below the world size {size}")));
        }
        let master = get("HEDDLE_MASTER").filter(|v| !v.is_empty());
        if size > 1 && master.is_none() {
            return Err(Error::Env(format!(
                "this is rank {rank} of {size} but HEDDLE_MASTER is not set; start the job with \
                 `heddle run -n {size} -- PROGRAM`"
            )));
        }
        let seconds = |b: &Bounds, default: Duration| -> Result<Duration> {
            match get(b.name).filter(|v| !v.is_empty()) {
                Some(v) => settings::seconds(b, &v).map_err(|e| Error::Env(setting_message(e))),
                None => Ok(default),
            }
        };
        let init_timeout = seconds(&settings::INIT_TIMEOUT_S, Duration::from_secs(60))?;
        let heartbeat = seconds(&settings::HEARTBEAT_S, DEFAULT_HEARTBEAT)?;
        let heartbeat_timeout = seconds(&settings::HEARTBEAT_TIMEOUT_S, DEFAULT_HEARTBEAT_TIMEOUT)?;
        check_heartbeat(heartbeat, heartbeat_timeout)?;
        let attempt = first(&["HEDDLE_ATTEMPT"], settings::ATTEMPT)?.unwrap_or(0) as u32;
        Ok(WorkerEnv {
            rank,
            size,
            master,
            token: get("HEDDLE_JOB_TOKEN"),
            init_timeout,
            heartbeat,
            heartbeat_timeout,
            attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<WorkerEnv> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect();
        WorkerEnv::from_lookup(|k| pairs.iter().find(|(a, _)| a == k).map(|(_, b)| b.clone()))
    }

    #[test]
    fn no_launcher_is_a_world_of_one() {
        let e = env(&[]).unwrap();
        assert_eq!((e.rank, e.size, e.master), (0, 1, None));
    }

    #[test]
    fn other_launchers_set_rank_and_size() {
        let e = env(&[
            ("OMPI_COMM_WORLD_RANK", "2"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("HEDDLE_MASTER", "h:1"),
        ])
        .unwrap();
        assert_eq!((e.rank, e.size), (2, 4));
        let e =
            env(&[("SLURM_PROCID", "1"), ("SLURM_NTASKS", "3"), ("HEDDLE_MASTER", "h:1")]).unwrap();
        assert_eq!((e.rank, e.size), (1, 3));
    }

    #[test]
    fn misspelled_settings_are_refused_with_a_suggestion() {
        assert!(check_known_keys([
            "HEDDLE_RANK".to_string(),
            "PATH".to_string(),
            "HEDDLE_WINDOW".to_string(),
            "HEDDLE_TASK_THREADS".to_string()
        ])
        .is_ok());
        let e = check_known_keys(["HEDDLE_TIMOUT_S".to_string()]).unwrap_err().to_string();
        assert!(
            e.contains("unknown setting HEDDLE_TIMOUT_S; did you mean HEDDLE_TIMEOUT_S?"),
            "{e}"
        );
        let e = check_known_keys(["HEDDLE_FROBNICATE".to_string()]).unwrap_err().to_string();
        assert!(e.contains("known settings: HEDDLE_RANK"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = env(&[("HEDDLE_RANK", "x")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_RANK=\"x\""), "{e}");
        let e = env(&[("HEDDLE_RANK", "1"), ("HEDDLE_WORLD_SIZE", "2")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_MASTER is not set"), "{e}");
        let e = env(&[("HEDDLE_RANK", "3"), ("HEDDLE_WORLD_SIZE", "2")]).unwrap_err().to_string();
        assert!(e.contains("not below"), "{e}");
    }
}
