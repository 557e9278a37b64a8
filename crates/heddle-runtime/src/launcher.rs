//! The local launcher behind `heddle run -n N -- PROGRAM ARGS...`: starts the job master
//! in this process and N workers on this machine, prefixes their output with their rank,
//! and stops them all when one fails, on Ctrl-C or SIGTERM, or when this process dies.
//!
//! Workers and every process they start share one process group, led by a [`Guardian`]
//! that kills the group if the launcher dies; on every exit the launcher kills what is left
//! of the group and removes the job's files ([`JobFiles`]).

use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::guardian::Guardian;
use crate::job_files::JobFiles;
use crate::master::{JobMaster, MasterConfig};
use crate::{Error, Result};

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
        }
    }

    /// Takes the heartbeat interval and timeout from `HEDDLE_HEARTBEAT_S` and
    /// `HEDDLE_HEARTBEAT_TIMEOUT_S` of `get`, where set.
    ///
    /// # Errors
    /// [`Error::Env`] naming a variable whose value is out of range.
    pub fn heartbeats_from(&mut self, get: impl Fn(&str) -> Option<String>) -> Result<()> {
        use heddle_comm::settings::{seconds, HEARTBEAT_S, HEARTBEAT_TIMEOUT_S};
        for (bounds, field) in
            [(HEARTBEAT_S, &mut self.heartbeat), (HEARTBEAT_TIMEOUT_S, &mut self.heartbeat_timeout)]
        {
            if let Some(v) = get(bounds.name).filter(|v| !v.is_empty()) {
                *field = seconds(&bounds, &v).map_err(|e| Error::Env(e.to_string()))?;
            }
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
            JobOutcome::WorkerFailed { code, .. } => *code,
            JobOutcome::Interrupted { signal } => 128 + signal,
        }
    }
}

