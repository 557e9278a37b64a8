//! `heddle run -n N -- PROGRAM ARGS...`: starts the job master in this process and N
//! workers — on this machine ([`crate::local`]), or through `mpirun` or Slurm's `srun`
//! ([`crate::external`]) — and stops them all when one fails, on Ctrl-C or SIGTERM, or
//! when this process dies; a failed job is started again up to `--restarts` times.
//!
//! Workers and every process they start share one process group, led by a guardian
//! that kills the group if the launcher dies; on every exit the launcher kills what is left
//! of the group and removes the job's files.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::master::MasterConfig;
use crate::secure::Security;
use crate::{Error, Result};

/// Who starts the workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Launcher {
    /// Heddle itself, on this machine.
    #[default]
    Local,
    /// Open MPI's `mpirun` (`-n N`, the job's settings passed with `-x`).
    Mpirun,
    /// Slurm's `srun` (inside an allocation, or one of its own), or `salloc`/`sbatch`.
    Slurm,
}

impl std::str::FromStr for Launcher {
    type Err = Error;

    fn from_str(s: &str) -> Result<Launcher> {
        match s {
            "local" => Ok(Launcher::Local),
            "mpirun" => Ok(Launcher::Mpirun),
            "slurm" | "srun" => Ok(Launcher::Slurm),
            other => {
                Err(Error::Env(format!("unknown launcher {other:?}: use local, mpirun or slurm")))
            }
        }
    }
}

/// How `--launcher slurm` gets its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Allocation {
    /// `srun` alone: the allocation it runs in, or one it asks for.
    #[default]
    Srun,
    /// `salloc -n N srun ...`: waits for an allocation, then runs the step.
    Salloc,
    /// `sbatch --wait -n N --wrap "srun ..."`: queued as a batch job; waits for its end.
    Sbatch,
}

/// What to launch.
#[derive(Debug, Clone)]
pub struct LaunchSpec {
    /// Number of workers.
    pub workers: usize,
    /// Program and its arguments.
    pub command: Vec<String>,
    /// Extra environment for every worker.
    pub env: Vec<(String, String)>,
    /// How long workers have to join.
    pub init_timeout: Duration,
    /// Where the master listens.
    pub master_bind: SocketAddr,
    /// Grace period between SIGTERM and SIGKILL when stopping workers.
    pub kill_grace: Duration,
    /// How often master and workers tell each other they are alive (default 1 s).
    pub heartbeat: Duration,
    /// Silence after which a worker is declared failed and killed (default 5 s).
    pub heartbeat_timeout: Duration,
    /// How many times a failed job is started again (default 0: it fails).
    pub restarts: u32,
    /// Who starts the workers.
    pub launcher: Launcher,
    /// Arguments for `mpirun` or `srun` before the program (`--oversubscribe`, `-p debug`).
    pub launcher_args: Vec<String>,
    /// How `Launcher::Slurm` gets its nodes.
    pub allocation: Allocation,
    /// What protects the job's connections (`HEDDLE_SECURITY`).
    pub security: Security,
    /// Where the web dashboard and `/metrics` are served (default: a free port on
    /// loopback).
    pub dashboard: crate::DashboardAddr,
    /// Whether a progress bar is drawn on a terminal.
    pub progress: crate::ProgressMode,
    /// Whether `import mpi4py` in the workers loads `heddle.MPI` (`--mpi4py`).
    pub mpi4py: bool,
}

impl LaunchSpec {
    /// `workers` copies of `command` with default settings.
    pub fn new(workers: usize, command: Vec<String>) -> LaunchSpec {
        LaunchSpec {
            workers,
            command,
            env: Vec::new(),
            init_timeout: Duration::from_secs(60),
            master_bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            kill_grace: Duration::from_secs(2),
            heartbeat: crate::env::DEFAULT_HEARTBEAT,
            heartbeat_timeout: crate::env::DEFAULT_HEARTBEAT_TIMEOUT,
            restarts: 0,
            launcher: Launcher::Local,
            launcher_args: Vec::new(),
            allocation: Allocation::Srun,
            security: Security::Auto,
            dashboard: crate::DashboardAddr::default(),
            progress: crate::ProgressMode::Auto,
            mpi4py: false,
        }
    }

