//! `heddle run` with real worker processes: success over shared memory and TCP, and every
//! failure case — a worker's exit code or signal, peers that never join, a wrong job
//! token, Ctrl-C, a killed launcher — each checked for leftover processes.
//!
//! Needs the `heddle` crate's examples in the same target directory (`cargo test
//! --workspace` and `make test` build them).

use std::process::Command;
use std::time::{Duration, Instant};

mod common;

use common::*;

#[test]
fn collectives_demo_over_shm_and_tcp() {
    let demo = example("collectives");
    for transport in ["shm", "tcp"] {
        for n in [2usize, 3, 4] {
            // 1.5 M u32 (6 MB) at 4 ranks over shm: a broadcast through the root's
            // shared-memory area in 12 chunks, more than the area has slots.
            let big = transport == "shm" && n == 4;
            for &elements in if big { &["7", "100000", "1500000"][..] } else { &["7", "100000"] } {
                let mark = marker("demo");
                let (out, _) = run(
                    &mark,
                    &[
                        "run",
                        "-n",
                        &n.to_string(),
                        "--transport",
                        transport,
                        "--",
                        &demo,
                        "--elements",
                        elements,
                    ],
                );
                let stdout = text(&out.stdout);
                assert!(out.status.success(), "{transport} n={n}: {stdout}\n{}", text(&out.stderr));
                let json = stdout
                    .lines()
                    .find(|l| l.starts_with("[0] {\"example\""))
                    .expect("summary line");
                assert!(json.contains("\"ok\": true"), "{json}");
                let tcp = if transport == "tcp" { n - 1 } else { 0 };
                assert!(json.contains(&format!("\"tcp_peers\": {tcp}")), "{transport}: {json}");
                assert_no_survivors(&mark);
            }
        }
    }
}

