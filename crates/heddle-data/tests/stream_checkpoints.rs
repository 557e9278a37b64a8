//! Streams with checkpoints on 3 workers: two generated streams, united, counted per key
//! in keyed state, written through the two-phase file sink. A run that is stopped, or
//! that fails part way, and is run again on the same checkpoint directory ends with
//! every record written exactly once and each key's counts 1..n (a plain count of the
//! generated records is the reference).

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::on_owned_sessions;
use heddle_task::StopHandle;

const PER_STREAM: u64 = 6000;
const KEYS: u64 = 37;

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-stream-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// How a run ends early: stopped after `n` records, or failing at record `n`.
#[derive(Clone, Copy)]
enum Early {
    Stop(u64),
    Fail(u64),
    None,
}

/// Runs the job on 3 workers (4 partitions); returns each worker's result.
fn run(root: &Path, early: Early) -> Vec<heddle_data::Result<()>> {
    let seen = Arc::new(AtomicU64::new(0));
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = StopHandle::default();
    on_owned_sessions(3, |s| {
        let s = s.with_partitions(4).expect("partitions");
        let s = s
            .with_checkpoints(root.join("ckpt"), Some(Duration::from_millis(15)), "union-count")
            .expect("checkpoints");
        let a = s.stream_generate(Some(4000), Some(PER_STREAM), |i| (i % KEYS, i));
        let b =
            s.stream_generate(Some(4000), Some(PER_STREAM), |i| ((i * 7) % KEYS, 1_000_000 + i));
        let (seen, stop2, fired) = (seen.clone(), stop.clone(), fired.clone());
        let ckpt_root = root.to_path_buf();
        let united = a.union(&b).map(move |(k, v)| {
            let n = seen.fetch_add(1, Ordering::Relaxed) + 1;
            // Past `at`, once a checkpoint has completed (so that the run resumes from one).
            let due =
                |at| n >= at && has_commit(&ckpt_root) && !fired.swap(true, Ordering::Relaxed);
            match early {
                Early::Stop(at) if due(at) => stop2.stop(),
                Early::Fail(at) if due(at) => return (k, (v, true)),
                _ => {}
            }
            (k, (v, false))
        });
        let counted = united.map_with_state(|k: &u64, (v, fail), n: &mut Option<u64>| {
            let c = n.unwrap_or(0) + 1;
            *n = Some(c);
            (format!("{v} {k} {c}"), fail)
        });
        // A line marked to fail cannot be written: an injected failure.
        counted.write_parts(root.join("out"), Some(stop.clone()), |out, (line, fail)| {
            if fail {
                return Err(std::io::Error::other("an injected failure"));
            }
            writeln!(out, "{line}")
        })
    })
}

/// Whether a checkpoint completed.
fn has_commit(root: &Path) -> bool {
    std::fs::read_dir(root.join("ckpt"))
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().ends_with(".ckpt")))
        .unwrap_or(false)
}

/// Every generated record exactly once, each key's counts 1..n.
fn check(root: &Path) {
    let mut want: HashMap<u64, u64> = HashMap::new();
    for i in 0..PER_STREAM {
        want.insert(i, i % KEYS);
        want.insert(1_000_000 + i, (i * 7) % KEYS);
    }
    common::check_exactly_once(&root.join("out"), &want);
}

