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
    let metrics = heddle_comm::metrics::METRICS_ENV;
    if let Some(v) = get(metrics).filter(|v| heddle_comm::metrics::switch(v).is_none()) {
        return Err(Error::Env(format!("{metrics}={v:?}: use on or off")));
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
    /// Which launcher gave the rank and size, and what it says about the job.
    pub launch: Launch,
    /// A file holding the job token (`HEDDLE_JOB_TOKEN_FILE`; a Kubernetes Secret, say),
    /// read when `token` is not set.
    pub token_file: Option<std::path::PathBuf>,
    /// Where rank 0 hosts the job master (`HEDDLE_MASTER_LISTEN`: `IP` or `IP:PORT`); by
    /// default, when `HEDDLE_MASTER` is not set, an ephemeral port on loopback (one host)
    /// or on this host's first network address.
    pub master_listen: Option<String>,
    /// A directory every host of the job sees (`HEDDLE_RENDEZVOUS`), where rank 0 leaves
    /// the master's address and token for the others when `HEDDLE_MASTER` is not set.
    pub rendezvous: Option<std::path::PathBuf>,
    /// What protects this worker's connections (`HEDDLE_SECURITY`).
    pub security: crate::Security,
}

/// The launcher that started this worker, as its variables tell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// Its name in messages (`heddle run`, `mpirun`, `srun`, ...).
    pub name: &'static str,
    /// The variables that gave the rank and the size.
    pub rank_var: &'static str,
    /// See `rank_var`.
    pub size_var: &'static str,
    /// The launcher's id of this job (`HEDDLE_RUN_ID`, Open MPI's PMIx namespace, Slurm's
    /// job and step ids): names the rendezvous file.
    pub job_id: Option<String>,
    /// Whether the launcher says that every rank runs on this host.
    pub one_host: bool,
    /// Whether the launcher runs a PMIx server for this rank (`PMIX_NAMESPACE` and
    /// `PMIX_RANK` set): rank 0's address can go through its key-value store.
    pub pmix: bool,
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
    "HEDDLE_MASTER_LISTEN",
    "HEDDLE_RENDEZVOUS",
    "HEDDLE_JOB_TOKEN",
    "HEDDLE_JOB_TOKEN_FILE",
    "HEDDLE_INIT_TIMEOUT_S",
    "HEDDLE_HEARTBEAT_S",
    "HEDDLE_HEARTBEAT_TIMEOUT_S",
    "HEDDLE_ATTEMPT",
    "HEDDLE_HOST_ID",
    "HEDDLE_SECURITY",
    "HEDDLE_LOG",
    "HEDDLE_LOG_FORMAT",
    // The launcher's dashboard off loopback.
    "HEDDLE_DASHBOARD_TOKEN",
    // Workers' counting for the dashboard and /metrics (on unless `off`).
    heddle_comm::metrics::METRICS_ENV,
    // The job directory, where workers register their scratch directories.
    "HEDDLE_JOB_DIR",
    // Executor threads per worker, read by heddle-task's jobs.
    "HEDDLE_TASK_THREADS",
    // What each worker offers to task placement (`heddle run --cpus-per-worker
    // --memory-per-worker`), read by heddle-task's `WorkerSpec::discover`.
    "HEDDLE_CPUS_PER_WORKER",
    "HEDDLE_MEMORY_PER_WORKER",
    // The job's default task contract (a config file's [resources]), read by heddle-task.
    "HEDDLE_TASK_CPUS",
    "HEDDLE_TASK_MEMORY",
    "HEDDLE_TASK_ISOLATION",
    "HEDDLE_TASK_IO_BYTES_PER_S",
    // How a job is admitted beside other jobs on its hosts, read by heddle-task.
    "HEDDLE_ADMISSION",
    "HEDDLE_ADMISSION_TIMEOUT_S",
    // The config file `heddle run` read (`--config`).
    "HEDDLE_CONFIG",
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

/// A launcher's variables: its name, then the rank, size, job id and ranks-on-this-host
/// variables.
struct Family {
    name: &'static str,
    rank: &'static str,
    size: &'static str,
    job_id: &'static [&'static str],
    local_size: &'static str,
}