/// Runs a job to completion. A job whose worker failed is started again, all its workers
/// with the same ranks, up to `spec.restarts` times; each attempt has its own master, job
/// token and files, and its workers see `HEDDLE_ATTEMPT` (0, 1, ...).
///
/// # Errors
/// [`Error::Spawn`] if a worker cannot be started (the others are stopped first);
/// [`Error::Io`] if the master cannot start.
pub fn run_local(spec: &LaunchSpec) -> Result<JobOutcome> {
    if spec.workers == 0 {
        return Err(Error::Env("-n must be at least 1".into()));
    }
    crate::env::check_heartbeat(spec.heartbeat, spec.heartbeat_timeout)?;
    let program = spec
        .command
        .first()
        .ok_or_else(|| Error::Env("no program given: heddle run -n N -- PROGRAM ARGS...".into()))?;
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
    // One id for every attempt: streams keep their default checkpoints under it.
    let run = hex::encode(rand::random::<[u8; 8]>());
    let mut attempt = 0;
    loop {
        let outcome = run_attempt(spec, program, attempt, &run, &signal)?;
        if !matches!(outcome, JobOutcome::WorkerFailed { .. }) || attempt >= spec.restarts {
            default_checkpoints(&run, matches!(outcome, JobOutcome::Success));
            return Ok(outcome);
        }
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
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

/// One attempt of the job: a master, the workers, and what is left once they end.
fn run_attempt(
    spec: &LaunchSpec,
    program: &str,
    attempt: u32,
    run: &str,
    signal: &Arc<AtomicUsize>,
) -> Result<JobOutcome> {
    let token = hex::encode(rand::random::<[u8; 32]>());
    // Dropped last: the workers are gone before their files are removed.
    let files = JobFiles::create(&token)?;
    let mut guardian =
        Guardian::start().map_err(|e| Error::io("starting the launcher's guardian process", e))?;
    let master = JobMaster::start(MasterConfig {
        world_size: spec.workers,
        token: token.clone(),
        init_timeout: spec.init_timeout,
        bind: spec.master_bind,
        heartbeat: spec.heartbeat,
        heartbeat_timeout: spec.heartbeat_timeout,
    })?;
    let mut workers: Vec<Worker> = Vec::with_capacity(spec.workers);
    let (out_tx, out_rx) = mpsc::channel::<()>();
    for rank in 0..spec.workers {
        let mut cmd = Command::new(program);
        cmd.args(&spec.command[1..])
            .env("HEDDLE_RANK", rank.to_string())
            .env("HEDDLE_WORLD_SIZE", spec.workers.to_string())
            .env("HEDDLE_MASTER", master.addr().to_string())
            .env("HEDDLE_JOB_TOKEN", &token)
            .env("HEDDLE_INIT_TIMEOUT_S", spec.init_timeout.as_secs_f64().to_string())
            .env(heddle_comm::scratch::JOB_DIR_VAR, files.dir())
            .envs(spec.env.iter().map(|(k, v)| (k, v)))
            .env("HEDDLE_HEARTBEAT_S", spec.heartbeat.as_secs_f64().to_string())
            .env("HEDDLE_HEARTBEAT_TIMEOUT_S", spec.heartbeat_timeout.as_secs_f64().to_string())
            .env("HEDDLE_ATTEMPT", attempt.to_string())
            .env("HEDDLE_RUN_ID", run)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let parent = std::process::id() as libc::pid_t;
        let group = guardian.group();
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, group) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != parent {
                    libc::_exit(137);
                }
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(mut child) => {
                forward(child.stdout.take(), rank, false, out_tx.clone());
                forward(child.stderr.take(), rank, true, out_tx.clone());
                workers.push(Worker { rank, child, status: None });
            }
            Err(source) => {
                stop_all(&mut workers, &guardian, spec.kill_grace);
                return Err(Error::Spawn { program: program.to_string(), source });
            }
        }
    }
    drop(out_tx);
    // Which rank aborted the job, once one did; asked when `failed` has exited, so first
    // let the master read all that rank sent before it went.
    let origin = |failed: usize| {
        let until = Instant::now() + Duration::from_millis(500);
        while !master.settled(failed) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
        master.failure().map(|cause| cause.origin)
    };
    // A worker the master declared failed for its silence (stopped or hung): it will not
    // end by itself.
    let silent = || master.silent();
    let mut outcome = supervise(&mut workers, &guardian, signal, spec.kill_grace, &origin, &silent);
    // Processes the workers started and left running die with the job.
    guardian.finish();
    // Output readers end when the last holder of each pipe exits.
    let drain_until = Instant::now() + Duration::from_secs(2);
    while out_rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())).is_ok() {}
    if let Some(cause) = master.failure() {
        // Once, however many workers repeat it.
        eprintln!("heddle: the job was aborted: {cause}");
        if outcome == JobOutcome::Success {
            // Every worker caught the abort and exited 0: the job still failed.
            outcome = JobOutcome::WorkerFailed {
                rank: cause.origin,
                status: "aborted the job".into(),
                code: 1,
            };
        }
    }
    master.shutdown();
    drop(files);
    Ok(outcome)
}

struct Worker {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
}

