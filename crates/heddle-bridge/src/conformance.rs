//! The conformance suite every bridge SDK passes (`spec/bridge.md` §9): Heddle's host drives
//! the SDK's *reference filter* through results on every transport, typed and large
//! records, status and pause, live switches, a failing `process`, a refused protocol version
//! and an abort. `heddle bridge conformance -- CMD` runs it; so does each SDK's `make` rule.
//!
//! ```no_run
//! use heddle_bridge::{conformance, FilterCommand, Transport};
//! let cmd = FilterCommand::new("sdk/c/build/reference_filter");
//! let report = conformance::run(&cmd, &Transport::ALL);
//! assert!(report.iter().all(|c| c.passed), "{report:?}");
//! ```

use std::time::{Duration, Instant};

use crate::{Bridge, BridgeConfig, FilterCommand, Record, Transport};

/// The outcome of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// Its name.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// What was checked, or what went wrong.
    pub detail: String,
    /// How long it took.
    pub seconds: f64,
}

type Outcome = Result<String, String>;

/// Inputs of the results cases: text with keys, `f64` arrays, raw bytes (some empty).
pub fn inputs(n: usize) -> Vec<Record> {
    (0..n)
        .map(|i| match i % 3 {
            0 => Record::text(format!("word-{i} é")).with_key(format!("k{i}").into_bytes()),
            1 => Record::f64s(&[i as f64, 0.5, -0.25]),
            _ => Record::bytes(vec![i as u8; i % 7]),
        })
        .collect()
}

