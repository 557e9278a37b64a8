//! Heddle jobs on a real Slurm: `deploy/slurm/local-cluster.sh up` installs (from Debian
//! packages, if missing) and starts munge, slurmctld and slurmd on this host; then plain
//! `srun` and `sbatch` start jobs by themselves, `heddle run --launcher slurm` starts them
//! through srun, salloc and sbatch, a failing rank is named, and an allocation smaller
//! than `-n` is refused. The cluster is stopped again if this test started it.
//!
//! Needs root (as on this project's machines and CI): the test fails, saying so, without.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;

use common::*;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/slurm/local-cluster.sh")
}

fn cluster(action: &str) -> Output {
    let child = Command::new("bash")
        .arg(script())
        .arg(action)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run local-cluster.sh");
    wait_bounded(child, Duration::from_secs(300))
}

/// Stops the cluster at the end of the test (panics included) if the test started it.
struct Cluster {
    started: bool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started {
            let out = cluster("down");
            if !out.status.success() {
                eprintln!("local-cluster.sh down failed: {}", text(&out.stderr));
            }
        }
    }
}

fn run_in(dir: &Path, mark: &str, program: &str, args: &[&str]) -> Output {
    let child = Command::new(program)
        .args(args)
        .current_dir(dir)
        .env("HDTEST_MARK", mark)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    wait_bounded(child, Duration::from_secs(120))
}

fn verified(stdout: &str, ranks: usize) -> bool {
    stdout.lines().any(|l| {
        l.contains("{\"example\": \"collectives\"")
            && l.contains("\"ok\": true")
            && l.contains(&format!("\"ranks\": {ranks}"))
    })
}

#[test]
fn jobs_on_a_real_slurm() {
    // SAFETY: geteuid has no preconditions.
    assert_eq!(unsafe { libc::geteuid() }, 0, "the Slurm test runs as root (as CI does)");
    let was_up = cluster("status").status.success();
    let up = cluster("up");
    assert!(up.status.success(), "local-cluster.sh up: {}\n{}", text(&up.stdout), text(&up.stderr));
    let _cluster = Cluster { started: !was_up };
    let dir = std::env::temp_dir().join(format!("heddle-slurm-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (heddle, demo) = (heddle().display().to_string(), example("collectives"));

    // srun alone: rank 0 hosts the master, the others find it.
    let mark = marker("srun");
    let out = run_in(&dir, &mark, "srun", &["-n", "3", &demo]);
    assert!(out.status.success(), "srun: {}", text(&out.stderr));
    assert!(verified(&text(&out.stdout), 3), "srun: {}", text(&out.stdout));

    // srun with Slurm's PMIx plugin: the ranks meet through its key-value store.
    let mut srun = Command::new("srun");
    srun.args(["--mpi=pmix", "-n", "3", &demo])
        .current_dir(&dir)
        .env("HDTEST_MARK", &mark)
        .env("HEDDLE_LOG", "heddle_runtime::rendezvous=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_bounded(srun.spawn().expect("srun"), Duration::from_secs(120));
    let err = text(&out.stderr);
    assert!(out.status.success(), "srun --mpi=pmix: {err}");
    assert!(verified(&text(&out.stdout), 3), "srun --mpi=pmix: {}", text(&out.stdout));
    assert_eq!(err.matches("rendezvous through PMIx").count(), 3, "{err}");

    // A batch script whose step starts a job.
    let log = dir.join("batch.out");
    let wrap = format!("--wrap=srun -n 2 {demo}");
    let out = run_in(
        &dir,
        &mark,
        "sbatch",
        &["--wait", "-n", "2", &format!("--output={}", log.display()), &wrap],
    );
    assert!(out.status.success(), "sbatch: {}", text(&out.stderr));
    let batch = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(verified(&batch, 2), "sbatch output: {batch}");

    // heddle run --launcher slurm: through srun, salloc and sbatch.
    for allocate in ["srun", "salloc", "sbatch"] {
        let out = run_in(
            &dir,
            &mark,
            &heddle,
            &["run", "--launcher", "slurm", "--allocate", allocate, "-n", "3", "--", &demo],
        );
        assert!(out.status.success(), "{allocate}: {}", text(&out.stderr));
        let mut stdout = text(&out.stdout);
        if allocate == "sbatch" {
            // Slurm's default output file, in the directory it was submitted from.
            let id = stdout.split_whitespace().last().unwrap_or("").to_string();
            stdout =
                std::fs::read_to_string(dir.join(format!("slurm-{id}.out"))).unwrap_or_default();
        }
        assert!(verified(&stdout, 3), "{allocate}: {stdout}");
    }

    // A failing rank is named and fails the job.
    let out = run_in(
        &dir,
        &mark,
        &heddle,
        &[
            "run",
            "--launcher",
            "slurm",
            "-n",
            "3",
            "--",
            &example("worker_faults"),
            "--fail-rank",
            "1",
            "--panic",
        ],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("heddle: rank 1 failed"), "{err}");

    // -n larger than the allocation heddle run is in.
    let out = run_in(
        &dir,
        &mark,
        "salloc",
        &["-n", "2", &heddle, "run", "--launcher", "slurm", "-n", "4", "--", &demo],
    );
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("-n 4 asks for more workers than the Slurm allocation"), "{err}");
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&dir).unwrap();
}
