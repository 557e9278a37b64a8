//! Workers on this machine: `heddle run` (the local launcher) starts every rank here, and
//! `heddle worker` the ranks it claimed from a master elsewhere. Each worker runs in the
//! guardian's process group with its output prefixed by its rank; when one fails the
//! others are stopped.

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use crate::guardian::Guardian;
use crate::job_files::JobFiles;
use crate::launcher::{JobOutcome, LaunchSpec};
use crate::master::JobMaster;
use crate::secure::Security;
use crate::{Error, Result};

/// What every worker of an attempt is told: where the master is, the token, the world
/// size, and the launch's settings.
pub(crate) fn worker_env(
    spec: &LaunchSpec,
    master: &str,
    token: &str,
    attempt: u32,
    run: &str,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("HEDDLE_MASTER".into(), master.into()),
        ("HEDDLE_JOB_TOKEN".into(), token.into()),
        ("HEDDLE_INIT_TIMEOUT_S".into(), spec.init_timeout.as_secs_f64().to_string()),
    ];
    env.extend(spec.env.iter().cloned());
    env.extend([
        ("HEDDLE_HEARTBEAT_S".into(), spec.heartbeat.as_secs_f64().to_string()),
        ("HEDDLE_HEARTBEAT_TIMEOUT_S".into(), spec.heartbeat_timeout.as_secs_f64().to_string()),
        ("HEDDLE_ATTEMPT".into(), attempt.to_string()),
        ("HEDDLE_RUN_ID".into(), run.into()),
        (Security::VAR.into(), spec.security.as_str().into()),
    ]);
    env
}

/// One attempt of the job on this machine: a master, the workers, and what is left once
/// they end.
pub(crate) fn run_attempt(
    spec: &LaunchSpec,
    program: &str,
    attempt: u32,
    run: &str,
    signal: &Arc<AtomicUsize>,
) -> Result<JobOutcome> {
    let Attempt { token, files, mut guardian, master } = Attempt::start(spec)?;
    let mut env = worker_env(spec, &master.addr().to_string(), &token, attempt, run);
    env.push((heddle_comm::scratch::JOB_DIR_VAR.into(), files.dir().display().to_string()));
    if spec.mpi4py {
        env.extend(crate::mpi4py_shim::install(files.dir(), python_path(spec, &env).as_deref())?);
    }
    let ranks: Vec<usize> = (0..spec.workers).collect();
    let (mut workers, out_rx) = spawn(spec, program, &ranks, &env, &guardian)?;
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
    let outcome = supervise(&mut workers, &guardian, signal, spec.kill_grace, &origin, &silent);
    let outcome = finish(outcome, &mut guardian, &out_rx, master.failure());
    master.shutdown();
    drop(files);
    Ok(outcome)
}

/// The `PYTHONPATH` the workers would get: the job's own setting, else the launcher's.
pub(crate) fn python_path(spec: &LaunchSpec, env: &[(String, String)]) -> Option<String> {
    let own = env.iter().chain(&spec.env).rev().find(|(k, _)| k == "PYTHONPATH");
    own.map(|(_, v)| v.clone()).or_else(|| std::env::var("PYTHONPATH").ok())
}

/// What every attempt of a job starts with.
pub(crate) struct Attempt {
    /// A fresh job token.
    pub(crate) token: String,
    /// The job's files on this host (segments of this token, scratch registrations):
    /// dropped last, once the workers are gone.
    pub(crate) files: JobFiles,
    /// Kills the workers' process group if the launcher dies.
    pub(crate) guardian: Guardian,
    /// The job master, in this process.
    pub(crate) master: JobMaster,
}

impl Attempt {
    /// A token, the job's files, the guardian and the master of `spec`.
    ///
    /// # Errors
    /// [`Error::Io`] if any of them cannot be made.
    pub(crate) fn start(spec: &LaunchSpec) -> Result<Attempt> {
        let token = hex::encode(rand::random::<[u8; 32]>());
        let files = JobFiles::create(&token)?;
        let guardian = Guardian::start()
            .map_err(|e| Error::io("starting the launcher's guardian process", e))?;
        let master = JobMaster::start(spec.master_config(&token))?;
        Ok(Attempt { token, files, guardian, master })
    }
}

/// A job the master saw aborted: prints the cause once (however many workers repeat it),
/// and turns an outcome that every worker survived into the failure of the rank that
/// aborted it.
pub(crate) fn aborted(outcome: JobOutcome, failure: Option<heddle_comm::AbortCause>) -> JobOutcome {
    let Some(cause) = failure else { return outcome };
    eprintln!("heddle: the job was aborted: {cause}");
    if outcome == JobOutcome::Success {
        let status = "aborted the job".into();
        return JobOutcome::WorkerFailed { rank: cause.origin, status, code: 1 };
    }
    outcome
}

/// After the workers ended: kills what they left running, drains their output, and turns
/// a job that every worker survived but one aborted into a failure.
pub(crate) fn finish(
    outcome: JobOutcome,
    guardian: &mut Guardian,
    out_rx: &mpsc::Receiver<()>,
    failure: Option<heddle_comm::AbortCause>,
) -> JobOutcome {
    // Processes the workers started and left running die with the job.
    guardian.finish();
    // Output readers end when the last holder of each pipe exits.
    let drain_until = Instant::now() + Duration::from_secs(2);
    while out_rx.recv_timeout(drain_until.saturating_duration_since(Instant::now())).is_ok() {}
    aborted(outcome, failure)
}

