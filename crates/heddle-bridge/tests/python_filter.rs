//! The host against the pure-Python SDK's reference filter (`sdk/python`), on every
//! transport: results, counts, live switches at random points, pause, status, and each
//! way a filter can fail.

use std::path::PathBuf;
use std::time::Duration;

use heddle_bridge::{conformance, Bridge, BridgeConfig, Error, FilterCommand, Record, Transport};
use proptest::prelude::*;

fn sdk() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../sdk/python")
}

fn reference(extra: &[&str]) -> (FilterCommand, BridgeConfig) {
    let cmd = FilterCommand::new("python3")
        .arg(sdk().join("tests/reference_filter.py").display().to_string());
    let mut args = vec!["records="];
    args.extend_from_slice(extra);
    (cmd, BridgeConfig::new("reference").args(args))
}

fn run(t: Transport, input: &[Record], switches: &[(usize, Transport)]) {
    if let Err(e) = conformance::run_switched(&reference(&[]).0, t, input, switches) {
        panic!("{t} with switches {switches:?}: {e}");
    }
}

#[test]
fn the_python_sdk_passes_the_conformance_suite() {
    let cases = conformance::run(&reference(&[]).0, &Transport::ALL);
    for c in &cases {
        eprintln!(
            "{} {}: {} ({:.2} s)",
            if c.passed { "PASS" } else { "FAIL" },
            c.name,
            c.detail,
            c.seconds
        );
    }
    assert!(cases.iter().all(|c| c.passed));
    assert!(cases.len() >= 10);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    /// Switches at random points between random transports: nothing lost, repeated or
    /// reordered.
    #[test]
    fn switching_loses_nothing(points in prop::collection::vec((0usize..120, 0usize..4), 1..5)) {
        let input = conformance::inputs(120);
        let switches: Vec<(usize, Transport)> =
            points.iter().map(|&(at, t)| (at, Transport::ALL[t])).collect();
        let got = conformance::run_switched(&reference(&[]).0, Transport::Pipe, &input, &switches);
        prop_assert!(got.is_ok(), "{:?}", got);
    }
}

fn start_err(cmd: FilterCommand, cfg: BridgeConfig) -> Error {
    Bridge::start(&cmd, cfg).expect_err("the bridge should not start")
}

#[test]
fn a_missing_program_is_named() {
    let e = start_err(FilterCommand::new("no-such-filter-xyz"), BridgeConfig::new("t"));
    let s = e.to_string();
    assert!(s.contains("no-such-filter-xyz") && s.contains("PATH"), "{s}");
}

#[test]
fn a_crash_reports_status_and_stderr() {
    let cmd = FilterCommand::new("sh").arg("-c").arg("echo 'boom: bad config' >&2; exit 7");
    let s = start_err(cmd, BridgeConfig::new("crashy").transport(Transport::Unix)).to_string();
    assert!(
        s.contains("crashy#0") && s.contains("status 7") && s.contains("boom: bad config"),
        "{s}"
    );
}

#[test]
fn garbage_is_refused_not_trusted() {
    let cmd = FilterCommand::new("sh").arg("-c").arg(
        "echo this is not a Heddle frame at all, just some text the program printed; sleep 30",
    );
    let s = start_err(cmd, BridgeConfig::new("garbage")).to_string();
    assert!(s.contains("garbage#0") && s.contains("not") && s.contains("magic"), "{s}");
}

#[test]
fn a_hung_filter_times_out_and_is_killed() {
    let cmd = FilterCommand::new("sleep").arg("30");
    let mut cfg = BridgeConfig::new("hung");
    cfg.start_timeout = Duration::from_millis(500);
    let t0 = std::time::Instant::now();
    let s = start_err(cmd, cfg).to_string();
    assert!(t0.elapsed() < Duration::from_secs(5), "took {:?}", t0.elapsed());
    assert!(s.contains("hung#0") && s.contains("signal"), "{s}");
}

/// A filter that answers, then goes silent in the middle of a record: the host's wait
/// ends at `idle_timeout` after the filter was last heard from, not at the caller's limit.
#[test]
fn a_filter_silent_past_the_idle_timeout_fails_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("silent.py");
    let body = format!(
        "import sys, time\nsys.path.insert(0, {:?})\nimport heddle_bridge as hb\n\
         class Silent(hb.Filter):\n    def process(self, record, emit):\n        \
         if bytes(record.payload) == b'hang':\n            time.sleep(30)\n        \
         emit(hb.Record(record.payload, record.codec, record.key))\n\
         hb.run(Silent())\n",
        sdk().display().to_string()
    );
    std::fs::write(&script, body).unwrap();
    let cmd = FilterCommand::new("python3").arg(script.display().to_string());
    for t in [Transport::Pipe, Transport::Shm] {
        let mut cfg = BridgeConfig::new("silent").transport(t);
        cfg.idle_timeout = Duration::from_millis(700);
        let bridge = Bridge::start(&cmd, cfg).unwrap();
        bridge.send(Record::bytes(b"one".to_vec()), &mut |_| {}).unwrap();
        let got = bridge.recv(Duration::from_secs(10)).unwrap().expect("a result");
        assert_eq!(got.payload, b"one");
        bridge.send(Record::bytes(b"hang".to_vec()), &mut |_| {}).unwrap();
        let t0 = std::time::Instant::now();
        let e = bridge.recv(Duration::from_secs(20)).expect_err("the filter hangs").to_string();
        assert!(t0.elapsed() < Duration::from_secs(5), "{t}: took {:?}", t0.elapsed());
        assert!(e.contains("silent#0") && e.contains("a result"), "{t}: {e}");
    }
}

