//! Helpers of the tests that run `heddle run` with real worker processes.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub mod net;
pub mod redis;

pub fn heddle() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_heddle"))
}

pub fn example(name: &str) -> String {
    let p = heddle().parent().expect("target dir").join("examples").join(name);
    assert!(
        p.exists(),
        "{} is missing: build the examples first (cargo test --workspace or make test)",
        p.display()
    );
    p.display().to_string()
}

/// A unique marker put in every worker's environment, to find survivors in /proc.
pub fn marker(test: &str) -> String {
    format!("{test}-{}-{}", std::process::id(), Instant::now().elapsed().as_nanos())
}

pub fn command(mark: &str, args: &[&str]) -> Command {
    let mut c = Command::new(heddle());
    c.args(args)
        .env("HDTEST_MARK", mark)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// Runs `heddle` to completion (killing it after a minute) and returns its output and
/// how long it took.
pub fn run(mark: &str, args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let child = command(mark, args).spawn().expect("spawn heddle");
    (wait_bounded(child, Duration::from_secs(60)), start.elapsed())
}

pub fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let until = Instant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() > until {
            let _ = child.kill();
            panic!("heddle did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().expect("output")
}

/// Processes whose environment carries `mark` (workers and anything they started).
pub fn survivors(mark: &str) -> Vec<u32> {
    let needle = format!("HDTEST_MARK={mark}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else { continue };
        let zombie = std::fs::read_to_string(entry.path().join("stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(false);
        if !zombie && env.split(|&b| b == 0).any(|kv| kv == needle.as_bytes()) {
            found.push(pid);
        }
    }
    found
}

pub fn assert_no_survivors(mark: &str) {
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        let left = survivors(mark);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < until, "worker processes survived heddle run: {left:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first line `child` prints (trimmed): `heddle master`'s join address, say.
pub fn first_line(child: &mut Child) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().expect("piped stdout")),
        &mut line,
    )
    .expect("read the first line");
    line.trim().to_string()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