/// Starts `program` as the workers of `ranks`, each with `env` and its rank, in the
/// guardian's process group; their output comes back prefixed with their rank, and the
/// receiver hears once per closed pipe.
///
/// # Errors
/// [`Error::Spawn`] if one cannot be started (those already started are stopped).
pub(crate) fn spawn(
    spec: &LaunchSpec,
    program: &str,
    ranks: &[usize],
    env: &[(String, String)],
    guardian: &Guardian,
) -> Result<(Vec<Worker>, mpsc::Receiver<()>)> {
    let mut workers: Vec<Worker> = Vec::with_capacity(ranks.len());
    let (out_tx, out_rx) = mpsc::channel::<()>();
    let threads = math_threads(ranks.len(), env);
    for &rank in ranks {
        let mut cmd = Command::new(program);
        cmd.args(&spec.command[1..])
            .env("HEDDLE_RANK", rank.to_string())
            .env("HEDDLE_WORLD_SIZE", spec.workers.to_string())
            .envs(threads.iter().map(|(k, v)| (k, v)))
            .envs(env.iter().map(|(k, v)| (k, v)))
            // As mpirun: the launcher's standard input goes to rank 0 (stdin_forward.rs).
            .stdin(if rank == 0 { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        guardian.adopt(&mut cmd);
        match cmd.spawn() {
            Ok(mut child) => {
                if let Some(pipe) = child.stdin.take() {
                    crate::stdin_forward::forward_to(pipe);
                }
                forward(child.stdout.take(), rank, false, out_tx.clone());
                forward(child.stderr.take(), rank, true, out_tx.clone());
                workers.push(Worker { rank, child, status: None });
            }
            Err(source) => {
                stop_all(&mut workers, guardian, spec.kill_grace);
                return Err(Error::Spawn { program: program.to_string(), source });
            }
        }
    }
    Ok((workers, out_rx))
}

/// The variables that size the thread pools of math libraries (OpenMP, OpenBLAS, MKL,
/// Accelerate, numexpr): numpy and friends start one thread per core in every process.
const MATH_THREADS: [&str; 5] = [
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
];

/// Each of [`MATH_THREADS`] that neither this process's environment nor `env` sets, at
/// the cores each of `local` workers has — `HEDDLE_CPUS_PER_WORKER` rounded down, else
/// this machine's cores over the workers, at least 1 — as Ray and Dask set them: without,
/// two workers on two cores each start two BLAS threads and K-means in numpy ran 3.5×
/// slower than with one each.
fn math_threads(local: usize, env: &[(String, String)]) -> Vec<(String, String)> {
    let set = |k: &str| std::env::var_os(k).is_some() || env.iter().any(|(n, _)| n == k);
    let per_worker = env
        .iter()
        .find(|(k, _)| k == "HEDDLE_CPUS_PER_WORKER")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var("HEDDLE_CPUS_PER_WORKER").ok())
        .and_then(|v| match v.trim().strip_suffix('m') {
            Some(milli) => milli.parse::<f64>().ok().map(|m| m / 1000.0),
            None => v.trim().parse::<f64>().ok(),
        })
        .map(|c| c.floor() as usize);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = per_worker.unwrap_or(cores / local.max(1)).max(1).to_string();
    MATH_THREADS.iter().filter(|k| !set(k)).map(|k| ((*k).to_string(), n.clone())).collect()
}

pub(crate) struct Worker {
    rank: usize,
    child: Child,
    status: Option<ExitStatus>,
}

/// Waits for the job to end; `origin(rank)`, asked once `rank` has failed, says which rank
/// aborted the job, if one did.
pub(crate) fn supervise(
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
                // The others were just told why the job ends: let them take that in
                // before its death could reach them as a lost peer.
                std::thread::sleep(Duration::from_millis(100));
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
pub(crate) fn describe(st: ExitStatus) -> (String, i32) {
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
pub(crate) fn stop_all(workers: &mut [Worker], guardian: &Guardian, grace: Duration) {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
    }

    #[test]
    fn math_libraries_get_the_cores_of_a_worker_unless_told() {
        // Variables this test process already has are left alone whatever the test says.
        let unset: Vec<&str> =
            MATH_THREADS.iter().copied().filter(|k| std::env::var_os(k).is_none()).collect();
        let got = |local, env: &[(&str, &str)]| -> Vec<(String, String)> {
            math_threads(local, &pairs(env))
        };
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (k, v) in got(2, &[]) {
            assert!(unset.contains(&k.as_str()));
            assert_eq!(v, (cores / 2).max(1).to_string());
        }
        assert_eq!(got(10_000, &[]).iter().filter(|(_, v)| v != "1").count(), 0);
        for (per, want) in [("3", "3"), ("1.5", "1"), ("500m", "1"), ("2500m", "2")] {
            let all = got(1, &[("HEDDLE_CPUS_PER_WORKER", per)]);
            assert_eq!(all.len(), unset.len());
            assert!(all.iter().all(|(_, v)| v == want), "{per}: {all:?}");
        }
        let mine = got(1, &[("OMP_NUM_THREADS", "8")]);
        assert!(mine.iter().all(|(k, _)| k != "OMP_NUM_THREADS"), "{mine:?}");
    }
}
