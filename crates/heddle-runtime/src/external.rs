//! Workers started by another launcher: `heddle run --launcher mpirun` runs `mpirun -n N`,
//! `--launcher slurm` runs `srun -n N` (or `salloc`, `sbatch --wait` around it). The job
//! master runs in this process as with the local launcher; the workers take their rank and
//! size from the launcher's variables and the master's address and token from the
//! environment the launcher passes on (`mpirun -x`, Slurm's `--export=ALL` default).
//!
//! The launcher keeps the local one's guarantees: a failed worker aborts the job (the
//! master tells every other worker, and `mpirun`/`srun --kill-on-bad-exit` stop the rest);
//! Ctrl-C or SIGTERM stops the launcher, which stops its workers; the exit status is the
//! failing worker's, named with its rank.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::guardian::Guardian;
use crate::launcher::{Allocation, JobOutcome, LaunchSpec, Launcher};
use crate::master::JobMaster;
use crate::{Error, Result};

/// Refuses `-n` larger than the Slurm allocation this runs in (`SLURM_NTASKS`), before
/// anything starts.
///
/// # Errors
/// [`Error::Env`] naming the allocation, its tasks and `-n`.
pub(crate) fn check_allocation(
    workers: usize,
    allocation: Allocation,
    get: impl Fn(&str) -> Option<String>,
) -> Result<()> {
    if allocation != Allocation::Srun {
        return Ok(());
    }
    let Some(job) = get("SLURM_JOB_ID").filter(|v| !v.is_empty()) else { return Ok(()) };
    let tasks = ["SLURM_NTASKS", "SLURM_NPROCS"]
        .iter()
        .find_map(|k| get(k).and_then(|v| v.trim().parse::<usize>().ok()));
    match tasks {
        Some(t) if workers > t => Err(Error::Env(format!(
            "-n {workers} asks for more workers than the Slurm allocation {job} has tasks \
             ({t}, SLURM_NTASKS): ask salloc/sbatch for -n {workers}, or run with -n {t}"
        ))),
        _ => Ok(()),
    }
}

/// Where the master listens when `--master-bind` is not given: loopback when every worker
/// runs on this host as far as the launcher's arguments and allocation tell, else an
/// ephemeral port on this host's first network address.
pub fn default_master_bind(spec: &LaunchSpec) -> SocketAddr {
    let has = |flags: &[&str]| {
        spec.launcher_args
            .iter()
            .any(|a| flags.iter().any(|f| a == f || a.starts_with(&format!("{f}="))))
    };
    let nodes = std::env::var("SLURM_JOB_NUM_NODES").ok().and_then(|v| v.parse::<usize>().ok());
    let spread = match spec.launcher {
        Launcher::Local => false,
        Launcher::Mpirun => {
            has(&["--host", "-H", "--hostfile", "-hostfile", "--machinefile", "-machinefile"])
                || nodes.is_some_and(|n| n > 1)
        }
        Launcher::Slurm => {
            has(&["-N", "--nodes", "-w", "--nodelist"]) || nodes.is_some_and(|n| n > 1)
        }
    };
    let ip = if spread { crate::rendezvous::first_address() } else { None };
    SocketAddr::new(ip.unwrap_or(Ipv4Addr::LOCALHOST.into()), 0)
}

/// The command that starts the workers, with `vars` passed on to them.
fn command(spec: &LaunchSpec, vars: &[(String, String)]) -> Command {
    let n = spec.workers.to_string();
    let program = &spec.command;
    let srun = |cmd: &mut Command| {
        cmd.args(["srun", "-n", &n, "--kill-on-bad-exit=1"]).args(program);
    };
    match (spec.launcher, spec.allocation) {
        (Launcher::Mpirun, _) | (Launcher::Local, _) => {
            let mut cmd = Command::new("mpirun");
            cmd.args(["-n", &n]);
            for (k, _) in vars {
                cmd.args(["-x", k]);
            }
            cmd.args(&spec.launcher_args).args(program);
            cmd
        }
        (Launcher::Slurm, Allocation::Srun) => {
            let mut cmd = Command::new("srun");
            cmd.args(["-n", &n, "--kill-on-bad-exit=1"]).args(&spec.launcher_args).args(program);
            cmd
        }
        (Launcher::Slurm, Allocation::Salloc) => {
            let mut cmd = Command::new("salloc");
            cmd.args(["-n", &n]).args(&spec.launcher_args);
            srun(&mut cmd);
            cmd
        }
        (Launcher::Slurm, Allocation::Sbatch) => {
            let mut cmd = Command::new("sbatch");
            let step: Vec<String> = ["srun", "-n", &n, "--kill-on-bad-exit=1"]
                .iter()
                .map(|s| s.to_string())
                .chain(program.iter().cloned())
                .map(|a| shell_quote(&a))
                .collect();
            cmd.args(["--wait", "-n", &n])
                .args(&spec.launcher_args)
                .arg(format!("--wrap={}", step.join(" ")));
            cmd
        }
    }
}