#[test]
fn output_lines_carry_the_rank() {
    let mark = marker("prefix");
    let (out, _) = run(&mark, &["run", "-n", "3", "--", &example("worker_faults"), "--sleep", "0"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for r in 0..3 {
        assert!(
            stdout.lines().any(|l| l == format!("[{r}] rank {r} of 3 joined (attempt 0)")),
            "{stdout}"
        );
    }
}

#[test]
fn a_failing_worker_stops_the_others_with_its_status() {
    let mark = marker("exit");
    let (out, took) = run(
        &mark,
        &[
            "run",
            "-n",
            "4",
            "--",
            &example("worker_faults"),
            "--fail-rank",
            "2",
            "--exit-code",
            "3",
        ],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("heddle: rank 2 exited with status 3"), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_no_survivors(&mark);
}

#[test]
fn a_worker_killed_by_a_signal_is_named() {
    let mark = marker("signal");
    let (out, took) = run(
        &mark,
        &["run", "-n", "3", "--", &example("worker_faults"), "--fail-rank", "1", "--signal", "9"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(128 + 9), "{stderr}");
    assert!(stderr.contains("heddle: rank 1 was killed by signal 9 (SIGKILL)"), "{stderr}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_no_survivors(&mark);
}

#[test]
fn peers_that_never_join_time_out_clearly() {
    let mark = marker("join");
    let args = [
        "run",
        "-n",
        "3",
        "--init-timeout",
        "1.5",
        "--",
        &example("worker_faults"),
        "--fail-rank",
        "2",
        "--never-join",
        "60",
    ];
    let (out, took) = run(&mark, &args);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("timed out after 1.5s waiting for ranks [2] to join"), "{stderr}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert_no_survivors(&mark);
}

#[test]
fn a_wrong_job_token_is_refused_with_a_reason() {
    let mark = marker("token");
    let script = format!(
        "if [ \"$HEDDLE_RANK\" = 1 ]; then HEDDLE_JOB_TOKEN=forged exec {0}; else exec {0}; fi",
        example("collectives")
    );
    let (out, _) =
        run(&mark, &["run", "-n", "2", "--init-timeout", "3", "--", "sh", "-c", &script]);
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("refused registration") && stderr.contains("bad job token"),
        "{stderr}"
    );
    assert!(stderr.contains("[1] error: the job master refused: bad job token"), "{stderr}");
    assert_no_survivors(&mark);
}

#[test]
fn ctrl_c_stops_every_worker() {
    let mark = marker("sigint");
    let child =
        command(&mark, &["run", "-n", "3", "--", &example("worker_faults"), "--sleep", "60"])
            .spawn()
            .expect("spawn");
    let until = Instant::now() + Duration::from_secs(20);
    while survivors(&mark).len() < 3 {
        assert!(Instant::now() < until, "workers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    unsafe { libc_kill(child.id() as i32, 2) };
    let out = wait_bounded(child, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("interrupted by signal 2"), "{}", text(&out.stderr));
    assert_no_survivors(&mark);
}

#[test]
fn workers_do_not_outlive_a_killed_launcher() {
    let mark = marker("sigkill");
    let mut child =
        command(&mark, &["run", "-n", "2", "--", &example("worker_faults"), "--sleep", "60"])
            .spawn()
            .expect("spawn");
    let until = Instant::now() + Duration::from_secs(20);
    while survivors(&mark).len() < 2 {
        assert!(Instant::now() < until, "workers did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL the launcher");
    let _ = child.wait();
    assert_no_survivors(&mark);
}

#[test]
fn a_missing_program_is_a_clear_error() {
    let mark = marker("missing");
    let (out, _) = run(&mark, &["run", "-n", "2", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("cannot start \"/nonexistent/program\""),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn without_a_launcher_a_program_is_a_world_of_one() {
    let out =
        Command::new(example("collectives")).args(["--elements", "10"]).output().expect("run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("\"ok\": true, \"job_s\""), "{}", text(&out.stdout));
    assert!(text(&out.stdout).contains("\"ranks\": 1"));
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn dataflow_wordcount_across_processes() {
    let wc = example("wordcount_dataflow");
    for transport in ["shm", "tcp"] {
        for mode in ["batch", "streaming"] {
            let mark = marker("wordcount");
            let (out, _) = run(
                &mark,
                &[
                    "run",
                    "-n",
                    "3",
                    "--transport",
                    transport,
                    "--",
                    &wc,
                    "--words",
                    "20000",
                    "--mode",
                    mode,
                ],
            );
            let stdout = text(&out.stdout);
            assert!(out.status.success(), "{transport} {mode}: {stdout}\n{}", text(&out.stderr));
            let json =
                stdout.lines().find(|l| l.starts_with("[0] {\"example\"")).expect("summary line");
            assert!(json.contains("\"ok\": true") && json.contains("\"words\": 120000"), "{json}");
            assert_no_survivors(&mark);
        }
    }
}

#[test]
fn terasort_generated_and_from_a_file_with_spill() {
    let dir = std::env::temp_dir().join(format!("heddle-terasort-{}", std::process::id()));
    let out_dir = dir.join("out");
    std::fs::create_dir_all(&dir).unwrap();
    // A file of newline-terminated 100-byte lines with pseudo-random printable keys.
    let mut x = 12345u64;
    let mut lines = Vec::new();
    for i in 0..30_000u64 {
        let mut line = [b'.'; 101];
        for b in line.iter_mut().take(10) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = b'A' + (x % 26) as u8;
        }
        line[10..20].copy_from_slice(format!("{i:010}").as_bytes());
        line[100] = b'\n';
        lines.extend_from_slice(&line);
    }
    let input = dir.join("input.txt");
    std::fs::write(&input, &lines).unwrap();
    let runs: [&[&str]; 2] = [
        &["--records", "200000", "--mem-budget", "1000000"],
        &["--input", input.to_str().unwrap(), "--mem-budget", "200000"],
    ];
    // The dataflow version and the data-API version: the same job, the same checks.
    for (name, extra) in
        ["terasort_dataflow", "terasort"].into_iter().flat_map(|n| runs.map(|r| (n, r)))
    {
        let ts = example(name);
        let mark = marker(name);
        let mut args = vec![
            "run",
            "-n",
            "3",
            "--",
            ts.as_str(),
            "--output",
            out_dir.to_str().unwrap(),
            "--spill-dir",
            dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let (out, _) = run(&mark, &args);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
        let json =
            stdout.lines().find(|l| l.starts_with("[0] {\"example\"")).expect("summary line");
        assert!(json.contains("\"valid\": true"), "{json}");
        assert!(
            !json.contains("\"spilled_bytes\": 0,"),
            "{name}: a small budget must spill: {json}"
        );
        // The part files, concatenated in order, are the sorted input.
        let mut all = Vec::new();
        for r in 0..3 {
            all.extend(std::fs::read(out_dir.join(format!("part-{r:05}"))).unwrap());
        }
        let keys: Vec<&[u8]> = all.chunks(100).map(|r| &r[..10]).collect();
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "parts are not globally sorted");
        let expected = if extra[0] == "--input" { 30_000 } else { 200_000 };
        assert_eq!(all.len(), expected * 100);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("heddle-spill"))
            .collect();
        assert!(leftovers.is_empty(), "spill files left behind: {leftovers:?}");
        assert_no_survivors(&mark);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_broadcast_edge_through_shared_slots_across_processes() {
    let bench = example("bench_broadcast_edge");
    // 4 processes on shm: the root's batches (64 KiB and 1 MiB records) go through its
    // shared slots to its same-host children; over TCP, and with the slots turned off,
    // through the links. Every target checks count and order-sensitive checksum.
    for (transport, record, shared) in [
        ("shm", "65536", true),
        ("shm", "1048576", true),
        ("shm", "1048576", false),
        ("tcp", "65536", false),
    ] {
        let mark = marker("bcast-edge");
        let mut args = vec![
            "run",
            "-n",
            "4",
            "--transport",
            transport,
            "--",
            &bench,
            "--records",
            "60",
            "--record-bytes",
            record,
            "--runs",
            "2",
        ];
        if transport == "shm" && !shared {
            args.push("--no-shared-slots");
        }
        let (out, _) = run(&mark, &args);
        let stdout = text(&out.stdout);
        let what = format!("{transport} {record} shared={shared}");
        assert!(out.status.success(), "{what}: {stdout}\n{}", text(&out.stderr));
        let line = stdout.lines().find(|l| l.starts_with("[0] {")).expect("summary line");
        let json: serde_json::Value = serde_json::from_str(&line[4..]).unwrap();
        assert_eq!(json["ok"], true, "{what}: {line}");
        let n = json["shared_messages"].as_u64().unwrap();
        assert_eq!(n > 0, shared, "{what}: {n} batches through the shared slots");
        assert_no_survivors(&mark);
    }
}