/// The launchers whose variables a worker reads, first match wins. Slurm's size is the
/// step's (`SLURM_STEP_NUM_TASKS`): a batch script has `SLURM_PROCID` and `SLURM_NTASKS`
/// too, and a program run there directly is a world of one.
const FAMILIES: &[Family] = &[
    Family {
        name: "heddle run",
        rank: "HEDDLE_RANK",
        size: "HEDDLE_WORLD_SIZE",
        job_id: &[],
        local_size: "",
    },
    Family {
        name: "mpirun",
        rank: "OMPI_COMM_WORLD_RANK",
        size: "OMPI_COMM_WORLD_SIZE",
        job_id: &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"],
        local_size: "OMPI_COMM_WORLD_LOCAL_SIZE",
    },
    Family {
        name: "a PMI launcher",
        rank: "PMI_RANK",
        size: "PMI_SIZE",
        job_id: &["PMIX_NAMESPACE", "PMI_KVSNAME"],
        local_size: "MPI_LOCALNRANKS",
    },
    Family {
        name: "srun",
        rank: "SLURM_PROCID",
        size: "SLURM_STEP_NUM_TASKS",
        job_id: &["SLURM_JOB_ID"],
        local_size: "",
    },
    Family {
        name: "a Kubernetes Indexed Job",
        rank: "JOB_COMPLETION_INDEX",
        size: "HEDDLE_WORLD_SIZE",
        job_id: &[],
        local_size: "",
    },
];

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
        let set = |n: &str| get(n).filter(|v| !v.is_empty()).is_some();
        // Slurm's rank without a step size is a batch script's: not a job of its own.
        let family = FAMILIES.iter().find(|f| set(f.rank) && (f.name != "srun" || set(f.size)));
        let (rank, size, launch) = match family {
            None => (0, 1, Launch::none()),
            Some(f) => {
                let rank = first(&[f.rank], settings::RANK)?.unwrap_or(0);
                let size = first(&[f.size], settings::WORLD_SIZE)?.ok_or_else(|| {
                    Error::Env(format!(
                        "{} is set (by {}) but {} is not: set it to the number of workers",
                        f.rank, f.name, f.size
                    ))
                })?;
                if rank >= size {
                    return Err(Error::Env(format!(
                        "rank {rank} ({}) is not below the world size {size} ({}): the \
                         launcher's variables disagree",
                        f.rank, f.size
                    )));
                }
                (rank, size, Launch::from_family(f, size, &get))
            }
        };
        let master = get("HEDDLE_MASTER").filter(|v| !v.is_empty());
        let master_listen = get("HEDDLE_MASTER_LISTEN").filter(|v| !v.is_empty());
        let rendezvous =
            get("HEDDLE_RENDEZVOUS").filter(|v| !v.is_empty()).map(std::path::PathBuf::from);
        if size > 1 && master.is_none() {
            crate::rendezvous::check_rendezvous(rank, size, &launch, rendezvous.as_deref())?;
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
            token: get("HEDDLE_JOB_TOKEN").filter(|v| !v.is_empty()),
            init_timeout,
            heartbeat,
            heartbeat_timeout,
            attempt,
            launch,
            token_file: get("HEDDLE_JOB_TOKEN_FILE")
                .filter(|v| !v.is_empty())
                .map(std::path::PathBuf::from),
            master_listen,
            rendezvous,
            security: crate::Security::parse(&get(crate::Security::VAR).unwrap_or_default())?,
        })
    }
}

impl Launch {
    /// No launcher: a world of one.
    fn none() -> Launch {
        Launch {
            name: "no launcher",
            rank_var: "",
            size_var: "",
            job_id: None,
            one_host: true,
            pmix: false,
        }
    }

