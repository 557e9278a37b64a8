//! The MPI transport (`HEDDLE_TRANSPORT=mpi`, the examples built with the `heddle` crate's
//! default `mpi` feature): plain `mpirun` starts the examples, every link is an MPI
//! channel, and each example checks its own result; a rank that fails takes the MPI job
//! down with its message, leaving no process behind.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

mod common;

use common::*;

fn mpirun(mark: &str, n: usize, program: &[&str]) -> Output {
    assert!(
        Command::new("mpirun").arg("--version").output().is_ok_and(|o| o.status.success()),
        "mpirun (Open MPI) is missing: run `make test-deps`"
    );
    let child = Command::new("mpirun")
        .args(["-n", &n.to_string(), "--bind-to", "none"])
        .args(program)
        .env("HDTEST_MARK", mark)
        .env("HEDDLE_TRANSPORT", "mpi")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    wait_bounded(child, Duration::from_secs(120))
}

#[test]
fn collectives_and_dataflow_run_over_mpi() {
    let mark = marker("mpi-transport");
    let collectives = example("collectives");
    let out = mpirun(&mark, 3, &[&collectives, "--elements", "100000"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let json =
        stdout.lines().find(|l| l.contains("\"example\": \"collectives\"")).expect("summary");
    // Every link is MPI: none of them is a TCP link of Heddle's.
    assert!(json.contains("\"ok\": true") && json.contains("\"tcp_peers\": 0"), "{json}");
    assert!(json.contains("\"ranks\": 3"), "{json}");
    for program in [
        vec![example("wordcount_dataflow"), "--words".into(), "100000".into()],
        vec![example("wordcount"), "--generate".into(), "--megabytes".into(), "4".into()],
    ] {
        let args: Vec<&str> = program.iter().map(String::as_str).collect();
        let out = mpirun(&mark, 3, &args);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{args:?}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("\"ok\": true"), "{args:?}: {stdout}");
    }
    assert_no_survivors(&mark);
}

#[test]
fn a_failing_rank_aborts_the_mpi_job_with_its_message() {
    let mark = marker("mpi-abort");
    let faults = example("worker_faults");
    let out = mpirun(&mark, 3, &[&faults, "--fail-rank", "1", "--panic"]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "the job must fail: {stderr}");
    assert!(stderr.contains("rank 1 cannot go on"), "{stderr}");
    assert!(stderr.contains("aborting the MPI job"), "{stderr}");
    assert_no_survivors(&mark);
}

#[test]
fn heddle_run_points_mpi_transport_jobs_to_mpirun() {
    let mark = marker("mpi-run");
    let child = command(&mark, &["run", "-n", "2", "--", "true"])
        .env("HEDDLE_TRANSPORT", "mpi")
        .spawn()
        .expect("run heddle");
    let out = wait_bounded(child, Duration::from_secs(30));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("HEDDLE_TRANSPORT=mpi mpirun -n N PROGRAM"), "{stderr}");
}
