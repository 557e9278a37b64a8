//! Streaming keyed windowed count over event-time files, with the data API's `Stream`:
//! `ts_ms,key` CSV events are counted per key in tumbling event-time windows (10 s by
//! default), with a watermark trailing the largest timestamp seen by 5 s; each window's
//! counts come out as the watermark passes its end (late events are dropped and counted).
//!
//! The events are replayed with `Session::stream_from_vec` (the data API has no stream
//! source of a directory of files): every worker reads and parses all the files inside
//! the clock, and its partition streams its share of them in order. Rank 0 then checks
//! every (window, key) count against a plain count of the files (after the clock) and
//! prints one JSON line; `--output DIR` writes the counts as `window,key,count` lines
//! (window = start in ms / window length), one part file per worker.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/stream_events --input events/ --output /tmp/counts
//! ```

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use heddle::data::{list_files, Session, Window};
use heddle::Op;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

type BoxError = Box<dyn std::error::Error>;

#[derive(Debug, Parser)]
struct Args {
    /// The events: a file, a directory (its files in name order) or a glob, of `ts_ms,key`
    /// lines in roughly increasing time.
    #[arg(long)]
    input: PathBuf,
    /// Window length in ms.
    #[arg(long, default_value_t = 10_000)]
    window_ms: u64,
    /// How far out of order events may come, in ms (the watermark's lag).
    #[arg(long, default_value_t = 5_000)]
    out_of_order_ms: u64,
    /// Write `window,key,count` lines here (part-NNNNN.csv per worker).
    #[arg(long)]
    output: Option<PathBuf>,
}

/// An event: its key and its time (ms).
type Event = (u32, u64);
/// Counts by (window index, key).
type Counts = HashMap<(u64, u32), u64>;

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    if args.window_ms == 0 {
        return Err("--window-ms must be at least 1".into());
    }
    let session = Session::new(heddle::init()?)?;
    let comm = session.comm();
    let files: Vec<PathBuf> = list_files(&args.input)?.into_iter().map(|(f, _)| f).collect();
    comm.barrier()?;
    let start = Instant::now();

    let events = read_events(&files)?;
    let window = Window::tumbling(Duration::from_millis(args.window_ms))
        .event_time(Duration::from_millis(args.out_of_order_ms), Duration::ZERO);
    let stream = session.stream_from_vec(events).map(|(key, t)| (key, (t, 1u64))).window(
        window,
        |v| v.0,
        |a, b| (a.0.max(b.0), a.1 + b.1),
    );
    let counts: Arc<Mutex<Counts>> = Arc::default();
    let sink = counts.clone();
    let size = args.window_ms;
    stream.run(
        move |_, w| {
            // The latest result of each (window, key) wins, as in an update-mode sink.
            sink.lock()
                .expect("the sink is not poisoned")
                .insert((w.start / size, w.key), w.value.1);
            Ok(())
        },
        None,
    )?;
    let mut job_s = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut job_s, Op::Max)?;

    let verify = Instant::now();
    let local = std::mem::take(&mut *counts.lock().expect("the sink is not poisoned"));
    let mut stats = [local.values().sum::<u64>(), stream.late_records()];
    comm.allreduce(&mut stats, Op::Sum)?;
    if let Some(dir) = &args.output {
        write_counts(dir, comm.rank(), &local)?;
    }
    let pairs: Vec<((u64, u32), u64)> = local.into_iter().collect();
    let all = comm.gather_object(&pairs, 0)?;
    if let Some(all) = all {
        let (got_windows, got) = (
            all.iter().map(Vec::len).sum::<usize>(),
            all.into_iter().flatten().collect::<Counts>(),
        );
        let want = reference(&read_events(&files)?, args.window_ms);
        let differ = want.iter().filter(|(k, c)| got.get(k) != Some(c)).count()
            + got.keys().filter(|k| !want.contains_key(k)).count();
        let ok = differ == 0 && got_windows == got.len() && stats[1] == 0;
        let detail = if ok {
            format!("{} events, {} (window, key) counts equal", stats[0], got.len())
        } else {
            format!(
                "{differ} (window, key) counts differ, {} results for {} (window, key) pairs, {} \
                 late events dropped",
                got_windows,
                got.len(),
                stats[1]
            )
        };
        println!(
            "{{\"example\": \"stream_events\", \"ok\": {ok}, \"events\": {}, \"windows\": {}, \
             \"late\": {}, \"job_s\": {:.3}, \"verify_s\": {:.3}, \"detail\": \"{detail}\", \
             \"workers\": {}}}",
            stats[0],
            got.len(),
            stats[1],
            job_s[0],
            verify.elapsed().as_secs_f64(),
            comm.size()
        );
        if !ok {
            return Err(format!("the window counts are wrong: {detail}").into());
        }
    }
    Ok(())
}

/// Every event of `files`, in order.
fn read_events(files: &[PathBuf]) -> Result<Vec<Event>, BoxError> {
    let mut events = Vec::new();
    for f in files {
        let bytes = std::fs::read(f).map_err(|e| format!("cannot read {}: {e}", f.display()))?;
        for (n, line) in bytes.split(|&b| b == b'\n').enumerate() {
            if line.is_empty() {
                continue;
            }
            events.push(parse(line).ok_or_else(|| {
                format!(
                    "{} line {}: expected `ts_ms,key`, got {:?}",
                    f.display(),
                    n + 1,
                    String::from_utf8_lossy(line)
                )
            })?);
        }
    }
    Ok(events)
}

/// `ts_ms,key` as (key, ts).
fn parse(line: &[u8]) -> Option<Event> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let comma = line.iter().position(|&b| b == b',')?;
    let number = |digits: &[u8]| -> Option<u64> {
        if digits.is_empty() {
            return None;
        }
        digits.iter().try_fold(0u64, |n, &d| {
            if d.is_ascii_digit() {
                n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
            } else {
                None
            }
        })
    };
    Some((u32::try_from(number(&line[comma + 1..])?).ok()?, number(&line[..comma])?))
}

/// A plain count per (window, key).
fn reference(events: &[Event], window_ms: u64) -> Counts {
    let mut counts = Counts::new();
    for &(key, t) in events {
        *counts.entry((t / window_ms, key)).or_default() += 1;
    }
    counts
}

/// This worker's counts as `window,key,count` lines in `dir/part-RANK.csv`.
fn write_counts(dir: &Path, rank: usize, counts: &Counts) -> Result<(), BoxError> {
    let io = |e: std::io::Error| format!("writing {}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut out =
        BufWriter::new(std::fs::File::create(dir.join(format!("part-{rank:05}.csv"))).map_err(io)?);
    for ((w, k), c) in counts {
        writeln!(out, "{w},{k},{c}").map_err(io)?;
    }
    out.flush().map_err(io)?;
    Ok(())
}
