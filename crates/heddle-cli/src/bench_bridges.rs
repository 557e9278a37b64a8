//! `heddle bench bridges`: what a bridge costs, per language × transport × record size —
//! the median round trip of one record through each SDK's reference filter (an echo for raw
//! bytes), next to a protocol-free ping-pong in C over the same transport measured in the
//! same run (`raw_pingpong`), the throughput of a pipelined stream of records, the time a
//! live switch into the transport takes, and the records lost or reordered across switches
//! (must be 0).
//!
//! The filters come from a source checkout (`examples/bridges/build.sh` builds them into
//! `target/bridges/`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use heddle_bridge::{Bridge, BridgeConfig, FilterCommand, Record, Transport};

/// Flags of `heddle bench bridges`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchBridgesArgs {
    /// Print one JSON object per row instead of a table.
    #[arg(long)]
    json: bool,
    /// Languages to measure.
    #[arg(long, default_value = "c,python,go,java", value_delimiter = ',')]
    languages: Vec<String>,
    /// Record sizes in bytes.
    #[arg(long, default_value = "8,1024,65536,1048576", value_delimiter = ',')]
    sizes: Vec<usize>,
    /// Scales every iteration count (0.1 for a quick look).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
}

struct Row {
    language: String,
    transport: Transport,
    bytes: usize,
    rtt_us: f64,
    raw_rtt_us: f64,
    mb_s: f64,
    switch_us: f64,
    lost: u64,
}

fn root() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let root = exe.parent().and_then(Path::parent).and_then(Path::parent).map(Path::to_path_buf);
    match root {
        Some(r) if r.join("examples/bridges/build.sh").exists() => Ok(r),
        _ => Err("heddle bench bridges runs from a source checkout (target/release/heddle)".into()),
    }
}

