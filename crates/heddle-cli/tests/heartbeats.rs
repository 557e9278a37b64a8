//! Liveness: a worker that is stopped (SIGSTOP) sends no heartbeats, so the job master
//! declares it failed within the heartbeat timeout, naming the right rank, its host and
//! the reason, and `heddle run` kills it and stops the job. The communication timeout
//! is set to ten minutes, so only the heartbeats can end these jobs.

mod common;

use common::{assert_no_survivors, command, example, marker, text, wait_bounded};
use std::time::Duration;

/// Runs worker_faults on 3 workers with rank 1 stopping itself, with `flags` for
/// `heddle run`; returns the exit code and stderr.
fn stopped_rank_1(test: &str, flags: &[&str]) -> (Option<i32>, String) {
    let mark = marker(test);
    let faults = example("worker_faults");
    let mut args = vec!["run", "-n", "3"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", &faults, "--fail-rank", "1", "--stop"]);
    let child = command(&mark, &args).env("HEDDLE_TIMEOUT_S", "600").spawn().expect("spawn");
    let out = wait_bounded(child, Duration::from_secs(60));
    assert_no_survivors(&mark);
    (out.status.code(), text(&out.stderr))
}

fn assert_declared(code: Option<i32>, stderr: &str, timeout: &str) {
    assert_eq!(code, Some(1), "{stderr}");
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let cause = format!(
        "heddle: the job was aborted: rank 1 failed: NoHeartbeat: no heartbeat for {timeout}"
    );
    assert_eq!(stderr.matches(&cause).count(), 1, "{cause}\n{stderr}");
    assert!(stderr.contains(&format!("from rank 1 on host {}", host.trim())), "{stderr}");
    assert!(stderr.contains("heddle: rank 1 sent no heartbeat in time and was killed"), "{stderr}");
    for rank in [0, 2] {
        // The others' barrier failed with the cause instead of waiting for rank 1.
        let line = format!("[{rank}] error: the job was aborted: rank 1 failed: NoHeartbeat");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
}

#[test]
fn a_stopped_worker_is_declared_failed_within_the_heartbeat_timeout() {
    // A timeout ten intervals long: a healthy worker starved by a loaded machine still
    // beats in time.
    let (code, stderr) =
        stopped_rank_1("hb-flags", &["--heartbeat-interval", "0.2", "--heartbeat-timeout", "2"]);
    assert_declared(code, &stderr, "2.0 s");
}

#[test]
fn the_default_heartbeat_timeout_is_five_seconds() {
    let (code, stderr) = stopped_rank_1("hb-default", &[]);
    assert_declared(code, &stderr, "5.0 s");
}

#[test]
fn heartbeat_settings_are_checked_before_the_job_starts() {
    let mark = marker("hb-bad");
    let faults = example("worker_faults");
    for (flags, want) in [
        (
            vec!["--heartbeat-interval", "2", "--heartbeat-timeout", "3"],
            "must be at least twice the heartbeat interval",
        ),
        (
            vec!["--heartbeat-timeout", "0"],
            "--heartbeat-timeout: configuration: HEDDLE_HEARTBEAT_TIMEOUT_S=\"0\" is not valid",
        ),
    ] {
        let mut args = vec!["run", "-n", "2"];
        args.extend_from_slice(&flags);
        args.extend_from_slice(&["--", &faults]);
        let out = wait_bounded(command(&mark, &args).spawn().unwrap(), Duration::from_secs(30));
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(want), "{flags:?}: {want}\n{stderr}");
    }
    assert_no_survivors(&mark);
}