    fn from_family(f: &Family, size: usize, get: &impl Fn(&str) -> Option<String>) -> Launch {
        let job_id = std::iter::once("HEDDLE_RUN_ID")
            .chain(f.job_id.iter().copied())
            .find_map(|n| get(n).filter(|v| !v.is_empty()))
            .map(|id| match get("SLURM_STEP_ID").filter(|_| f.name == "srun") {
                Some(step) => format!("{id}.{step}"),
                None => id,
            });
        let local = (!f.local_size.is_empty()).then(|| get(f.local_size)).flatten();
        let one_host = match (f.name, local) {
            ("srun", _) => get("SLURM_STEP_NUM_NODES").is_some_and(|n| n.trim() == "1"),
            (_, Some(l)) => l.trim().parse::<usize>().is_ok_and(|l| l == size),
            (_, None) => false,
        };
        let pmix = get("PMIX_NAMESPACE").is_some() && get("PMIX_RANK").is_some();
        Launch { name: f.name, rank_var: f.rank, size_var: f.size, job_id, one_host, pmix }
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
        let e = env(&[
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "3"),
            ("SLURM_STEP_NUM_TASKS", "3"),
            ("HEDDLE_MASTER", "h:1"),
        ])
        .unwrap();
        assert_eq!((e.rank, e.size, e.launch.name), (1, 3, "srun"));
        // A batch script (no step) is a world of one.
        let e = env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "3")]).unwrap();
        assert_eq!((e.rank, e.size), (0, 1));
    }

    #[test]
    fn without_a_master_rank_0_hosts_it_where_the_launcher_allows() {
        // mpirun on one host: its job id names the rendezvous file in a private directory.
        let e = env(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("PMIX_NAMESPACE", "123@1"),
        ])
        .unwrap();
        assert_eq!((e.launch.job_id.as_deref(), e.launch.one_host), (Some("123@1"), true));
        // Several hosts need a shared directory.
        let spread = [
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "4"),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", "2"),
            ("PMIX_NAMESPACE", "123@1"),
        ];
        let e = env(&spread).unwrap_err().to_string();
        assert!(e.contains("set HEDDLE_RENDEZVOUS"), "{e}");
        assert!(e.contains("OMPI_COMM_WORLD_RANK and OMPI_COMM_WORLD_SIZE"), "{e}");
        let mut shared = spread.to_vec();
        shared.push(("HEDDLE_RENDEZVOUS", "/shared/rv"));
        assert!(env(&shared).is_ok());
        // Slurm: job and step ids.
        let e = env(&[
            ("SLURM_PROCID", "0"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURM_STEP_NUM_NODES", "1"),
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "3"),
        ])
        .unwrap();
        assert_eq!((e.launch.job_id.as_deref(), e.launch.one_host), (Some("7.3"), true));
        // No job id at all.
        let e = env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2"), ("MPI_LOCALNRANKS", "2")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("set HEDDLE_RUN_ID"), "{e}");
        // A Kubernetes Indexed Job names its size in HEDDLE_WORLD_SIZE.
        let e = env(&[("JOB_COMPLETION_INDEX", "1")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_WORLD_SIZE is not"), "{e}");
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
    fn the_metrics_switch_takes_on_or_off() {
        let vars = |v: &str| vec![("HEDDLE_METRICS".to_string(), v.to_string())];
        assert!(check_environment(&vars("off")).is_ok());
        assert!(check_environment(&vars("on")).is_ok());
        let e = check_environment(&vars("sometimes")).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_METRICS=\"sometimes\": use on or off"), "{e}");
    }

    #[test]
    fn bad_values_are_named() {
        let e = env(&[("HEDDLE_RANK", "x")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_RANK=\"x\""), "{e}");
        let e = env(&[("HEDDLE_RANK", "1"), ("HEDDLE_WORLD_SIZE", "2")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_MASTER is not set"), "{e}");
        let e = env(&[("HEDDLE_RANK", "3"), ("HEDDLE_WORLD_SIZE", "2")]).unwrap_err().to_string();
        assert!(e.contains("rank 3 (HEDDLE_RANK) is not below the world size 2"), "{e}");
        let e = env(&[("HEDDLE_RANK", "1")]).unwrap_err().to_string();
        assert!(e.contains("HEDDLE_WORLD_SIZE is not"), "{e}");
    }
}
