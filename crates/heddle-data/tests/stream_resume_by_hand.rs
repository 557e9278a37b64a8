//! Checkpointed streams resumed in one directory: a run stopped early, a run that fails
//! before its first checkpoint, and a run to the end together publish every record once
//! through the two-phase file sink, although all three are attempt 0 (a job started
//! again by hand, not by `heddle run --restarts`).

mod common;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use heddle_task::StopHandle;

const TOTAL: u64 = 20_000;

/// `0 .. TOTAL` into `dir/out`, checkpointed in `dir/ckpt` every `interval`; the source
/// stops at `stop_at`, writing fails from `fail_at` on.
fn run(
    dir: &Path,
    interval: Option<Duration>,
    stop_at: Option<u64>,
    fail_at: Option<u64>,
) -> heddle_data::Result<()> {
    let mut ran = common::on_owned_sessions(1, |s| {
        let s = s.with_checkpoints(dir.join("ckpt"), interval, "resumed")?;
        let stop = StopHandle::default();
        let stopper = stop.clone();
        let numbers = s.stream_generate(None, Some(TOTAL), move |i| {
            if Some(i) == stop_at {
                stopper.stop();
            }
            i
        });
        numbers.write_parts(dir.join("out"), Some(stop), move |w, i| {
            if fail_at.is_some_and(|f| i >= f) {
                return Err(std::io::Error::other(format!("failing at {i}")));
            }
            writeln!(w, "{i}")
        })
    });
    ran.pop().expect("one worker")
}

/// The records of the committed parts (hidden files are in progress), in part order.
fn committed(out: &Path) -> Vec<u64> {
    let mut names: Vec<String> = std::fs::read_dir(out)
        .expect("output directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().to_string())
        .filter(|n| !n.starts_with('.'))
        .collect();
    names.sort();
    let text: String =
        names.iter().map(|n| std::fs::read_to_string(out.join(n)).unwrap()).collect();
    text.lines().map(|l| l.parse().expect("a number")).collect()
}

#[test]
fn stopped_failed_and_resumed_runs_publish_each_record_once() {
    let dir = std::env::temp_dir().join(format!("heddle-test-resumed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let every = Some(Duration::from_millis(20));
    run(&dir, every, Some(3000), None).expect("the stopped run");
    let first = committed(&dir.join("out"));
    assert!(first.len() >= 3000 && first.len() < TOTAL as usize, "{}", first.len());
    assert_eq!(first, (0..first.len() as u64).collect::<Vec<_>>());
    // No interval: the run fails before any checkpoint of its own, its unfinished file
    // left behind; the next run resumes from the stopped run's last checkpoint again.
    let failed = run(&dir, None, None, Some(8000)).expect_err("a failing write");
    assert!(failed.to_string().contains("failing at 8000"), "{failed}");
    assert_eq!(committed(&dir.join("out")), first);
    run(&dir, every, None, None).expect("the last run");
    assert_eq!(committed(&dir.join("out")), (0..TOTAL).collect::<Vec<_>>());
    std::fs::remove_dir_all(&dir).expect("clean up");
}
