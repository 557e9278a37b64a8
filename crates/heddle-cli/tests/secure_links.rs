//! Secure links across hosts (three network namespaces on a bridge, as in `multihost.rs`).
//! An eavesdropper on the bridge reads a word count's words when links are plaintext or
//! only sealed (`HEDDLE_SECURITY=none`, `mac`), and nothing of them by default (TLS 1.3);
//! the answers are right in every mode. A worker with a wrong token, reaching the master
//! over TLS, is refused with the reason, and the job still runs.
//!
//! Needs root and iproute2 (as on this project's machines and CI); elsewhere each test
//! says loudly why it cannot run and checks nothing.

use std::time::Duration;

mod common;

use common::net::{Hosts, Sniffer};
use common::*;

fn hosts(count: usize) -> Option<Hosts> {
    Hosts::create_or_say_why(count)
}

const CANARY: &[u8] = b"heddlecanary";

/// A text of 40 000 distinct canary words, so every rank owns some and most cross hosts.
fn canary_text(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("canary.txt");
    let words: Vec<String> = (0..40_000).map(|i| format!("heddlecanary{i:05}")).collect();
    std::fs::write(&path, words.chunks(10).map(|c| c.join(" ") + "\n").collect::<String>())
        .unwrap();
    path
}

#[test]
fn links_across_hosts_are_encrypted_unless_configured() {
    let Some(h) = hosts(3) else { return };
    let dir = std::env::temp_dir().join(format!("heddle-secure-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = canary_text(&dir);
    let mark = marker("secure");
    let bind = format!("{}:0", h.bridge_ip());
    let program = format!("{} --input {}", example("wordcount"), input.display());
    let script = h.script(2, &program);
    let mut seen = Vec::new();
    for mode in ["auto", "mac", "none"] {
        let sniffer = match Sniffer::start(&format!("hb{}", h.tag), CANARY) {
            Ok(s) => s,
            Err(why) => panic!("cannot watch the bridge (root is needed, as for the hosts): {why}"),
        };
        let child = command(
            &mark,
            &["run", "-n", "6", "--init-timeout", "30", "--master-bind", &bind, "--"],
        )
        .args(["sh", "-c", &script])
        .env("HEDDLE_SECURITY", mode)
        .spawn()
        .expect("run heddle");
        let out = wait_bounded(child, Duration::from_secs(180));
        let (frames, hits) = sniffer.finish();
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}\n{}", text(&out.stderr));
        assert!(stdout.contains("\"ok\": true"), "{mode}: {stdout}");
        assert!(frames > 100, "{mode}: only {frames} frames crossed the bridge");
        seen.push((mode, frames, hits));
    }
    let _ = std::fs::remove_dir_all(&dir);
    eprintln!("frames, frames showing a word: {seen:?}");
    assert_eq!(seen[0].2, 0, "TLS links leaked words: {seen:?}");
    assert!(seen[1].2 > 0 && seen[2].2 > 0, "the eavesdropper saw no words at all: {seen:?}");
    assert_no_survivors(&mark);
}

#[test]
fn a_wrong_token_over_tls_is_refused_and_the_job_still_runs() {
    let Some(h) = hosts(2) else { return };
    let dir = std::env::temp_dir().join(format!("heddle-secure-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let (token, wrong) = (dir.join("job.token"), dir.join("wrong.token"));
    heddle_runtime::token_file::write(&wrong, "not-the-token").unwrap();
    let mark = marker("secure-token");
    let listen = h.bridge_ip();
    let mut master =
        command(&mark, &["master", "--world-size", "2", "--listen", &listen, "--token-file"])
            .arg(&token)
            .spawn()
            .unwrap();
    let addr = first_line(&mut master);
    let worker = |host: usize, file: &std::path::Path, program: &str| {
        std::process::Command::new("ip")
            .args(["netns", "exec", &h.ns(host), heddle().to_str().unwrap()])
            .args(["worker", "--master", &addr, "--token-file", file.to_str().unwrap(), "--"])
            .arg(program)
            .env("HDTEST_MARK", &mark)
            .env("HEDDLE_HOST_ID", format!("host-{host}"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let rogue = wait_bounded(worker(0, &wrong, "true"), Duration::from_secs(60));
    assert!(!rogue.status.success());
    assert!(text(&rogue.stderr).contains("bad job token"), "{}", text(&rogue.stderr));
    let collectives = example("collectives");
    let (a, b) = (worker(0, &token, &collectives), worker(1, &token, &collectives));
    let (a, b) =
        (wait_bounded(a, Duration::from_secs(60)), wait_bounded(b, Duration::from_secs(60)));
    assert!(a.status.success() && b.status.success(), "{}\n{}", text(&a.stderr), text(&b.stderr));
    let both = text(&a.stdout) + &text(&b.stdout);
    assert!(both.contains("\"ok\": true") && both.contains("\"tcp_peers\": 1"), "{both}");
    let out = wait_bounded(master, Duration::from_secs(30));
    assert!(text(&out.stderr).contains("bad job token"), "the master logs the refusal");
    let _ = std::fs::remove_dir_all(&dir);
    assert_no_survivors(&mark);
}
