//! Workers' logs: every worker installs a subscriber whose events reach the launcher's
//! stderr with the `[rank]` prefix, at the levels of `HEDDLE_LOG`, as text or (with
//! `--log-format json`) one JSON object per line.

use std::time::Duration;

mod common;

use common::{command, example, marker, text, wait_bounded};

fn run(mark: &str, args: &[&str], log: &str) -> String {
    let child = command(mark, args).env("HEDDLE_LOG", log).spawn().expect("spawn heddle run");
    let out = wait_bounded(child, Duration::from_secs(60));
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    err
}

#[test]
fn worker_events_reach_the_launcher_as_text_or_json() {
    let mark = marker("logging");
    let program = example("collectives");
    let err = run(&mark, &["run", "-n", "2", "--", &program], "info");
    for rank in 0..2 {
        let line = err
            .lines()
            .find(|l| l.starts_with(&format!("[{rank}] ")) && l.contains("joined the job"))
            .unwrap_or_else(|| panic!("rank {rank} logged nothing at info:\n{err}"));
        assert!(line.contains("INFO") && line.contains(&format!("rank={rank}")), "{line}");
    }
    // The default level (warn) leaves info events out.
    let quiet = run(&mark, &["run", "-n", "2", "--", &program], "");
    assert!(!quiet.contains("joined the job"), "{quiet}");
    let json = run(&mark, &["run", "-n", "2", "--log-format", "json", "--", &program], "info");
    let mut ranks = Vec::new();
    for line in json.lines().filter(|l| l.contains("joined the job")) {
        let (prefix, object) = line.split_once(' ').expect("a prefixed line");
        let v: serde_json::Value = serde_json::from_str(object)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        assert_eq!(v["level"], "INFO", "{v}");
        assert_eq!(v["message"], "joined the job", "{v}");
        assert_eq!(prefix, format!("[{}]", v["rank"]), "{line}");
        ranks.push(v["rank"].as_u64().unwrap());
    }
    ranks.sort_unstable();
    assert_eq!(ranks, [0, 1], "{json}");
}
