//! The streaming benchmark over a real `redis-server`: `examples/ad_benchmark` produces ad
//! events into a Redis stream, counts views per campaign in event-time windows on 1 and 3
//! workers, writes the results to Redis and checks them against its generator's tally.
//! Here the results are also read back from Redis and checked independently: per window
//! and campaign, the counts of the events found in the input stream itself.

mod common;

use std::collections::HashMap;

use common::redis::Redis;
use common::{assert_no_survivors, example, marker, run};

/// Views per (campaign, window start) in the input stream, from the entries' JSON and the
/// campaign table in Redis.
fn views_in_input(c: &mut redis::Connection, window_ms: u64) -> HashMap<(String, u64), u64> {
    let table: HashMap<String, String> =
        redis::cmd("HGETALL").arg("ad-events:campaigns").query(c).unwrap();
    let input: redis::streams::StreamRangeReply =
        redis::cmd("XRANGE").arg("ad-events").arg("-").arg("+").query(c).unwrap();
    let mut views = HashMap::new();
    for entry in input.ids {
        let Some(json) = entry.get::<String>("event") else { continue };
        let ev: serde_json::Value = serde_json::from_str(&json).unwrap();
        if ev["event_type"] == "view" {
            let t = ev["event_time"].as_u64().unwrap();
            let campaign = table[ev["ad_id"].as_str().unwrap()].clone();
            *views.entry((campaign, t - t % window_ms)).or_default() += 1;
        }
    }
    views
}

/// Window results in the output stream: (campaign, start) → count.
fn results(c: &mut redis::Connection) -> HashMap<(String, u64), u64> {
    let out: redis::streams::StreamRangeReply =
        redis::cmd("XRANGE").arg("ad-counts").arg("-").arg("+").query(c).unwrap();
    let mut got = HashMap::new();
    for entry in out.ids {
        let line: String = entry.get("value").unwrap();
        let parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 4, "`campaign start count lag`: {line}");
        let prev = got
            .insert((parts[0].to_string(), parts[1].parse().unwrap()), parts[2].parse().unwrap());
        assert!(prev.is_none(), "a window result came twice: {line}");
    }
    got
}

#[test]
fn ad_events_are_counted_per_campaign_and_window_exactly() {
    let redis = Redis::start("ad-benchmark");
    let (url, program) = (redis.url(), example("ad_benchmark"));
    for workers in ["1", "3"] {
        let mark = marker("ad-benchmark");
        let args = [
            "run",
            "-n",
            workers,
            "--",
            &program,
            "--redis",
            &url,
            "--rate",
            "4000",
            "--seconds",
            "2.5",
            "--window-s",
            "0.5",
            "--campaigns",
            "20",
        ];
        let (out, _) = run(&mark, &args);
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{workers} workers: {stderr}\n{stdout}");
        let line = stdout.lines().find_map(|l| l.split_once("] ").map(|x| x.1)).unwrap();
        let summary: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(summary["correct"], true, "{line}");
        assert_eq!(summary["events"], 10_000, "{line}");
        assert!(summary["latency_p99_ms"].as_i64().is_some(), "windows fired early: {line}");
        let mut c = redis.conn();
        let (want, got) = (views_in_input(&mut c, 500), results(&mut c));
        assert!(want.len() >= 20 * 5, "{} windows", want.len());
        assert_eq!(got, want, "{workers} workers: the results in Redis against the input");
        assert_no_survivors(&mark);
    }
}

#[test]
fn an_unreachable_redis_is_named_in_the_error() {
    let mark = marker("ad-benchmark-unreachable");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("redis://127.0.0.1:{port}/");
    let program = example("ad_benchmark");
    let (out, _) = run(&mark, &["run", "-n", "2", "--", &program, "--redis", &url]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains(&format!("cannot reach Redis at {url}")), "{stderr}");
    assert_no_survivors(&mark);
}
