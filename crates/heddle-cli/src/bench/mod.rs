//! `heddle bench collectives --vs mpi`: Heddle and Open MPI (mpi4py) side by side, with ratios.
//!
//! Both systems run the same collectives in the same invocation, and the results are printed
//! side by side with the ratio. This module is only the orchestration:
//!
//! * the Heddle side is the example `target/release/examples/bench_collectives` (built with
//!   `cargo build --release --examples`), launched as
//!   `heddle run -n R -- <example> --sizes … --collectives … [--quick]`;
//! * the MPI side is `benches/mpi/bench_collectives.py`, launched with `mpirun` from the
//!   virtualenv that `benches/mpi/setup.sh` creates (and prints on its last line).
//!
//! Both print one JSON object per line per measurement (the semantics, timing rules and format
//! are specified in the docstring of `benches/mpi/bench_collectives.py`), such as this one
//! (wrapped here):
//!
//! ```text
//! {"system": "mpi", "collective": "allreduce", "ranks": 2, "bytes": 8,
//!  "p50_us": 0.957, "p99_us": 1.513, "iters": 2000, "verified": true}
//! ```
//!
//! Bandwidth lines add `"gbps"`. `heddle run` prefixes worker output with `[N] `; that prefix is
//! stripped, and lines that are not such JSON objects are passed through to stderr.
//!
//! The parts: [`args`] (flags), [`sides`] (the two programs and their command lines),
//! [`child`] (running one with a time limit), [`record`] (parsing and reducing measurements)
//! and [`report`] (the table and the JSON file).

mod args;
pub(crate) mod child;
mod record;
mod report;
mod sides;

use std::process::Command;
use std::time::{Duration, Instant};

pub(crate) use args::BenchCollectivesArgs;
use child::{describe, run_captured};
use record::{median_runs, parse_line, sort_records, Record};
use sides::{find_heddle_example, find_repo_root, run_setup, SideCommands, MPI_SETUP};

/// Error of the steps that stop the benchmark before it measures anything.
type BoxError = Box<dyn std::error::Error>;

/// Runs the comparison. Returns the process exit code: 0 when every run succeeded and every
/// measurement was verified, 1 otherwise (the table is printed either way). Problems that stop
/// it before measuring anything (no repository, no example binary, setup failure) are errors.
pub(crate) fn bench_collectives(args: &BenchCollectivesArgs) -> Result<i32, BoxError> {
    args.validate()?;

    let root = find_repo_root()?;
    let example = find_heddle_example(&root)?;
    let heddle_exe = std::env::current_exe()?;
    let timeout = Duration::from_secs(args.timeout.max(1));

    eprintln!("bench: setting up the MPI peer ({MPI_SETUP})");
    let python = run_setup(&root, timeout)?;

    let sides = SideCommands {
        root,
        heddle_exe,
        example,
        python,
        program_args: args.program_args(),
        transport: args.transport,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
    };

    let mut records: Vec<Record> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let repeat = args.repeat.max(1);
    for (n, rep) in args.ranks.iter().flat_map(|&n| (1..=repeat).map(move |rep| (n, rep))) {
        let run = if repeat > 1 { format!(", run {rep}/{repeat}") } else { String::new() };
        run_side(
            &format!("heddle, {n} ranks{run}"),
            &mut sides.heddle(n),
            timeout,
            &mut records,
            &mut failures,
        );
        run_side(
            &format!("mpi, {n} ranks{run}"),
            &mut sides.mpi(n),
            timeout,
            &mut records,
            &mut failures,
        );
    }

    let mut records = median_runs(records);
    sort_records(&mut records);
    println!("{}", report::render_table(&records, "mpi"));
    if !failures.is_empty() {
        println!("\nFAILED runs (their rows are shown as \"-\"):");
        for f in &failures {
            println!("* {f}");
        }
    }

    if let Some(path) = &args.json {
        report::write_json(path, args, &records, &failures)?;
        eprintln!("bench: wrote {}", path.display());
    }

    let unverified = records.iter().filter(|r| !r.verified).count();
    if unverified > 0 {
        eprintln!("bench: {unverified} measurement(s) were NOT verified (wrong results)");
    }
    Ok(if failures.is_empty() && unverified == 0 { 0 } else { 1 })
}

/// Runs one side, collecting its records; a failure is recorded, not fatal.
fn run_side(
    label: &str,
    cmd: &mut Command,
    timeout: Duration,
    records: &mut Vec<Record>,
    failures: &mut Vec<String>,
) {
    eprintln!("bench: [{label}] {}", describe(cmd));
    let start = Instant::now();
    match run_captured(cmd, timeout, true) {
        Ok(out) => {
            let got: Vec<Record> = out.lines.iter().filter_map(|l| parse_line(l)).collect();
            eprintln!(
                "bench: [{label}] {} measurement(s) in {:.1} s",
                got.len(),
                start.elapsed().as_secs_f64()
            );
            if out.timed_out {
                failures.push(format!("{label}: timed out after {} s (killed)", timeout.as_secs()));
            } else if !out.status.success() {
                failures.push(format!("{label}: exited with {}", out.status));
            } else if got.is_empty() {
                failures.push(format!("{label}: printed no measurement"));
            }
            records.extend(got);
        }
        Err(e) => failures.push(format!("{label}: cannot start {}: {e}", describe(cmd))),
    }
}