/// Waits for the job to end; `origin(rank)`, asked once `rank` has failed, says which rank
/// aborted the job, if one did.
fn supervise(
    workers: &mut [Worker],
    guardian: &Guardian,
    signal: &AtomicUsize,
    grace: Duration,
    origin: &dyn Fn(usize) -> Option<usize>,
    silent: &dyn Fn() -> Option<usize>,
) -> JobOutcome {
    loop {
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
            eprintln!("heddle: interrupted by signal {sig}; stopping {} workers", workers.len());
            stop_all(workers, guardian, grace);
            return JobOutcome::Interrupted { signal: sig as i32 };
        }
        let mut failed = None;
        for w in workers.iter_mut().filter(|w| w.status.is_none()) {
            if let Ok(Some(st)) = w.child.try_wait() {
                w.status = Some(st);
                if !st.success() && failed.is_none() {
                    failed = Some((w.rank, st));
                }
            }
        }
        // Checked after the exits: a peer that exited because the silent worker was
        // declared failed is not the failure to report.
        if let Some(w) = silent().and_then(|r| workers.iter_mut().find(|w| w.rank == r)) {
            if w.status.is_none() {
                // SAFETY: kill(2) on our own child (SIGKILL ends a stopped process too).
                unsafe { libc::kill(w.child.id() as libc::pid_t, libc::SIGKILL) };
                w.status = w.child.wait().ok();
            }
            let rank = w.rank;
            let others = workers.iter().filter(|w| w.status.is_none()).count();
            eprintln!(
                "heddle: rank {rank} sent no heartbeat in time and was killed; stopping the \
                 other {others} workers"
            );
            let until = Instant::now() + grace;
            while Instant::now() < until && reap(workers) {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop_all(workers, guardian, grace);
            let status = "sent no heartbeat in time (killed)".to_string();
            return JobOutcome::WorkerFailed { rank, status, code: 1 };
        }
        if let Some((rank, st)) = failed {
            let origin = origin(rank);
            let (rank, st) = wait_for_origin(workers, origin, grace).unwrap_or((rank, st));
            let others = workers.iter().filter(|w| w.status.is_none()).count();
            let (status, code) = describe(st);
            eprintln!("heddle: rank {rank} {status}; stopping the other {others} workers");
            if origin.is_some() {
                // The job was aborted: the others' calls fail now, so they end by
                // themselves (saying why) unless they are busy outside Heddle.
                let until = Instant::now() + grace;
                while Instant::now() < until && reap(workers) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            stop_all(workers, guardian, grace);
            return JobOutcome::WorkerFailed { rank, status, code };
        }
        if workers.iter().all(|w| w.status.is_some()) {
            return JobOutcome::Success;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A worker that failed because another one aborted the job is not the failure to
/// report: gives the origin up to `grace` to print its error and exit, and returns its
/// failure.
fn wait_for_origin(
    workers: &mut [Worker],
    origin: Option<usize>,
    grace: Duration,
) -> Option<(usize, ExitStatus)> {
    let w = workers.get_mut(origin?)?;
    let until = Instant::now() + grace;
    while w.status.is_none() && Instant::now() < until {
        if let Ok(Some(st)) = w.child.try_wait() {
            w.status = Some(st);
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    w.status.filter(|st| !st.success()).map(|st| (w.rank, st))
}

/// Words and exit code for a worker's status.
fn describe(st: ExitStatus) -> (String, i32) {
    if let Some(code) = st.code() {
        (format!("exited with status {code}"), code)
    } else {
        let sig = st.signal().unwrap_or(0);
        (format!("was killed by signal {sig} ({})", signal_name(sig)), 128 + sig)
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// SIGTERM to the workers' process group, then SIGKILL after `grace`; the guardian
/// survives both.
fn stop_all(workers: &mut [Worker], guardian: &Guardian, grace: Duration) {
    guardian.signal(libc::SIGTERM);
    let until = Instant::now() + grace;
    while Instant::now() < until && reap(workers) {
        std::thread::sleep(Duration::from_millis(5));
    }
    for w in workers.iter_mut().filter(|w| w.status.is_none()) {
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(w.child.id() as libc::pid_t, libc::SIGKILL) };
        w.status = w.child.wait().ok();
    }
}

/// Collects exited workers; returns whether any is still running.
fn reap(workers: &mut [Worker]) -> bool {
    let mut alive = false;
    for w in workers.iter_mut().filter(|w| w.status.is_none()) {
        match w.child.try_wait() {
            Ok(Some(st)) => w.status = Some(st),
            _ => alive = true,
        }
    }
    alive
}

/// Copies a worker's output line by line with a `[rank] ` prefix, long lines split
/// ([`crate::output`]).
fn forward(
    pipe: Option<impl Read + Send + 'static>,
    rank: usize,
    is_err: bool,
    done: mpsc::Sender<()>,
) {
    let Some(pipe) = pipe else { return };
    std::thread::spawn(move || {
        crate::output::forward(pipe, rank, is_err);
        let _ = done.send(());
    });
}