/// `arg` as one word for `sh`.
fn shell_quote(arg: &str) -> String {
    if !arg.is_empty() && arg.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

/// One attempt of the job: the master here, the workers through the launcher.
pub(crate) fn run_attempt(
    spec: &LaunchSpec,
    attempt: u32,
    run: &str,
    signal: &Arc<AtomicUsize>,
) -> Result<JobOutcome> {
    let crate::local::Attempt { token, files, mut guardian, master } =
        crate::local::Attempt::start(spec)?;
    let mut vars = crate::local::worker_env(spec, &master.addr().to_string(), &token, attempt, run);
    // The user's own settings reach workers on other hosts too.
    for (k, v) in std::env::vars() {
        if k.starts_with("HEDDLE_") && !vars.iter().any(|(n, _)| *n == k) {
            vars.push((k, v));
        }
    }
    if spec.mpi4py {
        let path = crate::local::python_path(spec, &vars);
        vars.extend(crate::mpi4py_shim::install(files.dir(), path.as_deref())?);
    }
    let mut cmd = command(spec, &vars);
    cmd.envs(vars.iter().map(|(k, v)| (k, v))).stdin(Stdio::null());
    guardian.adopt(&mut cmd);
    let name = format!("{:?}", cmd.get_program());
    let launcher = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .spawn()
        .map_err(|source| Error::Spawn { program: name.trim_matches('"').into(), source })?;
    let outcome = loop {
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
            eprintln!("heddle: interrupted by signal {sig}; stopping {launcher} and its workers");
            stop(&mut child, &guardian, spec.kill_grace);
            break JobOutcome::Interrupted { signal: sig as i32 };
        }
        if let Ok(Some(st)) = child.try_wait() {
            break ended(&launcher, st, &master);
        }
        if let Some(rank) = master.silent() {
            // The others were told and fail; the launcher then stops the silent one.
            eprintln!("heddle: rank {rank} sent no heartbeat in time; stopping the job");
            let until = Instant::now() + spec.kill_grace;
            while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(5));
            }
            stop(&mut child, &guardian, spec.kill_grace);
            let status = "sent no heartbeat in time".to_string();
            break JobOutcome::WorkerFailed { rank, status, code: 1 };
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    guardian.finish();
    let outcome = crate::local::aborted(outcome, master.failure());
    master.shutdown();
    drop(files);
    Ok(outcome)
}

/// The outcome of a launcher that exited with `st`: a worker's failure when the master
/// heard of one, else the launcher's.
fn ended(launcher: &str, st: ExitStatus, master: &JobMaster) -> JobOutcome {
    if st.success() {
        return JobOutcome::Success;
    }
    let (status, code) = crate::local::describe(st);
    match master.failure() {
        Some(cause) => {
            eprintln!("heddle: rank {} failed; {launcher} {status}", cause.origin);
            JobOutcome::WorkerFailed { rank: cause.origin, status: cause.kind.clone(), code }
        }
        None => {
            eprintln!("heddle: {launcher} {status}");
            JobOutcome::LauncherFailed { launcher: launcher.to_string(), status, code }
        }
    }
}

/// SIGTERM to the launcher (which stops its workers), then SIGKILL to the group after
/// `grace`.
fn stop(child: &mut std::process::Child, guardian: &Guardian, grace: Duration) {
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let until = Instant::now() + grace;
    while Instant::now() < until && matches!(child.try_wait(), Ok(None)) {
        std::thread::sleep(Duration::from_millis(5));
    }
    guardian.signal(libc::SIGKILL);
    let _ = child.wait();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allocation_smaller_than_n_is_refused() {
        let alloc = |k: &str| match k {
            "SLURM_JOB_ID" => Some("42".to_string()),
            "SLURM_NTASKS" => Some("2".to_string()),
            _ => None,
        };
        let e = check_allocation(4, Allocation::Srun, alloc).unwrap_err().to_string();
        assert!(e.contains("-n 4") && e.contains("allocation 42 has tasks (2"), "{e}");
        assert!(check_allocation(2, Allocation::Srun, alloc).is_ok());
        // salloc and sbatch make an allocation of their own.
        assert!(check_allocation(4, Allocation::Sbatch, alloc).is_ok());
        // Outside an allocation srun asks for one.
        assert!(check_allocation(4, Allocation::Srun, |_| None).is_ok());
    }

    #[test]
    fn commands_pass_the_settings_on() {
        let mut spec = LaunchSpec::new(3, vec!["prog".into(), "a b".into()]);
        spec.launcher = Launcher::Mpirun;
        spec.launcher_args = vec!["--oversubscribe".into()];
        let vars = vec![("HEDDLE_MASTER".to_string(), "x".to_string())];
        let args = |c: &Command| {
            std::iter::once(c.get_program())
                .chain(c.get_args())
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(
            args(&command(&spec, &vars)),
            "mpirun -n 3 -x HEDDLE_MASTER --oversubscribe prog a b"
        );
        spec.launcher = Launcher::Slurm;
        assert_eq!(
            args(&command(&spec, &vars)),
            "srun -n 3 --kill-on-bad-exit=1 --oversubscribe prog a b"
        );
        spec.allocation = Allocation::Sbatch;
        spec.launcher_args.clear();
        assert_eq!(
            args(&command(&spec, &vars)),
            "sbatch --wait -n 3 --wrap=srun -n 3 --kill-on-bad-exit=1 prog 'a b'"
        );
    }
}