#[test]
fn a_stopped_stream_resumes_from_its_checkpoint_exactly_once() {
    let root = dir("stop");
    for r in run(&root, Early::Stop(4000)) {
        r.expect("the stopped run");
    }
    assert!(has_commit(&root), "no checkpoint completed before the stop");
    for r in run(&root, Early::None) {
        r.expect("the resumed run");
    }
    check(&root);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_failed_stream_resumes_from_its_last_complete_checkpoint_exactly_once() {
    let root = dir("fail");
    let failed = run(&root, Early::Fail(7000));
    assert!(failed.iter().any(Result::is_err), "the injected failure did not fail the run");
    assert!(has_commit(&root), "no checkpoint completed before the failure");
    for r in run(&root, Early::None) {
        r.expect("the resumed run");
    }
    check(&root);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Event-time windows (tumbling, 100 ms) over generated events (key i % 5 at time i ms),
/// counted, written as `key start count`; `fail_at`: the run fails writing that result.
fn run_windows(root: &Path, fail_at: Option<u64>) -> Vec<heddle_data::Result<()>> {
    let written = Arc::new(AtomicU64::new(0));
    let fired = Arc::new(std::sync::atomic::AtomicBool::new(false));
    on_owned_sessions(3, |s| {
        let s = s
            .with_checkpoints(root.join("ckpt"), Some(Duration::from_millis(15)), "windows")
            .expect("checkpoints");
        let events = s.stream_generate(Some(5000), Some(PER_STREAM), |i| (i % 5, (i, 1u64)));
        let tumbling = heddle_data::Window::tumbling(Duration::from_millis(100));
        let w = tumbling.event_time(Duration::ZERO, Duration::ZERO);
        let counts = events.window(w, |(t, _)| *t, |(t, a), (_, b)| (t, a + b));
        let lines = counts.map(|r| format!("{} {} {}", r.key, r.start, r.value.1));
        let (written, fired, ckpt_root) = (written.clone(), fired.clone(), root.to_path_buf());
        lines.write_parts(root.join("out"), None, move |out, line| {
            // Past `fail_at`, once a checkpoint has completed (the run resumes from one).
            let n = written.fetch_add(1, Ordering::Relaxed) + 1;
            if fail_at.is_some_and(|at| n >= at)
                && has_commit(&ckpt_root)
                && !fired.swap(true, Ordering::Relaxed)
            {
                return Err(std::io::Error::other("an injected failure"));
            }
            writeln!(out, "{line}")
        })
    })
}

#[test]
fn windows_resume_from_their_checkpoint_with_each_result_once() {
    let root = dir("windows");
    let failed = run_windows(&root, Some(150));
    assert!(failed.iter().any(Result::is_err), "the injected failure did not fail the run");
    assert!(has_commit(&root), "no checkpoint completed before the failure");
    for r in run_windows(&root, None) {
        r.expect("the resumed run");
    }
    let mut want: HashMap<(u64, u64), u64> = HashMap::new();
    for i in 0..PER_STREAM {
        *want.entry((i % 5, i / 100 * 100)).or_default() += 1;
    }
    let mut got: HashMap<(u64, u64), u64> = HashMap::new();
    for e in std::fs::read_dir(root.join("out")).expect("output").flatten() {
        for line in std::fs::read_to_string(e.path()).expect("part").lines() {
            let f: Vec<u64> = line.split(' ').map(|x| x.parse().expect("a number")).collect();
            let before = got.insert((f[0], f[1]), f[2]);
            assert!(before.is_none(), "window {line} written twice");
        }
    }
    assert_eq!(got, want);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_checkpoint_of_another_graph_is_refused_naming_the_difference() {
    let root = dir("graph");
    let job = |partitions: u32| {
        on_owned_sessions(2, |s| {
            let s = s.with_partitions(partitions).expect("partitions");
            let s = s
                .with_checkpoints(root.join("ckpt"), Some(Duration::from_millis(20)), "graph")
                .expect("checkpoints");
            let counted = s.stream_generate(None, Some(500), |i| (i % 3, i)).map_with_state(
                |_: &u64, v: u64, n: &mut Option<u64>| {
                    *n = Some(n.unwrap_or(0) + 1);
                    v
                },
            );
            counted.write_lines(root.join(format!("out-{partitions}")), None)
        })
    };
    for r in job(4) {
        r.expect("the first run");
    }
    for r in job(2) {
        let e = r.expect_err("another graph must be refused").to_string();
        assert!(
            e.contains("another graph") && e.contains("'vertex 0: stream_generate#0 x4'"),
            "{e}"
        );
        assert!(e.contains("this job has 'vertex 0: stream_generate#0 x2'"), "{e}");
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn checkpoints_go_on_after_part_of_the_job_has_ended() {
    // Worker 0 reads a file of 10 lines and ends at once; worker 1 reads 3000 lines at
    // 2000 a second. Checkpoints must go on meanwhile (worker 0's ended tasks, and an
    // executor thread whose tasks have all ended, still take part).
    let root = dir("uneven");
    let input = root.join("in");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::write(input.join("a.txt"), (0..10).map(|i| format!("{i}\n")).collect::<String>())
        .unwrap();
    let long: String = (10..3010).map(|i| format!("{i}\n")).collect();
    std::fs::write(input.join("b.txt"), long).unwrap();
    let results = on_owned_sessions(2, |s| {
        let s = s
            .with_threads(2)
            .expect("threads")
            .with_checkpoints(root.join("ckpt"), Some(Duration::from_millis(50)), "uneven")
            .expect("checkpoints");
        let lines = s.stream_text(&input, Some(4000.0))?;
        lines.write_lines(root.join("out"), None)
    });
    for r in results {
        r.expect("the run");
    }
    let history = std::fs::read_to_string(root.join("ckpt").join("history.jsonl")).unwrap();
    let periodic = history.lines().filter(|l| l.contains("\"last\":false")).count();
    assert!(periodic >= 5, "only {periodic} checkpoints completed while worker 1 ran:\n{history}");
    let mut got: Vec<u64> = Vec::new();
    for e in std::fs::read_dir(root.join("out")).unwrap().flatten() {
        for l in std::fs::read_to_string(e.path()).unwrap().lines() {
            got.push(l.parse().unwrap());
        }
    }
    got.sort_unstable();
    assert_eq!(got, (0..3010).collect::<Vec<u64>>());
    std::fs::remove_dir_all(&root).unwrap();
}
