//! `heddle bench recovery`: what checkpoints cost and how fast a killed job is back.
//!
//! 1. Throughput of the `stream_window` example with and without checkpoints (interval
//!    `--interval`), runs interleaved, medians compared: the loss in percent.
//! 2. Checkpoint duration (trigger to last acknowledgement) p50 / p99 and size, from the
//!    checkpointed runs' `history.jsonl`.
//! 3. Recovery: the `exactly_once` example on `--workers` workers under `heddle run
//!    --restarts`; one worker is SIGKILLed, and the time from the kill to the new attempt's
//!    first output (its first committed part file) is measured, `--kills` times.
//!
//! The examples are found next to this executable (`target/release/examples/`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::bench::child::run_captured;

/// Flags of `heddle bench recovery`.
#[derive(Debug, clap::Args)]
pub(crate) struct BenchRecoveryArgs {
    /// Workers of every run.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Events of each stream_window run (30 M: 7–9 s and several checkpoints a run).
    #[arg(long, default_value_t = 30_000_000)]
    events: u64,
    /// Seconds between checkpoints in the checkpointed runs.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Runs of each kind (with and without checkpoints), interleaved.
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Kills (recoveries) to time.
    #[arg(long, default_value_t = 5)]
    kills: usize,
    /// Write the figures as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
}

type BoxError = Box<dyn std::error::Error>;

fn example(name: &str) -> Result<PathBuf, BoxError> {
    let exe = std::env::current_exe()?;
    let p = exe.parent().ok_or("no directory")?.join("examples").join(name);
    if !p.is_file() {
        return Err(format!("{} is missing: cargo build --release --examples", p.display()).into());
    }
    Ok(p)
}

/// A fresh private scratch directory, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Result<Scratch, BoxError> {
        let p = std::env::temp_dir().join(format!("heddle-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p)?;
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o700))?;
        Ok(Scratch(p))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    percentile(&xs, 0.5)
}

/// One stream_window run; returns its records/s (and, checkpointed, the history lines).
fn window_run(
    args: &BenchRecoveryArgs,
    ckpt: Option<&Path>,
) -> Result<(f64, Vec<serde_json::Value>), BoxError> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(&exe);
    cmd.args(["run", "-n", &args.workers.to_string()]);
    if let Some(dir) = ckpt {
        let _ = std::fs::remove_dir_all(dir);
        cmd.args(["--checkpoint-interval", &args.interval.to_string()]);
        cmd.arg("--checkpoint-dir").arg(dir);
    }
    cmd.arg("--").arg(example("stream_window")?);
    cmd.args(["--generate", "--events", &args.events.to_string()]);
    let run = run_captured(&mut cmd, Duration::from_secs(600), false)?;
    if !run.status.success() {
        return Err(format!("stream_window failed: {:?}", run.status).into());
    }
    let rate = run
        .lines
        .iter()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.split_once("] ")?.1).ok())
        .find_map(|v| v.get("records_per_s").and_then(serde_json::Value::as_f64))
        .ok_or("stream_window printed no records_per_s")?;
    let history = ckpt
        .and_then(|d| std::fs::read_to_string(d.join("history.jsonl")).ok())
        .map(|t| t.lines().filter_map(|l| serde_json::from_str(l).ok()).collect())
        .unwrap_or_default();
    Ok((rate, history))
}

/// Writes the exactly_once input: `files` files of `lines` lines `ID KEY`.
fn exactly_once_input(dir: &Path, files: usize, lines: usize) -> Result<(), BoxError> {
    std::fs::create_dir_all(dir)?;
    let mut id = 0u64;
    for f in 0..files {
        let mut text = String::with_capacity(lines * 12);
        for _ in 0..lines {
            id += 1;
            text.push_str(&format!("{id} k{}\n", id * 2_654_435_761 % 1000));
        }
        std::fs::write(dir.join(format!("part-{f}.txt")), text)?;
    }
    Ok(())
}

/// The highest checkpoint id among the committed part files of `out`.
fn newest_part(out: &Path) -> u64 {
    std::fs::read_dir(out)
        .map(|d| {
            d.flatten()
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().to_string();
                    name.strip_prefix("part-")?.split('-').nth(1)?.parse::<u64>().ok()
                })
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0)
}

/// Worker processes of a run: children of the launcher `pid` running the example (not
/// its guardian, nor a worker already dead).
fn workers_of(pid: u32) -> Vec<u32> {
    let out = Command::new("pgrep").args(["-P", &pid.to_string()]).output();
    let children: Vec<u32> = out
        .map(|o| {
            let text = String::from_utf8_lossy(&o.stdout).to_string();
            text.split_whitespace().filter_map(|p| p.parse().ok()).collect()
        })
        .unwrap_or_default();
    children
        .into_iter()
        .filter(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            cmdline.split(|&b| b == 0).next().unwrap_or_default().ends_with(b"/exactly_once")
        })
        .collect()
}

