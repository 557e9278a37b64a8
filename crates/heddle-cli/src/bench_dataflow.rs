//! `heddle bench dataflow`: throughput of the dataflow operations (records/s and MB/s) in
//! batch and streaming mode, and streaming latency at a fixed offered rate, for each world
//! size asked for. The measuring program is the example `bench_dataflow`, found next to
//! this executable (`target/release/examples/`), run under `heddle run`.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::bench::child::run_captured;

/// Flags of `heddle bench dataflow`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchDataflowArgs {
    /// World sizes to measure, comma-separated.
    #[arg(long, default_value = "2,4", value_delimiter = ',')]
    ranks: Vec<usize>,
    /// 16-byte records each worker's source sends per measurement (1 KiB records: a sixteenth).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Offered rate of the latency measurement, records per second.
    #[arg(long, default_value_t = 20_000)]
    rate: u64,
    /// Write the measurements as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Seconds one run may take before it is stopped.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

type BoxError = Box<dyn std::error::Error>;

/// Runs the measurements and prints one table. Returns the exit code: 0 when every run
/// succeeded and every result was verified.
pub(crate) fn bench_dataflow(args: &BenchDataflowArgs) -> Result<i32, BoxError> {
    let exe = std::env::current_exe()?;
    let example = exe
        .parent()
        .ok_or("the heddle executable has no directory")?
        .join("examples")
        .join("bench_dataflow");
    if !example.is_file() {
        return Err(format!(
            "{} is missing: build it with `cargo build --release --examples`",
            example.display()
        )
        .into());
    }
    if args.ranks.contains(&0) {
        return Err("--ranks must list positive world sizes".into());
    }
    let mut rows: Vec<serde_json::Value> = Vec::new();
    let mut failed = false;
    for &n in &args.ranks {
        let mut cmd = Command::new(&exe);
        cmd.args(["run", "-n", &n.to_string(), "--"]).arg(&example).args([
            "--records",
            &args.records.to_string(),
            "--rate",
            &args.rate.to_string(),
        ]);
        eprintln!("bench: dataflow on {n} workers");
        let run = run_captured(&mut cmd, Duration::from_secs(args.timeout.max(1)), false)?;
        if !run.status.success() || run.timed_out {
            eprintln!(
                "bench: the run on {n} workers failed ({:?}, timed out: {})",
                run.status, run.timed_out
            );
            failed = true;
        }
        for line in &run.lines {
            let body = line.split_once("] ").map_or(line.as_str(), |(_, rest)| rest);
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
                if v.get("operation").is_some() {
                    failed |= v["verified"] != serde_json::Value::Bool(true);
                    rows.push(v);
                }
            }
        }
    }
    println!("{}", render(&rows));
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&rows)?)?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(i32::from(failed))
}

fn render(rows: &[serde_json::Value]) -> String {
    let mut s = String::from(
        "| operation | mode | workers | record bytes | records/s | MB/s | p50 µs | p99 µs | \
         verified |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    let num = |v: &serde_json::Value, k: &str| v.get(k).and_then(serde_json::Value::as_f64);
    let fmt = |x: Option<f64>, digits: usize| {
        x.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}"))
    };
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r["operation"].as_str().unwrap_or("?"),
            r["mode"].as_str().unwrap_or("?"),
            r["workers"],
            r["record_bytes"],
            fmt(num(r, "records_per_s"), 0),
            fmt(num(r, "mb_per_s"), 1),
            fmt(num(r, "p50_us"), 1),
            fmt(num(r, "p99_us"), 1),
            if r["verified"] == serde_json::Value::Bool(true) { "yes" } else { "NO" }
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_shows_throughput_and_latency_rows() {
        let rows: Vec<serde_json::Value> = vec![
            serde_json::json!({
                "operation": "partition", "mode": "batch", "workers": 2, "record_bytes": 16,
                "records_per_s": 1.5e7, "mb_per_s": 240.0, "verified": true
            }),
            serde_json::json!({
                "operation": "latency", "mode": "streaming", "workers": 2, "record_bytes": 8,
                "p50_us": 3.25, "p99_us": 12.0, "verified": false
            }),
        ];
        let t = render(&rows);
        assert!(
            t.contains("| partition | batch | 2 | 16 | 15000000 | 240.0 | - | - | yes |"),
            "{t}"
        );
        assert!(
            t.contains("| latency | streaming | 2 | 8 | - | - | 3.2 | 12.0 | NO |")
                || t.contains("| latency | streaming | 2 | 8 | - | - | 3.3 | 12.0 | NO |"),
            "{t}"
        );
    }
}
