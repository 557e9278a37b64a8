//! The dashboard of `heddle run`: while a streaming job runs, its JSON API names every
//! task of the graph and their counts grow, `/metrics` holds the conventional names, the
//! page is served, an unknown path is a 404, a taken port is a clear error, and with
//! `HEDDLE_METRICS=off` only the workers are shown.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{assert_no_survivors, command, example, marker, text, wait_bounded};

/// `GET path` on `addr`: the status code and the body.
fn get(addr: &str, path: &str) -> (u16, String) {
    request(addr, path, "")
}

/// `GET path` on `addr` with extra request `headers` (each ending in CRLF): the status
/// code and the body.
fn request(addr: &str, path: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).expect("connect to the dashboard");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Connection: close\r\n\r\n")
        .expect("send");
    let mut reply = String::new();
    s.read_to_string(&mut reply).expect("read the reply");
    let status = reply.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // Bodies of unknown length come chunked: join the chunks.
    let body = if reply.to_ascii_lowercase().contains("transfer-encoding: chunked") {
        let mut out = String::new();
        let mut rest = body;
        while let Some((size, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, body)
}

fn json(addr: &str, path: &str) -> Value {
    let (status, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path} is not JSON ({e}): {body}"))
}

/// The sum of `field` (a count) over every task instance so far.
fn summed(addr: &str, field: &str) -> u64 {
    let tasks = json(addr, "/api/v1/tasks");
    tasks["tasks"].as_array().unwrap().iter().map(|t| t[field].as_u64().unwrap()).sum()
}

/// Records given out by every task instance so far.
fn records_out(addr: &str) -> u64 {
    summed(addr, "records_out")
}

/// Starts `heddle run --dashboard 127.0.0.1:0 -n 2 -- stream_window --generate` with
/// `events` at `rate` and the extra `env`: the child, the dashboard's address, and a
/// thread collecting the rest of its stderr.
fn start_window(
    mark: &str,
    events: &str,
    rate: &str,
    env: &[(&str, &str)],
) -> (Child, String, std::thread::JoinHandle<String>) {
    let window = example("stream_window");
    let mut cmd = command(mark, &["run", "--dashboard", "127.0.0.1:0", "-n", "2", "--", &window]);
    cmd.args(["--generate", "--events", events, "--rate", rate]);
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("spawn heddle run");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the dashboard line");
    let addr = line
        .trim()
        .strip_prefix("heddle: dashboard at http://")
        .and_then(|a| a.strip_suffix('/'))
        .unwrap_or_else(|| panic!("the first line names the dashboard: {line:?}"))
        .to_string();
    let drain = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    (child, addr, drain)
}

#[test]
fn a_running_job_shows_its_tasks_rates_and_metrics() {
    let mark = marker("dashboard");
    let (child, addr, drain) = start_window(&mark, "40000000", "2000000", &[]);
    // The graph once the workers' first reports are in.
    let until = Instant::now() + Duration::from_secs(30);
    let job = loop {
        let job = json(&addr, "/api/v1/job");
        if job["graph"].is_object() && records_out(&addr) > 0 {
            break job;
        }
        assert!(Instant::now() < until, "no graph or counts within 30 s: {job}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        (job["name"].as_str(), job["state"].as_str()),
        (Some("stream_window"), Some("running"))
    );
    assert_eq!(job["workers"], 2);
    let vertices: Vec<String> = job["graph"]["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .collect();
    assert!(vertices.len() >= 3 && vertices.iter().any(|v| v.starts_with("window")), "{job}");
    let tasks = json(&addr, "/api/v1/tasks");
    for v in &vertices {
        let instances =
            tasks["tasks"].as_array().unwrap().iter().filter(|t| t["task"] == v.as_str()).count();
        assert_eq!(instances, 2, "two instances of {v}: {tasks}");
    }
    for e in tasks["edges"].as_array().unwrap() {
        let r = e["backpressure_ratio"].as_f64().unwrap();
        assert!(
            (0.0..=1.0).contains(&r)
                && ["OK", "LOW", "HIGH"].contains(&e["level"].as_str().unwrap()),
            "{e}"
        );
    }
    // The counts grow from one report to the next.
    let before = records_out(&addr);
    std::thread::sleep(Duration::from_millis(2500));
    let after = records_out(&addr);
    assert!(after > before, "records out did not grow: {before} then {after}");
    // Records cross the dataflow edges serialized: bytes leave and arrive.
    let (sent, received) = (summed(&addr, "bytes_out"), summed(&addr, "bytes_in"));
    assert!(sent > 0 && received > 0, "bytes out {sent}, in {received}");
    let workers = json(&addr, "/api/v1/workers");
    let workers = workers["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    for w in workers {
        assert!(
            w["pid"].as_u64().unwrap() > 0 && w["rss_bytes"].as_u64().unwrap() > 1 << 20,
            "{w}"
        );
        assert!(w["heartbeat_age_s"].as_f64().unwrap() < 5.0, "{w}");
    }
    let (status, metrics) = get(&addr, "/metrics");
    assert_eq!(status, 200);
    for name in [
        "heddle_task_records_in_total{",
        "heddle_task_records_out_total{",
        "heddle_task_bytes_in_total{",
        "heddle_task_bytes_out_total{",
        "heddle_edge_backpressure_ratio{",
        "heddle_bytes_sent_total{transport=\"shm\"}",
        "heddle_collective_seconds_bucket{",
        "heddle_worker_resident_memory_bytes{",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics:\n{metrics}");
    }
    let (status, page) = get(&addr, "/");
    assert_eq!(status, 200);
    assert!(page.contains("<svg") && page.contains("api/v1/tasks"), "the page");
    let (status, body) = get(&addr, "/api/v2/nothing");
    assert_eq!(status, 404);
    assert!(body.contains("/api/v1/job"), "{body}");
    let out = wait_bounded(child, Duration::from_secs(120));
    let rest = drain.join().unwrap();
    assert!(out.status.success(), "{rest}");
    assert!(text(&out.stdout).contains("\"ok\": true"), "{}", text(&out.stdout));
    // The dashboard ends with the launcher.
    assert!(TcpStream::connect(&addr).is_err(), "the dashboard outlived the job");
    assert_no_survivors(&mark);
}

#[test]
fn a_taken_dashboard_port_is_named_and_nothing_starts() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let mark = marker("dashboard-taken");
    let child = command(&mark, &["run", "--dashboard", &addr, "-n", "2", "--", "true"])
        .spawn()
        .expect("spawn heddle run");
    let out = wait_bounded(child, Duration::from_secs(30));
    let err = text(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains(&format!("binding the dashboard to {addr}")), "{err}");
    assert!(err.contains("--dashboard off"), "{err}");
    let bad = command(&mark, &["run", "--dashboard", "nowhere", "-n", "1", "--", "true"])
        .spawn()
        .expect("spawn heddle run");
    let out = wait_bounded(bad, Duration::from_secs(30));
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("HOST:PORT"), "{}", text(&out.stderr));
    assert_no_survivors(&mark);
}

/// `GET path` with extra request headers: the status code.
fn status_with(addr: &str, path: &str, headers: &str) -> u16 {
    request(addr, path, headers).0
}

#[test]
fn a_dashboard_off_loopback_asks_for_its_token() {
    let mark = marker("dashboard-token");
    let mut child =
        command(&mark, &["run", "--dashboard", "0.0.0.0:0", "-n", "1", "--", "sleep", "4"])
            .spawn()
            .expect("spawn heddle run");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the dashboard line");
    let (port, token) = line
        .trim()
        .strip_prefix("heddle: dashboard at http://0.0.0.0:")
        .and_then(|rest| rest.split_once("/?token="))
        .unwrap_or_else(|| panic!("the address carries a token: {line:?}"));
    assert_eq!(token.len(), 32, "{token}");
    let addr = format!("127.0.0.1:{port}");
    assert_eq!(status_with(&addr, "/api/v1/job", ""), 401);
    assert_eq!(status_with(&addr, "/metrics", "Authorization: Bearer wrong\r\n"), 401);
    assert_eq!(status_with(&addr, &format!("/?token={token}"), ""), 200);
    assert_eq!(
        status_with(&addr, "/api/v1/job", &format!("Cookie: heddle_dashboard={token}\r\n")),
        200
    );
    assert_eq!(status_with(&addr, "/metrics", &format!("Authorization: Bearer {token}\r\n")), 200);
    let _ = child.kill();
    let _ = child.wait();
    assert_no_survivors(&mark);
}

#[test]
fn metrics_turned_off_leave_the_workers_only() {
    let mark = marker("dashboard-off");
    let (child, addr, drain) =
        start_window(&mark, "4000000", "1000000", &[("HEDDLE_METRICS", "off")]);
    // Two reports from every worker: the job is well under way.
    std::thread::sleep(Duration::from_millis(2500));
    let workers = json(&addr, "/api/v1/workers");
    let workers = workers["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 2);
    assert!(workers.iter().all(|w| w["rss_bytes"].as_u64().unwrap() > 1 << 20), "{workers:?}");
    let tasks = json(&addr, "/api/v1/tasks");
    assert_eq!(tasks["tasks"].as_array().map(Vec::len), Some(0), "{tasks}");
    assert!(json(&addr, "/api/v1/job")["graph"].is_null());
    let (_, metrics) = get(&addr, "/metrics");
    assert!(metrics.contains("heddle_worker_resident_memory_bytes{"), "{metrics}");
    assert!(!metrics.contains("heddle_task_records_in_total{"), "{metrics}");
    assert!(!metrics.contains("heddle_bytes_sent_total{"), "{metrics}");
    let out = wait_bounded(child, Duration::from_secs(60));
    let rest = drain.join().unwrap();
    assert!(out.status.success(), "{rest}");
    assert!(text(&out.stdout).contains("\"ok\": true"), "{}", text(&out.stdout));
    assert_no_survivors(&mark);
}