/// The reference filter of `language` and the transports its SDK speaks.
fn filter(root: &Path, language: &str) -> Result<(FilterCommand, Vec<Transport>), String> {
    let b = root.join("target/bridges");
    let all = Transport::ALL.to_vec();
    Ok(match language {
        "c" => (FilterCommand::new(b.join("c_reference_filter").display().to_string()), all),
        "python" => (
            FilterCommand::new("python3")
                .arg(root.join("sdk/python/tests/reference_filter.py").display().to_string()),
            all,
        ),
        "go" => (FilterCommand::new(b.join("go_reference_filter").display().to_string()), all),
        "java" => {
            let cp = std::fs::read_to_string(b.join("java-tests.classpath"))
                .map_err(|e| e.to_string())?;
            let cmd = FilterCommand::new("java")
                .args(["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp.trim()])
                .arg("dev.heddle.bridge.ReferenceFilter");
            (cmd, all)
        }
        other => return Err(format!("unknown language `{other}`: use c, python, go or java")),
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn iterations(bytes: usize, scale: f64) -> usize {
    let base = match bytes {
        0..=4096 => 2000,
        4097..=131_072 => 300,
        _ => 40,
    };
    ((base as f64 * scale) as usize).max(5)
}

fn start(cmd: &FilterCommand, t: Transport) -> Result<Bridge, String> {
    Bridge::start(cmd, BridgeConfig::new("bench").transport(t).credits(64))
        .map_err(|e| e.to_string())
}

/// Median round trip and pipelined throughput of `bytes`-byte records.
fn measure(
    cmd: &FilterCommand,
    t: Transport,
    bytes: usize,
    scale: f64,
) -> Result<(f64, f64), String> {
    let bridge = start(cmd, t)?;
    let payload = vec![7u8; bytes];
    let n = iterations(bytes, scale);
    let mut rtts = Vec::with_capacity(n);
    for i in 0..n + 20 {
        let t0 = Instant::now();
        bridge.send(Record::bytes(payload.clone()), &mut |_| {}).map_err(|e| e.to_string())?;
        let got = bridge.recv(Duration::from_secs(30)).map_err(|e| e.to_string())?;
        if got.map(|r| r.payload.len()) != Some(bytes) {
            return Err(format!("round trip {i} did not come back whole"));
        }
        if i >= 20 {
            rtts.push(t0.elapsed().as_secs_f64() * 1e6);
        }
    }
    let total = ((64usize << 20) / bytes.max(1)).clamp(200, 20_000);
    let total = ((total as f64 * scale) as usize).max(20);
    let mut back = 0usize;
    let t0 = Instant::now();
    for _ in 0..total {
        bridge
            .send(Record::bytes(payload.clone()), &mut |_| back += 1)
            .map_err(|e| e.to_string())?;
    }
    bridge.finish(&mut |_| back += 1).map_err(|e| e.to_string())?;
    let secs = t0.elapsed().as_secs_f64();
    if back != total + 1 {
        return Err(format!("{back} results for {total} records"));
    }
    Ok((median(rtts), (total * bytes) as f64 / secs / 1e6))
}

/// Switches into each transport from another while records flow; the median switch time
/// per target, and the records lost, repeated or reordered (compared one by one).
fn switching(
    cmd: &FilterCommand,
    ts: &[Transport],
) -> Result<(Vec<(Transport, f64)>, u64), String> {
    let bridge = start(cmd, ts[0])?;
    let mut times: Vec<(Transport, f64)> = Vec::new();
    let mut got: Vec<Record> = Vec::new();
    let mut sent = 0u64;
    for round in 0..6 {
        for &to in ts.iter().skip(usize::from(round == 0)) {
            for _ in 0..10 {
                let r = Record::bytes(sent.to_le_bytes().to_vec());
                bridge.send(r, &mut |x| got.push(x)).map_err(|e| e.to_string())?;
                sent += 1;
            }
            let d = bridge.switch(to).map_err(|e| e.to_string())?;
            times.push((to, d.as_secs_f64() * 1e6));
        }
    }
    bridge.finish(&mut |x| got.push(x)).map_err(|e| e.to_string())?;
    let echoed: Vec<u64> = got
        .iter()
        .filter(|r| r.payload.len() == 8)
        .map(|r| u64::from_le_bytes(r.payload[..8].try_into().unwrap_or_default()))
        .collect();
    let lost = (0..sent)
        .zip(echoed.iter().copied().chain(std::iter::repeat(u64::MAX)))
        .filter(|(a, b)| a != b)
        .count() as u64
        + echoed.len().saturating_sub(sent as usize) as u64;
    let per = ts
        .iter()
        .map(|t| (*t, median(times.iter().filter(|(x, _)| x == t).map(|(_, d)| *d).collect())))
        .collect();
    Ok((per, lost))
}

fn raw_rtt(root: &Path, t: Transport, bytes: usize, scale: f64) -> f64 {
    let out = Command::new(root.join("target/bridges/raw_pingpong"))
        .args([t.name(), &bytes.to_string(), &iterations(bytes, scale).to_string()])
        .output();
    out.ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(f64::NAN)
}

pub(crate) fn bench_bridges(args: &BenchBridgesArgs) -> Result<i32, String> {
    let root = root()?;
    let status =
        Command::new(root.join("examples/bridges/build.sh")).status().map_err(|e| e.to_string())?;
    if !status.success() {
        return Err(format!("building the filters failed ({status})"));
    }
    let mut rows = Vec::new();
    for language in &args.languages {
        let (cmd, transports) = filter(&root, language)?;
        let (switches, lost) = switching(&cmd, &transports)?;
        for &t in &transports {
            for &bytes in &args.sizes {
                let (rtt_us, mb_s) = measure(&cmd, t, bytes, args.scale)?;
                let raw_rtt_us = raw_rtt(&root, t, bytes, args.scale);
                let switch_us =
                    switches.iter().find(|(x, _)| *x == t).map_or(f64::NAN, |(_, d)| *d);
                let row = Row {
                    language: language.clone(),
                    transport: t,
                    bytes,
                    rtt_us,
                    raw_rtt_us,
                    mb_s,
                    switch_us,
                    lost,
                };
                print_row(&row, args.json);
                rows.push(row);
            }
        }
    }
    Ok(i32::from(rows.iter().any(|r| r.lost != 0)))
}

fn print_row(r: &Row, json: bool) {
    if json {
        let v = serde_json::json!({
            "language": r.language, "transport": r.transport.name(), "bytes": r.bytes,
            "rtt_us": round(r.rtt_us), "raw_rtt_us": round(r.raw_rtt_us),
            "throughput_mb_s": round(r.mb_s), "switch_us": round(r.switch_us), "lost": r.lost,
        });
        println!("{v}");
    } else {
        println!(
            "{:<7} {:<5} {:>8} B  rtt {:>9.1} µs  raw {:>8.1} µs  ({:>5.1}×)  {:>8.1} MB/s  switch {:>8.0} µs  lost {}",
            r.language, r.transport.name(), r.bytes, r.rtt_us, r.raw_rtt_us, r.rtt_us / r.raw_rtt_us, r.mb_s, r.switch_us, r.lost
        );
    }
}

fn round(x: f64) -> Option<f64> {
    x.is_finite().then(|| (x * 100.0).round() / 100.0)
}
