//! Admission beside other jobs (`HEDDLE_ADMISSION=queue|refuse`): real `heddle run` jobs
//! of `examples/resource_limits` on this host. A job holding 60 % of the host's memory
//! makes a second one asking as much be refused (exit status 2, nothing started, the
//! error naming the task, what it asks, what is free and who holds the rest), or wait
//! (`queue`) until the first is gone — here killed with SIGKILL, which releases its hold
//! at once — or give up after `HEDDLE_ADMISSION_TIMEOUT_S`. Memory rather than cores, so
//! that the test does not depend on how many cores the machine has.

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

/// The memory holds on this host (`/proc/net/unix`), as (bytes, name).
fn holds() -> Vec<(u64, String)> {
    let text = std::fs::read_to_string("/proc/net/unix").unwrap();
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(7)?.strip_prefix("@heddle/admission/"))
        .filter_map(|n| Some((n.split('/').nth(1)?.parse().ok()?, n.to_owned())))
        .collect()
}

fn host_memory() -> u64 {
    let out = std::process::Command::new(common::heddle()).args(["offer", "--json"]).output();
    let offer: serde_json::Value = serde_json::from_slice(&out.unwrap().stdout).unwrap();
    offer["memory"].as_u64().unwrap()
}

fn job(mark: &str, mode: &str, memory: &str, spin_s: &str) -> std::process::Command {
    let example = common::example("resource_limits");
    let mut c = common::command(mark, &["run", "-n", "1", "--dashboard", "off", "--", &example]);
    c.args(["--task-memory", memory, "--spin-s", spin_s]).env("HEDDLE_ADMISSION", mode);
    c
}

fn finished(c: &mut std::process::Command) -> Output {
    common::wait_bounded(c.spawn().unwrap(), Duration::from_secs(60))
}

#[test]
fn a_second_job_is_refused_queued_or_timed_out_until_the_first_is_gone() {
    let memory = (host_memory() / 10 * 6).to_string();
    let (first, second) = (common::marker("holder"), common::marker("second"));
    let mut holder = job(&first, "queue", &memory, "60").spawn().unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while !holds().iter().any(|(m, _)| m.to_string() == memory) {
        assert!(Instant::now() < until, "the first job took no hold: {:?}", holds());
        assert!(holder.try_wait().unwrap().is_none(), "the first job ended early");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Refused at once, nothing started.
    let out = finished(&mut job(&second, "refuse", &memory, "0"));
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for says in ["not admitted", "hog[0]", "GiB", "are free", "rank 0 (pid", "holds", "queue"] {
        assert!(err.contains(says), "missing {says:?} in:\n{err}");
    }
    assert!(!common::text(&out.stdout).contains("\"resource_limits\""), "it ran");

    // Queued past its timeout.
    let out =
        finished(job(&second, "queue", &memory, "0").env("HEDDLE_ADMISSION_TIMEOUT_S", "0.5"));
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("waited") && err.contains("was not admitted"), "{err}");

    // Queued until the first job is killed: its hold goes with it.
    let queued = job(&second, "queue", &memory, "0").spawn().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    holder.kill().unwrap();
    let killed = Instant::now();
    let _ = holder.wait();
    let out = common::wait_bounded(queued, Duration::from_secs(30));
    let err = common::text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("waiting for room") && err.contains("admitted after waiting"), "{err}");
    assert!(common::text(&out.stdout).contains("\"ok\":true"), "{}", common::text(&out.stdout));
    assert!(killed.elapsed() < Duration::from_secs(20), "{:?}", killed.elapsed());
    common::assert_no_survivors(&first);
    common::assert_no_survivors(&second);
    assert!(holds().iter().all(|(m, _)| m.to_string() != memory), "{:?}", holds());
}

#[test]
fn a_bad_admission_setting_is_refused_naming_it() {
    let mark = common::marker("bad-admission");
    let out = finished(&mut job(&mark, "sometimes", "1MiB", "0"));
    let err = common::text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("HEDDLE_ADMISSION") && err.contains("shared, queue or refuse"), "{err}");
}
