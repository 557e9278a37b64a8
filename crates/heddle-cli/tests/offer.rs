//! `heddle offer` against the system's own tools (`nproc`, `/proc/meminfo`), and the
//! offer settings of `heddle run` refused before anything starts.

mod common;

use std::process::Command;

#[test]
fn the_offer_matches_nproc_and_the_memory_the_kernel_reports() {
    let out = Command::new(common::heddle()).args(["offer", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let o: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let nproc = Command::new("nproc").output().unwrap();
    let cores: f64 = String::from_utf8_lossy(&nproc.stdout).trim().parse().unwrap();
    // nproc counts the CPU affinity; a cgroup quota may only lower the offer.
    let cpus = o["cpus"].as_f64().unwrap();
    assert!(cpus > 0.0 && cpus <= cores, "{o} vs nproc {cores}");
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    let memory = o["memory"].as_u64().unwrap();
    assert!(memory > 0 && memory <= kb * 1024, "{o} vs MemTotal {kb} kB");
    let text = Command::new(common::heddle()).arg("offer").output().unwrap();
    let line = String::from_utf8_lossy(&text.stdout);
    assert!(line.contains("cores (from ") && line.contains("of memory (from "), "{line}");
}

#[test]
fn bad_offer_settings_are_refused_with_exit_status_2() {
    for (flag, value, says) in [
        ("--memory-per-worker", "-3GiB", "negative"),
        ("--memory-per-worker", "12 parsecs", "unknown unit `parsecs`"),
        ("--cpus-per-worker", "0", "above 0"),
        ("--cpus-per-worker", "many", "not a number of cores"),
    ] {
        let arg = format!("{flag}={value}");
        let out = Command::new(common::heddle())
            .args(["run", "-n", "1", &arg, "--", "true"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{arg}: {err}");
        assert!(err.contains(flag) && err.contains(says), "{arg}: {err}");
    }
}