/// What the reference filter answers to `input` (spec/bridge.md §9), `finalize` included.
pub fn expected(input: &[Record]) -> Vec<Record> {
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

fn config(t: Transport, extra: &[&str]) -> BridgeConfig {
    let mut args = vec!["records="];
    args.extend_from_slice(extra);
    let mut c = BridgeConfig::new("conformance").transport(t).args(args).credits(8);
    c.start_timeout = Duration::from_secs(20);
    c.idle_timeout = Duration::from_secs(20);
    c
}

/// Runs `input` through the reference filter, switching to `to` before record `at`, and
/// compares with [`expected`].
pub fn run_switched(
    cmd: &FilterCommand,
    first: Transport,
    input: &[Record],
    switches: &[(usize, Transport)],
) -> Outcome {
    let bridge = Bridge::start(cmd, config(first, &[])).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for (i, r) in input.iter().enumerate() {
        for (_, to) in switches.iter().filter(|(at, _)| *at == i) {
            bridge.switch(*to).map_err(|e| e.to_string())?;
        }
        bridge.send(r.clone(), &mut |r| out.push(r)).map_err(|e| e.to_string())?;
    }
    let report = bridge.finish(&mut |r| out.push(r)).map_err(|e| e.to_string())?;
    let want = expected(input);
    if out != want {
        let at =
            out.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(out.len().min(want.len()));
        return Err(format!(
            "{} results where {} were expected; the first difference is at {at}",
            out.len(),
            want.len()
        ));
    }
    Ok(format!(
        "{} records in, {} out; p50 {:.0} µs; switches {:?}",
        report.records_in,
        report.records_out,
        report.diagnostics.latency_p50_us,
        report.diagnostics.switches
    ))
}

fn large(cmd: &FilterCommand, t: Transport) -> Outcome {
    let input = vec![
        Record::bytes((0..3_000_000u32).map(|i| (i % 251) as u8).collect::<Vec<_>>()),
        Record::text("x".repeat(1 << 20)),
        Record::f64s(&vec![0.5; 200_000]),
    ];
    run_switched(cmd, t, &input, &[])
}

fn status_and_pause(cmd: &FilterCommand, t: Transport) -> Outcome {
    let bridge = Bridge::start(cmd, config(t, &[])).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for r in inputs(10) {
        bridge.send(r, &mut |r| out.push(r)).map_err(|e| e.to_string())?;
    }
    bridge.set_paused(true).map_err(|e| e.to_string())?;
    bridge.set_paused(false).map_err(|e| e.to_string())?;
    let s = bridge.status().map_err(|e| e.to_string())?;
    bridge.finish(&mut |r| out.push(r)).map_err(|e| e.to_string())?;
    if s.records_in != 10 || s.records_out + 1 < 10 {
        return Err(format!(
            "STATUS counted {} in and {} out after 10 records",
            s.records_in, s.records_out
        ));
    }
    if out.len() != 11 {
        return Err(format!("{} results after pause and resume, expected 11", out.len()));
    }
    Ok(format!("STATUS {s:?}"))
}

fn switching(cmd: &FilterCommand, transports: &[Transport]) -> Outcome {
    let input = inputs(150);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    let mut details = Vec::new();
    for round in 0..4 {
        let switches: Vec<(usize, Transport)> = (0..3 + round)
            .map(|_| (next(input.len()), transports[next(transports.len())]))
            .collect();
        let first = transports[round % transports.len()];
        details.push(run_switched(cmd, first, &input, &switches)?);
    }
    Ok(details.join("; "))
}

fn process_error(cmd: &FilterCommand, t: Transport) -> Outcome {
    let bridge = Bridge::start(cmd, config(t, &["5"])).map_err(|e| e.to_string())?;
    let mut err = None;
    for r in inputs(40) {
        if let Err(e) = bridge.send(r, &mut |_| {}) {
            err = Some(e);
            break;
        }
    }
    let e = match err {
        Some(e) => e,
        None => match bridge.finish(&mut |_| {}) {
            Ok(_) => return Err("a filter asked to fail at record 5 finished cleanly".into()),
            Err(e) => e,
        },
    }
    .to_string();
    for needle in ["PROCESS", "record 5", "status 2"] {
        if !e.contains(needle) {
            return Err(format!("the error does not name `{needle}`: {e}"));
        }
    }
    Ok(e.lines().next().unwrap_or_default().to_owned())
}

fn version_refused(cmd: &FilterCommand, t: Transport) -> Outcome {
    let cmd = cmd.clone().env("HEDDLE_BRIDGE_TEST_VERSION", "2");
    match Bridge::start(&cmd, config(t, &[])) {
        Ok(_) => Err("a filter speaking version 2 was accepted".into()),
        Err(e) => {
            let e = e.to_string();
            if e.contains("version 1") && e.contains("version 2") {
                Ok(e.lines().next().unwrap_or_default().to_owned())
            } else {
                Err(format!("the error does not name both versions: {e}"))
            }
        }
    }
}

fn abort(cmd: &FilterCommand, t: Transport) -> Outcome {
    let bridge = Bridge::start(cmd, config(t, &[])).map_err(|e| e.to_string())?;
    for r in inputs(5) {
        bridge.send(r, &mut |_| {}).map_err(|e| e.to_string())?;
    }
    let exit = bridge.abort("conformance: abort");
    if exit == "exited with status 3" {
        Ok(exit)
    } else {
        Err(format!("after ABORT the filter {exit} (expected status 3)"))
    }
}

fn timed(name: String, f: impl FnOnce() -> Outcome) -> Case {
    let t0 = Instant::now();
    let r = f();
    let seconds = t0.elapsed().as_secs_f64();
    match r {
        Ok(detail) => Case { name, passed: true, detail, seconds },
        Err(detail) => Case { name, passed: false, detail, seconds },
    }
}

/// Runs every case against the reference filter `cmd` over `transports` (the first is used
/// where one transport is enough).
pub fn run(cmd: &FilterCommand, transports: &[Transport]) -> Vec<Case> {
    let t0 = transports.first().copied().unwrap_or(Transport::Pipe);
    let input = inputs(200);
    let mut cases: Vec<Case> = transports
        .iter()
        .map(|&t| timed(format!("results over {t}"), || run_switched(cmd, t, &input, &[])))
        .collect();
    cases.push(timed("large records".into(), || large(cmd, t0)));
    cases.push(timed("status and pause".into(), || status_and_pause(cmd, t0)));
    if transports.len() > 1 {
        cases.push(timed("live switching".into(), || switching(cmd, transports)));
    }
    cases.push(timed("a failing process".into(), || process_error(cmd, t0)));
    cases.push(timed("another protocol version".into(), || version_refused(cmd, t0)));
    cases.push(timed("abort".into(), || abort(cmd, t0)));
    cases
}