    /// Checks the spec before anything starts: at least one worker, heartbeats that leave
    /// room for two beats, no MPI transport (its jobs start under `mpirun` directly),
    /// `allocation` only with Slurm, and no more workers than the Slurm allocation this
    /// runs in has tasks.
    ///
    /// # Errors
    /// [`Error::Env`] saying what is wrong and what to do.
    pub fn check(&self) -> Result<()> {
        if self.workers == 0 {
            return Err(Error::Env("-n must be at least 1".into()));
        }
        crate::env::check_heartbeat(self.heartbeat, self.heartbeat_timeout)?;
        let transport =
            self.env.iter().rev().find(|(k, _)| k == "HEDDLE_TRANSPORT").map(|(_, v)| v.clone());
        if transport.or_else(|| std::env::var("HEDDLE_TRANSPORT").ok()).as_deref() == Some("mpi") {
            return Err(Error::Env(
                "HEDDLE_TRANSPORT=mpi jobs are started by mpirun or srun themselves (MPI gives \
                 the ranks and carries the links): run `HEDDLE_TRANSPORT=mpi mpirun -n N PROGRAM`"
                    .into(),
            ));
        }
        if self.allocation != Allocation::Srun && self.launcher != Launcher::Slurm {
            return Err(Error::Env("--allocate goes with --launcher slurm".into()));
        }
        if self.launcher == Launcher::Slurm {
            crate::external::check_allocation(self.workers, self.allocation, |k| {
                std::env::var(k).ok()
            })?;
        }
        Ok(())
    }

    /// The master of an attempt whose token is `token`.
    pub(crate) fn master_config(&self, token: &str) -> MasterConfig {
        MasterConfig {
            world_size: self.workers,
            token: token.to_string(),
            init_timeout: self.init_timeout,
            bind: self.master_bind,
            heartbeat: self.heartbeat,
            heartbeat_timeout: self.heartbeat_timeout,
            security: self.security,
        }
    }

    /// Takes the heartbeat interval and timeout from `HEDDLE_HEARTBEAT_S` and
    /// `HEDDLE_HEARTBEAT_TIMEOUT_S` of `get`, and the security from `HEDDLE_SECURITY`,
    /// where set.
    ///
    /// # Errors
    /// [`Error::Env`] naming a variable whose value is out of range.
    pub fn settings_from(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        use heddle_comm::settings::{seconds, HEARTBEAT_S, HEARTBEAT_TIMEOUT_S};
        for (bounds, field) in
            [(HEARTBEAT_S, &mut self.heartbeat), (HEARTBEAT_TIMEOUT_S, &mut self.heartbeat_timeout)]
        {
            if let Some(v) = get(bounds.name).filter(|v| !v.is_empty()) {
                *field = seconds(&bounds, &v).map_err(|e| Error::Env(e.to_string()))?;
            }
        }
        if let Some(v) = get(Security::VAR) {
            self.security = Security::parse(&v)?;
        }
        Ok(())
    }
}

/// How a job ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobOutcome {
    /// Every worker exited with status 0.
    Success,
    /// A worker failed first; the others were stopped.
    WorkerFailed {
        /// Its rank.
        rank: usize,
        /// Its exit status or signal, in words.
        status: String,
        /// The exit code `heddle run` should return.
        code: i32,
    },
    /// `mpirun` or `srun` failed, and no worker said why.
    LauncherFailed {
        /// The launcher's command.
        launcher: String,
        /// Its exit status or signal, in words.
        status: String,
        /// The exit code `heddle run` should return.
        code: i32,
    },
    /// The launcher was interrupted (SIGINT / SIGTERM / SIGHUP).
    Interrupted {
        /// The signal number.
        signal: i32,
    },
}

impl JobOutcome {
    /// Exit code for the launching process.
    pub fn exit_code(&self) -> i32 {
        match self {
            JobOutcome::Success => 0,
            JobOutcome::WorkerFailed { code, .. } | JobOutcome::LauncherFailed { code, .. } => {
                *code
            }
            JobOutcome::Interrupted { signal } => 128 + signal,
        }
    }
}