#[test]
fn a_record_above_the_limit_is_refused_before_sending() {
    let (cmd, cfg) = reference(&[]);
    let bridge = Bridge::start(&cmd, cfg.max_record(100)).unwrap();
    let e = bridge.send(Record::bytes(vec![0; 101]), &mut |_| {}).unwrap_err();
    assert!(matches!(e, Error::RecordTooLarge { record: 0, size: 101, limit: 100 }), "{e}");
    let mut out = Vec::new();
    bridge.send(Record::text("ok"), &mut |r| out.push(r)).unwrap();
    bridge.finish(&mut |r| out.push(r)).unwrap();
    assert_eq!(out[0].as_text(), Some("OK"));
}

#[test]
fn every_pair_of_transports_switches_both_ways() {
    let input = conformance::inputs(20);
    for a in Transport::ALL {
        for b in Transport::ALL {
            run(a, &input, &[(5, b), (9, a)]);
        }
    }
}

#[test]
fn a_policy_moves_large_records_to_shared_memory() {
    let policy =
        heddle_bridge::Policy::parse("record_bytes > 4KiB -> shm; open_sockets > 100000 -> pipe")
            .unwrap();
    let (cmd, cfg) = reference(&[]);
    let bridge = Bridge::start(&cmd, cfg.credits(8).policy(policy)).unwrap();
    let mut out = Vec::new();
    let small: Vec<Record> = (0..300).map(|i| Record::bytes(vec![i as u8; 100])).collect();
    let large: Vec<Record> = (0..300).map(|i| Record::bytes(vec![i as u8; 10_000])).collect();
    for r in &small {
        bridge.send(r.clone(), &mut |x| out.push(x)).unwrap();
    }
    assert_eq!(bridge.transport(), Transport::Pipe, "small records stay on the pipe");
    for r in &large {
        bridge.send(r.clone(), &mut |x| out.push(x)).unwrap();
    }
    let d = bridge.diagnostics();
    assert_eq!(d.transport, Transport::Shm);
    assert_eq!(d.switch_reasons.len(), 1, "{:?}", d.switch_reasons);
    assert!(d.switch_reasons[0].contains("record_bytes > 4KiB -> shm"), "{:?}", d.switch_reasons);
    bridge.finish(&mut |x| out.push(x)).unwrap();
    let want: Vec<Record> = small.into_iter().chain(large).collect();
    assert!(out[..600] == want[..], "every record back, in order, across the switch");
}

#[test]
fn bad_policies_are_refused_by_rule() {
    for (text, needle) in [
        ("record_bytes > 4KiB", "expected `METRIC OP VALUE -> TRANSPORT`"),
        ("latency > 5 -> shm", "unknown metric `latency`"),
        ("p99_us > 5 parsecs -> shm", "unknown unit"),
        ("p99_us = 5 -> shm", "no comparison"),
        ("p99_us > 5 -> carrier-pigeon", "unknown bridge transport"),
        ("", "empty policy"),
    ] {
        let e = heddle_bridge::Policy::parse(text).unwrap_err().to_string();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn many_results_per_record_flow_past_the_hosts_complete() {
    let cmd = FilterCommand::new("python3")
        .arg(sdk().join("tests/fanout_filter.py").display().to_string());
    for t in [Transport::Pipe, Transport::Shm] {
        let bridge =
            Bridge::start(&cmd, BridgeConfig::new("fanout").transport(t).credits(4).args(["25"]))
                .unwrap();
        let mut out = Vec::new();
        for i in 0..40 {
            bridge.send(Record::text(format!("r{i}")), &mut |r| out.push(r)).unwrap();
        }
        let report = bridge.finish(&mut |r| out.push(r)).unwrap();
        assert_eq!(report.records_out, 40 * 25, "over {t}");
        let want: Vec<String> =
            (0..40).flat_map(|i| (0..25).map(move |j| format!("r{i}.{j}"))).collect();
        let got: Vec<String> = out.iter().map(|r| r.as_text().unwrap().to_owned()).collect();
        assert!(got == want, "over {t}: {} results", got.len());
    }
}