/// Kills one worker of a running exactly_once job, `kills` times; returns the seconds from
/// each kill to the next committed output.
fn recoveries(args: &BenchRecoveryArgs, scratch: &Path) -> Result<Vec<f64>, BoxError> {
    let (input, out, ckpt) = (scratch.join("in"), scratch.join("out"), scratch.join("ckpt"));
    exactly_once_input(&input, args.workers, 400_000)?;
    let exe = std::env::current_exe()?;
    let mut child = Command::new(&exe)
        .args(["run", "-n", &args.workers.to_string(), "--restarts", &(args.kills + 1).to_string()])
        .arg("--")
        .arg(example("exactly_once")?)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&out)
        .arg("--checkpoint-dir")
        .arg(&ckpt)
        .args(["--checkpoint-ms", "100", "--rate", "100000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut times = Vec::new();
    for k in 0..args.kills {
        // Let the attempt run and commit output first.
        let settle = Instant::now() + Duration::from_secs(30);
        let before = newest_part(&out);
        while newest_part(&out) < before + 3 && Instant::now() < settle {
            std::thread::sleep(Duration::from_millis(20));
        }
        let pids = workers_of(child.id());
        let Some(&victim) = pids.get(k % pids.len().max(1)) else { break };
        let seen = newest_part(&out);
        let killed = Instant::now();
        Command::new("kill").args(["-KILL", &victim.to_string()]).status()?;
        // The old attempt may still commit a checkpoint in flight: wait for output past it
        // from the new attempt (its workers are new processes).
        let until = killed + Duration::from_secs(60);
        while Instant::now() < until {
            let now_workers = workers_of(child.id());
            if newest_part(&out) > seen + 1 && !now_workers.contains(&victim) {
                times.push(killed.elapsed().as_secs_f64());
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    Ok(times)
}

/// Runs the measurements and prints the table. Returns the exit code.
pub(crate) fn bench_recovery(args: &BenchRecoveryArgs) -> Result<i32, BoxError> {
    if args.workers == 0 || args.repeat == 0 || args.interval.is_nan() || args.interval <= 0.0 {
        return Err("--workers, --repeat and --interval must be above 0".into());
    }
    let scratch = Scratch::new("recovery")?;
    let (mut plain, mut checked, mut history) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..args.repeat {
        eprintln!(
            "bench: stream_window run {} of {} (without, then with checkpoints)",
            r + 1,
            args.repeat
        );
        plain.push(window_run(args, None)?.0);
        let (rate, h) = window_run(args, Some(&scratch.0.join(format!("ckpt-{r}"))))?;
        checked.push(rate);
        history.extend(h.into_iter().filter(|v| v["last"] != serde_json::Value::Bool(true)));
    }
    let mut durations: Vec<f64> =
        history.iter().filter_map(|v| v["duration_ms"].as_f64()).collect();
    durations.sort_by(f64::total_cmp);
    let sizes: Vec<f64> = history.iter().filter_map(|v| v["bytes"].as_f64()).collect();
    eprintln!("bench: {} kills of one exactly_once worker of {}", args.kills, args.workers);
    let recover = recoveries(args, &scratch.0.join("recover"))?;
    let (p, c) = (median(plain.clone()), median(checked.clone()));
    let figures = serde_json::json!({
        "workers": args.workers,
        "events": args.events,
        "interval_s": args.interval,
        "records_per_s_without": p,
        "records_per_s_with": c,
        "throughput_loss_percent": (p - c) / p * 100.0,
        "runs_without": plain,
        "runs_with": checked,
        "checkpoints": durations.len(),
        "checkpoint_p50_ms": percentile(&durations, 0.5),
        "checkpoint_p99_ms": percentile(&durations, 0.99),
        "checkpoint_bytes_median": median(sizes),
        "recovery_s": recover,
        "recovery_median_s": median(recover.clone()),
    });
    println!("| figure | Heddle | goal | Flink (for scale) |");
    println!("|---|---:|---:|---:|");
    println!("| stream_window records/s without checkpoints | {p:.0} | | |");
    println!("| with checkpoints every {} s | {c:.0} | | |", args.interval);
    println!(
        "| throughput loss | {:.1} % | < 3 % | |",
        figures["throughput_loss_percent"].as_f64().unwrap_or(f64::NAN)
    );
    println!(
        "| checkpoint duration p50 / p99 ({} checkpoints) | {:.1} / {:.1} ms | p99 < 50 ms \
         | p50 0.3–5 s |",
        durations.len(),
        percentile(&durations, 0.5),
        percentile(&durations, 0.99)
    );
    println!(
        "| checkpoint size (median) | {:.0} bytes | | |",
        figures["checkpoint_bytes_median"].as_f64().unwrap_or(0.0)
    );
    println!(
        "| kill to first output of the new attempt (median of {}) | {:.2} s | < 2 s | 20–65 s |",
        recover.len(),
        figures["recovery_median_s"].as_f64().unwrap_or(f64::NAN)
    );
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)?;
        eprintln!("bench: wrote {}", path.display());
    }
    Ok(i32::from(recover.len() < args.kills))
}
