//! The host against the pure-Python SDK's reference filter (`sdk/python`), on every
//! transport: results, counts, live switches at random points, pause, status, and each
//! way a filter can fail.

use std::path::PathBuf;
use std::time::Duration;

use heddle_bridge::{Bridge, BridgeConfig, Error, FilterCommand, Record, Transport};
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

fn inputs(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| match i % 3 {
            0 => Record::text(format!("word-{i}")).with_key(format!("k{i}").into_bytes()),
            1 => Record::f64s(&[i as f64, 0.5]),
            _ => Record::bytes(vec![i as u8; i % 7]),
        })
        .collect()
}

fn expected(input: &[Record]) -> Vec<Record> {
    let mut out: Vec<Record> = input
        .iter()
        .map(|r| {
            if let Some(t) = r.as_text() {
                Record::text(t.to_ascii_uppercase()).with_key(r.key.clone())
            } else if let Some(v) = r.to_f64s() {
                Record::f64s(&[v.iter().sum()]).with_key(r.key.clone())
            } else {
                r.clone()
            }
        })
        .collect();
    out.push(Record::text(format!("records={}", input.len())));
    out
}

fn run(t: Transport, input: &[Record], switches: &[(usize, Transport)]) -> Vec<Record> {
    let (cmd, cfg) = reference(&[]);
    let bridge = Bridge::start(&cmd, cfg.transport(t).credits(8)).unwrap();
    let mut out = Vec::new();
    for (i, r) in input.iter().enumerate() {
        for (_, to) in switches.iter().filter(|(at, _)| *at == i) {
            bridge.switch(*to).unwrap();
            assert_eq!(bridge.transport(), *to);
        }
        bridge.send(r.clone(), &mut |r| out.push(r)).unwrap();
    }
    let report = bridge.finish(&mut |r| out.push(r)).unwrap();
    assert_eq!(
        (report.records_in, report.records_out),
        (input.len() as u64, input.len() as u64 + 1)
    );
    out
}

#[test]
fn every_transport_gives_the_reference_results() {
    let input = inputs(200);
    for t in Transport::ALL {
        assert_eq!(run(t, &input, &[]), expected(&input), "over {t}");
    }
}

#[test]
fn large_records_are_fragmented_and_reassembled() {
    let (cmd, cfg) = reference(&[]);
    let bridge = Bridge::start(&cmd, cfg.transport(Transport::Unix)).unwrap();
    let big = Record::bytes((0..3_000_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>());
    let mut out = Vec::new();
    bridge.send(big.clone(), &mut |r| out.push(r)).unwrap();
    bridge.finish(&mut |r| out.push(r)).unwrap();
    assert_eq!(out[0], big);
}

#[test]
fn status_and_pause_are_answered() {
    let (cmd, cfg) = reference(&[]);
    let bridge = Bridge::start(&cmd, cfg).unwrap();
    let mut out = Vec::new();
    for r in inputs(10) {
        bridge.send(r, &mut |r| out.push(r)).unwrap();
    }
    bridge.set_paused(true).unwrap();
    bridge.set_paused(false).unwrap();
    let s = bridge.status().unwrap();
    assert_eq!(s.records_in, 10);
    assert!(s.open_fds >= 3 && s.rss_bytes > 1 << 20, "{s:?}");
    bridge.finish(&mut |r| out.push(r)).unwrap();
    assert_eq!(out.len(), 11);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, .. ProptestConfig::default() })]
    /// Switches at random points between random transports: nothing lost, repeated or
    /// reordered.
    #[test]
    fn switching_loses_nothing(points in prop::collection::vec((0usize..120, 0usize..4), 1..5)) {
        let input = inputs(120);
        let switches: Vec<(usize, Transport)> =
            points.iter().map(|&(at, t)| (at, Transport::ALL[t])).collect();
        prop_assert_eq!(run(Transport::Pipe, &input, &switches), expected(&input));
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

#[test]
fn another_protocol_version_is_refused_naming_both() {
    let (cmd, cfg) = reference(&[]);
    let cmd = cmd.env("HEDDLE_BRIDGE_TEST_VERSION", "2");
    let s = start_err(cmd, cfg).to_string();
    assert!(s.contains("version 1") && s.contains("version 2"), "{s}");
}

#[test]
fn a_failing_process_names_the_record_and_the_error() {
    let (cmd, cfg) = reference(&["5"]);
    let bridge = Bridge::start(&cmd, cfg).unwrap();
    let mut out = Vec::new();
    let mut err = None;
    for r in inputs(50) {
        if let Err(e) = bridge.send(r, &mut |r| out.push(r)) {
            err = Some(e);
            break;
        }
    }
    let e = match err {
        Some(e) => e,
        None => bridge.finish(&mut |r| out.push(r)).unwrap_err(),
    };
    let s = e.to_string();
    assert!(s.contains("PROCESS") && s.contains("record 5") && s.contains("asked to fail"), "{s}");
    assert!(s.contains("status 2"), "{s}");
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
    let input = inputs(20);
    for a in Transport::ALL {
        for b in Transport::ALL {
            assert_eq!(run(a, &input, &[(5, b), (9, a)]), expected(&input), "{a} -> {b}");
        }
    }
}
