//! Jobs started by other launchers and by hand: plain `mpirun -n N prog` (rank 0 hosts the
//! master, the others find it through Open MPI's PMIx server or a rendezvous file), `heddle run --launcher mpirun`,
//! `heddle master` with `heddle worker`, and ten jobs started at once on one host. Each
//! checks the collectives' own verified result, the exit status on failure, and that no
//! process or file is left behind.
//!
//! Needs Open MPI's `mpirun` (`make test-deps` installs it from Debian packages).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::*;

/// `mpirun` as root, on 2 cores with more ranks than cores, its output and runtime
/// directory private to the test.
fn mpirun(mark: &str, runtime: &Path) -> Command {
    assert!(
        Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success()),
        "mpirun (Open MPI) is missing: run `make test-deps`"
    );
    let mut c = Command::new("mpirun");
    c.env("HDTEST_MARK", mark)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// A private runtime directory for one test (the rendezvous files go there).
fn runtime_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-launchers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    d
}

/// Files left in `dir` and below (directories alone do not count).
fn files_in(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_in(&p));
        } else {
            out.push(p);
        }
    }
    out
}

fn output(mut c: Command, limit: Duration) -> Output {
    wait_bounded(c.spawn().expect("spawn"), limit)
}

fn summary(stdout: &str, ranks: usize) {
    let line = stdout.lines().find(|l| l.contains("{\"example\": \"collectives\"")).unwrap_or("");
    assert!(line.contains("\"ok\": true"), "no verified summary: {stdout}");
    assert!(line.contains(&format!("\"ranks\": {ranks}")), "{line}");
}

#[test]
fn plain_mpirun_starts_a_job_by_itself() {
    // n = 2: rank 0's address goes through Open MPI's PMIx server; n = 4: through a
    // rendezvous file in HEDDLE_RENDEZVOUS, removed once every rank joined.
    for (n, file) in [(2usize, false), (4, true)] {
        let mark = marker("mpirun-plain");
        let rt = runtime_dir("plain");
        let mut c = mpirun(&mark, &rt);
        c.env("HEDDLE_LOG", "heddle_runtime::rendezvous=debug");
        if file {
            c.env("HEDDLE_RENDEZVOUS", rt.join("meet"));
        }
        c.args(["-n", &n.to_string(), &example("collectives")]);
        let out = output(c, Duration::from_secs(60));
        let err = text(&out.stderr);
        assert!(out.status.success(), "n={n}: {}\n{err}", text(&out.stdout));
        summary(&text(&out.stdout), n);
        assert!(!err.contains("lost the job master"), "{err}");
        let through_pmix = err.matches("rendezvous through PMIx").count();
        assert_eq!(through_pmix, if file { 0 } else { n }, "{err}");
        assert_eq!(files_in(&rt), Vec::<PathBuf>::new(), "the rendezvous file was left");
        assert_no_survivors(&mark);
        std::fs::remove_dir_all(&rt).unwrap();
    }
}

#[test]
fn plain_mpirun_stops_every_rank_when_one_fails() {
    let mark = marker("mpirun-fail");
    let rt = runtime_dir("fail");
    let mut c = mpirun(&mark, &rt);
    c.args(["-n", "3", &example("worker_faults"), "--fail-rank", "1", "--panic"]);
    let start = Instant::now();
    let out = output(c, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("rank 1 cannot go on"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&rt).unwrap();
}

#[test]
fn heddle_run_through_mpirun() {
    let mark = marker("launcher-mpirun");
    let rt = runtime_dir("via");
    let mut c =
        command(&mark, &["run", "--launcher", "mpirun", "-n", "3", "--", &example("collectives")]);
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("XDG_RUNTIME_DIR", &rt);
    let out = output(c, Duration::from_secs(60));
    assert!(out.status.success(), "{}\n{}", text(&out.stdout), text(&out.stderr));
    summary(&text(&out.stdout), 3);
    assert_no_survivors(&mark);

    // A failing rank: named, and its failure is the exit status.
    let mark = marker("launcher-mpirun-fail");
    let mut c = command(
        &mark,
        &[
            "run",
            "--launcher",
            "mpirun",
            "--launcher-args",
            "--oversubscribe",
            "-n",
            "3",
            "--",
            &example("worker_faults"),
            "--fail-rank",
            "2",
            "--panic",
        ],
    );
    c.env("OMPI_ALLOW_RUN_AS_ROOT", "1").env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = output(c, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("heddle: rank 2 failed"), "{err}");
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&rt).unwrap();
}

#[test]
fn master_and_workers_started_by_hand() {
    let dir = runtime_dir("manual");
    let token = dir.join("job.token");
    let mark = marker("manual");
    let mut master =
        command(&mark, &["master", "--world-size", "3", "--token-file", token.to_str().unwrap()])
            .spawn()
            .unwrap();
    let addr = first_line(&mut master);
    assert!(addr.parse::<std::net::SocketAddr>().is_ok(), "join address line: {addr:?}");
    let mode = std::fs::metadata(&token).unwrap().permissions();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777, 0o600);

    // A copy others can read is refused before anything connects.
    let loose = dir.join("loose.token");
    std::fs::copy(&token, &loose).unwrap();
    std::fs::set_permissions(&loose, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let (out, _) = run(
        &mark,
        &["worker", "--master", &addr, "--token-file", loose.to_str().unwrap(), "--", "true"],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("is not private"), "{}", text(&out.stderr));
    // A wrong token is refused by the master.
    let wrong = dir.join("wrong.token");
    heddle_runtime::token_file::write(&wrong, "not-the-token").unwrap();
    let (out, _) = run(
        &mark,
        &["worker", "--master", &addr, "--token-file", wrong.to_str().unwrap(), "--", "true"],
    );
    assert!(text(&out.stderr).contains("bad job token"), "{}", text(&out.stderr));

    let worker = |n: &str| {
        command(
            &mark,
            &[
                "worker",
                "--master",
                &addr,
                "--token-file",
                token.to_str().unwrap(),
                "-n",
                n,
                "--",
                &example("collectives"),
            ],
        )
        .spawn()
        .unwrap()
    };
    let (a, b) = (worker("2"), worker("1"));
    let (a, b) =
        (wait_bounded(a, Duration::from_secs(60)), wait_bounded(b, Duration::from_secs(60)));
    assert!(a.status.success() && b.status.success(), "{}\n{}", text(&a.stderr), text(&b.stderr));
    summary(&(text(&a.stdout) + &text(&b.stdout)), 3);
    let m = wait_bounded(master, Duration::from_secs(30));
    assert!(m.status.success(), "{}", text(&m.stderr));
    assert!(!token.exists(), "the master left its token file");
    assert_no_survivors(&mark);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ten_jobs_at_once_on_one_host() {
    let mark = marker("ten");
    let children: Vec<_> = (0..10)
        .map(|_| {
            command(&mark, &["run", "-n", "2", "--", &example("collectives")]).spawn().unwrap()
        })
        .collect();
    for (i, c) in children.into_iter().enumerate() {
        let out = wait_bounded(c, Duration::from_secs(120));
        assert!(out.status.success(), "job {i}: {}", text(&out.stderr));
        summary(&text(&out.stdout), 2);
    }
    assert_no_survivors(&mark);
}

#[test]
fn launcher_variables_that_disagree_are_named() {
    let out = Command::new(example("collectives"))
        .env("OMPI_COMM_WORLD_RANK", "5")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("rank 5 (OMPI_COMM_WORLD_RANK) is not below the world size 2"), "{err}");
}