/// Runs a job to completion. A job whose worker failed is started again, all its workers
/// with the same ranks, up to `spec.restarts` times; each attempt has its own master, job
/// token and files, and its workers see `HEDDLE_ATTEMPT` (0, 1, ...).
///
/// # Errors
/// [`Error::Spawn`] if a worker (or `mpirun`, `srun`) cannot be started (the others are
/// stopped first); [`Error::Io`] if the master cannot start; [`Error::Env`] for a bad
/// spec, such as more workers than the Slurm allocation has tasks.
pub fn run_job(spec: &LaunchSpec) -> Result<JobOutcome> {
    spec.check()?;
    let program = spec
        .command
        .first()
        .ok_or_else(|| Error::Env("no program given: heddle run -n N -- PROGRAM ARGS...".into()))?;
    let signal = catch_signals()?;
    let observed = crate::observatory::global();
    let name = std::path::Path::new(program)
        .file_name()
        .map_or(program.as_str(), |n| n.to_str().unwrap_or(program));
    // Stops (the page then says the job ended) when the launcher returns.
    let _dashboard = crate::dashboard::open(spec.dashboard, name, spec.workers)?;
    let _progress = crate::progress::Progress::start(spec.progress);
    // One id for every attempt: streams keep their default checkpoints under it.
    let run = hex::encode(rand::random::<[u8; 8]>());
    let mut attempt = 0;
    loop {
        observed.begin_attempt(attempt);
        let outcome = match spec.launcher {
            Launcher::Local => crate::local::run_attempt(spec, program, attempt, &run, &signal)?,
            Launcher::Mpirun | Launcher::Slurm => {
                crate::external::run_attempt(spec, attempt, &run, &signal)?
            }
        };
        let failed =
            matches!(outcome, JobOutcome::WorkerFailed { .. } | JobOutcome::LauncherFailed { .. });
        if !failed || attempt >= spec.restarts {
            observed.ended(ended_with(&outcome));
            default_checkpoints(&run, matches!(outcome, JobOutcome::Success));
            return Ok(outcome);
        }
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
            observed.ended(Some(format!("interrupted by signal {sig}")));
            return Ok(JobOutcome::Interrupted { signal: sig as i32 });
        }
        attempt += 1;
        eprintln!(
            "heddle: restarting the job: attempt {} of at most {} (--restarts {})",
            attempt + 1,
            spec.restarts + 1,
            spec.restarts
        );
    }
}

/// Why the job failed, in words (`None`: it succeeded).
pub(crate) fn ended_with(outcome: &JobOutcome) -> Option<String> {
    match outcome {
        JobOutcome::Success => None,
        JobOutcome::WorkerFailed { rank, status, .. } => Some(format!("rank {rank} {status}")),
        JobOutcome::LauncherFailed { launcher, status, .. } => Some(format!("{launcher} {status}")),
        JobOutcome::Interrupted { signal } => Some(format!("interrupted by signal {signal}")),
    }
}

/// A flag set to the number of SIGINT, SIGTERM or SIGHUP once one arrives (instead of
/// their default action), for the launcher to stop its workers.
///
/// # Errors
/// [`Error::Io`] if the handlers cannot be installed.
pub(crate) fn catch_signals() -> Result<Arc<AtomicUsize>> {
    let signal = Arc::new(AtomicUsize::new(0));
    for sig in
        [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM, signal_hook::consts::SIGHUP]
    {
        let flag = signal.clone();
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            signal_hook::low_level::register(sig, move || {
                flag.store(sig as usize, Ordering::SeqCst)
            })
        }
        .map_err(|e| Error::io("installing signal handlers", e))?;
    }
    Ok(signal)
}

/// The streams' default checkpoint directories of run `run` on this host
/// (`heddle-checkpoints-<uid>/<program>-<run>` in the temporary directory): removed once
/// the job has succeeded; kept, and named, when it failed for good, to resume by hand.
fn default_checkpoints(run: &str, succeeded: bool) {
    let uid = heddle_comm::private::effective_uid();
    let root = std::env::temp_dir().join(format!("heddle-checkpoints-{uid}"));
    let Ok(entries) = std::fs::read_dir(&root) else { return };
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().ends_with(&format!("-{run}")) {
            continue;
        }
        if succeeded {
            let _ = std::fs::remove_dir_all(e.path());
        } else {
            eprintln!(
                "heddle: the job's checkpoints are kept in {}: run it again with \
                 --checkpoint-dir {} to resume from them",
                e.path().display(),
                e.path().display()
            );
        }
    }
}
