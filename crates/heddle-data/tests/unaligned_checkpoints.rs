//! Unaligned checkpoints under back-pressure, on 3 workers: unpaced generated streams,
//! united, counted per key in keyed state, written by a slow two-phase sink. With an
//! alignment timeout of 0 every checkpoint goes on unaligned wherever a barrier waits:
//! barriers overtake the records in the outboxes, tasks snapshot at the first barrier,
//! and the records in flight are stored with the states. A run that fails part way and is
//! run again ends with every record written exactly once and each key's counts 1..n (a
//! plain count of the generated records is the reference), having resumed from a
//! checkpoint that held records in flight.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::on_owned_sessions;

const PER_STREAM: u64 = 10_000;
const KEYS: u64 = 23;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-unaligned-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The newest complete checkpoint's commit line (JSON), if any.
fn newest_commit(root: &Path) -> Option<String> {
    let mut commits: Vec<PathBuf> = std::fs::read_dir(root.join("ckpt"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "ckpt"))
        .collect();
    commits.sort();
    let text = std::fs::read_to_string(commits.last()?).ok()?;
    text.lines().nth(1).map(str::to_string)
}

fn unaligned_tasks(commit_json: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(commit_json).expect("a commit");
    v["unaligned_tasks"].as_u64().unwrap_or(0)
}

/// Runs the job, the sources emitting `rate` records a second each (`None`: unpaced, so
/// they end before the first checkpoint and only the queues hold records); `fail_at`: the
/// sink fails at that record once a checkpoint holding records in flight has completed.
fn run(root: &Path, rate: Option<u64>, fail_at: Option<u64>) -> Vec<heddle_data::Result<()>> {
    let seen = Arc::new(AtomicU64::new(0));
    let fired = Arc::new(AtomicBool::new(false));
    on_owned_sessions(3, |s| {
        let s = s.with_partitions(4).expect("partitions");
        let s = s
            .with_checkpoints(root.join("ckpt"), Some(Duration::from_millis(10)), "unaligned")
            .and_then(|s| s.with_alignment_timeout(Some(Duration::ZERO)))
            .expect("checkpoints");
        let a = s.stream_generate(rate, Some(PER_STREAM), |i| (i % KEYS, i));
        let b = s.stream_generate(rate, Some(PER_STREAM), |i| ((i * 5) % KEYS, 1_000_000 + i));
        let counted = a.union(&b).map_with_state(|k: &u64, v, n: &mut Option<u64>| {
            let c = n.unwrap_or(0) + 1;
            *n = Some(c);
            (*k, v, c)
        });
        let (seen, fired, ckpt) = (seen.clone(), fired.clone(), root.to_path_buf());
        counted.write_parts(root.join("out"), None, move |out, (k, v, c)| {
            // Slower than the sources: the queues fill up (back-pressure).
            std::thread::sleep(Duration::from_micros(100));
            let n = seen.fetch_add(1, Ordering::Relaxed) + 1;
            let due = fail_at.is_some_and(|at| n >= at)
                && newest_commit(&ckpt).is_some_and(|c| unaligned_tasks(&c) > 0)
                && !fired.swap(true, Ordering::Relaxed);
            if due {
                return Err(std::io::Error::other("an injected failure"));
            }
            writeln!(out, "{v} {k} {c}")
        })
    })
}

/// Every generated record exactly once, each key's counts 1..n.
fn check(root: &Path) {
    let mut want: HashMap<u64, u64> = HashMap::new();
    for i in 0..PER_STREAM {
        want.insert(i, i % KEYS);
        want.insert(1_000_000 + i, (i * 5) % KEYS);
    }
    common::check_exactly_once(&root.join("out"), &want);
}

/// Fails part way, then runs again on the same checkpoints.
fn fail_and_resume(name: &str, rate: Option<u64>) {
    let root = dir(name);
    let failed = run(&root, rate, Some(6000));
    let history = std::fs::read_to_string(root.join("ckpt").join("history.jsonl"));
    assert!(
        failed.iter().any(Result::is_err),
        "the injected failure did not fail the run; checkpoints:\n{history:?}"
    );
    let resumed_from = newest_commit(&root).expect("a checkpoint completed before the failure");
    assert!(
        unaligned_tasks(&resumed_from) > 0,
        "the checkpoint resumed from holds no records in flight: {resumed_from}"
    );
    for r in run(&root, rate, None) {
        r.expect("the resumed run");
    }
    check(&root);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_running_stream_resumes_exactly_once_from_an_unaligned_checkpoint() {
    fail_and_resume("running", Some(20_000));
}

#[test]
fn queued_records_of_ended_sources_are_kept_by_an_unaligned_checkpoint() {
    fail_and_resume("ended", None);
}

#[test]
fn unaligned_checkpoints_alone_give_the_same_output() {
    let root = dir("plain");
    for r in run(&root, Some(20_000), None) {
        r.expect("the run");
    }
    let history = std::fs::read_to_string(root.join("ckpt").join("history.jsonl"))
        .expect("checkpoint history");
    assert!(
        history.lines().any(|l| unaligned_tasks(l) > 0),
        "no checkpoint went unaligned under back-pressure:\n{history}"
    );
    check(&root);
    std::fs::remove_dir_all(&root).unwrap();
}
