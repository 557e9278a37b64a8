//! `heddle run --restarts N`: a failed job is started again, every worker with the same
//! rank, and each attempt knows its number (`HEDDLE_ATTEMPT`, `Communicator::attempt`).
//! Without `--restarts`, or once the restarts are used up, the job fails as before.

mod common;

use common::{assert_no_survivors, example, marker, run, text};

/// Rank 1 of 3 exits with status 3 in the first two attempts of the job.
fn failing_twice(test: &str, restarts: &str) -> (Option<i32>, String, String) {
    let mark = marker(test);
    let faults = example("worker_faults");
    let (out, _) = run(
        &mark,
        &[
            "run",
            "-n",
            "3",
            "--restarts",
            restarts,
            "--",
            &faults,
            "--fail-rank",
            "1",
            "--exit-code",
            "3",
            "--fail-attempts",
            "2",
        ],
    );
    assert_no_survivors(&mark);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_failed_job_is_restarted_with_the_same_ranks_until_it_succeeds() {
    let (code, stdout, stderr) = failing_twice("restart-ok", "2");
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    for attempt in 0..3 {
        for rank in 0..3 {
            let line = format!("[{rank}] rank {rank} of 3 joined (attempt {attempt})");
            assert!(stdout.lines().any(|l| l == line), "{line}\n{stdout}");
        }
    }
    assert_eq!(stderr.matches("heddle: rank 1 exited with status 3").count(), 2, "{stderr}");
    for attempt in [2, 3] {
        let line = format!("heddle: restarting the job: attempt {attempt} of at most 3");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
}

#[test]
fn the_job_fails_once_its_restarts_are_used_up() {
    let (code, stdout, stderr) = failing_twice("restart-out", "1");
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("(attempt 1)") && !stdout.contains("(attempt 2)"), "{stdout}");
    assert_eq!(stderr.matches("heddle: restarting the job").count(), 1, "{stderr}");
}

#[test]
fn without_restarts_a_failed_job_is_not_started_again() {
    let (code, stdout, stderr) = failing_twice("restart-none", "0");
    assert_eq!(code, Some(3), "{stdout}\n{stderr}");
    assert!(!stdout.contains("(attempt 1)"), "{stdout}");
    assert!(!stderr.contains("restarting"), "{stderr}");
}
