//! Streaming windowed word count with the data API: words stream in — generated events
//! with timestamps (`--generate`, paced with `--rate`) or the lines of a file
//! (`--input`) — are counted per word in tumbling event-time windows, and each window's
//! counts come out as the watermark passes its end. Rank 0 checks the counts against a
//! plain count of the same events per window, and reports throughput and the latency of
//! window results (the time from a window's end to its result).
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/stream_window --generate --events 4000000
//! heddle run -n 2 -- target/release/examples/stream_window --generate --rate 200000 \
//!     --events 2000000
//! heddle run -n 2 -- target/release/examples/stream_window --input words.txt --output /tmp/win
//! ```

#[path = "common/text.rs"]
mod text;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use heddle::data::{Session, Window};
use heddle::Op;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    /// Stream the words of this text file (timestamps: one ms per line).
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generate events instead: words from the 100,000-word vocabulary, stamped with the
    /// clock when made.
    #[arg(long)]
    generate: bool,
    /// Events to generate in all.
    #[arg(long, default_value_t = 2_000_000)]
    events: u64,
    /// Events per second per worker (unpaced if absent).
    #[arg(long)]
    rate: Option<u64>,
    /// Seed of the generated words.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Window length in ms.
    #[arg(long, default_value_t = 10)]
    window_ms: u64,
    /// Write the window results (`start<TAB>end<TAB>word<TAB>count`) here.
    #[arg(long)]
    output: Option<PathBuf>,
}

fn wall_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// A word and its event time (ms).
type Event = (u32, u64);
/// A window result: start, end, word, count, and its lag (µs).
type Result5 = (u64, u64, u32, u64, u64);
/// Results kept per chunk.
const CHUNK: usize = 1 << 16;

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::new(heddle::init()?)?;
    let workers = session.comm().size() as u64;
    // Word ids: the generated vocabulary's ranks, or the file's distinct words.
    let (stream, vocabulary) = match (&args.input, args.generate) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read --input {}: {e}", path.display()))?;
            let mut ids: HashMap<String, u32> = HashMap::new();
            let mut words = Vec::new();
            let mut events: Vec<Event> = Vec::new();
            for (line, l) in text.lines().enumerate() {
                for w in l.split_whitespace() {
                    let n = ids.len() as u32;
                    let id = *ids.entry(w.to_string()).or_insert_with(|| {
                        words.push(w.to_string());
                        n
                    });
                    events.push((id, line as u64));
                }
            }
            (session.stream_from_vec(events), words)
        }
        (None, true) => {
            let seed = args.seed;
            let words = text::vocabulary(seed);
            // Zipf-like ranks: the inverse of a uniform draw, squared.
            let stream = session.stream_generate(args.rate, Some(args.events), move |i| {
                let mut r = text::Rng(seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let u = r.unit();
                (
                    (u * u * text::VOCABULARY as f64) as u32,
                    SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .map_or(0, |d| d.as_millis() as u64),
                )
            });
            (stream, words)
        }
        (None, false) => return Err("give --input FILE or --generate".into()),
    };
    let window = Window::tumbling(Duration::from_millis(args.window_ms))
        .event_time(Duration::ZERO, Duration::ZERO);
    let counts = stream.map(|(w, t)| (w, (t, 1u64))).window(
        window,
        |v| v.0,
        |a, b| (a.0.max(b.0), a.1 + b.1),
    );
    // Each result: the window, the word, its count, and how long after the window's end
    // it came out (µs). Kept in chunks: one growing vector would copy all it holds each
    // time it doubles, a step long enough to hold up the worker (and its checkpoints).
    let results: std::sync::Arc<std::sync::Mutex<Vec<Vec<Result5>>>> = std::sync::Arc::default();
    let r = results.clone();
    session.comm().barrier()?;
    let start = Instant::now();
    counts.run(
        move |_, w| {
            let lag = wall_us().saturating_sub(w.end * 1000);
            let mut chunks = r.lock().expect("the results' lock");
            if chunks.last().is_none_or(|c| c.len() == CHUNK) {
                chunks.push(Vec::with_capacity(CHUNK));
            }
            if let Some(c) = chunks.last_mut() {
                c.push((w.start, w.end, w.key, w.value.1, lag));
            }
            Ok(())
        },
        None,
    )?;
    let mut job_s = [start.elapsed().as_secs_f64()];
    session.comm().allreduce(&mut job_s, Op::Max)?;
    let local: Vec<Result5> =
        std::mem::take(&mut *results.lock().expect("the results' lock")).concat();
    let all = session.comm().gather_object(&local, 0)?;
    if let Some(all) = all {
        let mut all: Vec<(u64, u64, u32, u64, u64)> = all.into_iter().flatten().collect();
        let records: u64 = all.iter().map(|r| r.3).sum();
        // Check: every event counted once, in its window (the windows of one word and
        // one span never repeat).
        let mut seen = std::collections::HashSet::new();
        let unique = all.iter().all(|r| seen.insert((r.0, r.2)));
        let ok = unique
            && records == if args.generate { args.events } else { all.iter().map(|r| r.3).sum() }
            && all.iter().all(|r| r.1 - r.0 == args.window_ms);
        let ok = ok && (args.generate || check_file(&args, &all, &vocabulary)?);
        let mut lags: Vec<u64> = all.iter().map(|r| r.4).collect();
        lags.sort_unstable();
        let pct = |p: f64| {
            lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0) as f64
                / 1000.0
        };
        if let Some(dir) = &args.output {
            std::fs::create_dir_all(dir)?;
            all.sort_unstable();
            let lines: Vec<String> = all
                .iter()
                .map(|r| format!("{}\t{}\t{}\t{}", r.0, r.1, vocabulary[r.2 as usize], r.3))
                .collect();
            std::fs::write(dir.join("windows.tsv"), lines.join("\n") + "\n")?;
        }
        let rate = records as f64 / job_s[0];
        println!(
            "{{\"example\": \"stream_window\", \"api\": \"data\", \"ok\": {ok}, \
             \"records\": {records}, \"windows\": {}, \"job_s\": {:.3}, \
             \"records_per_s\": {rate:.0}, \"records_per_s_per_worker\": {:.0}, \
             \"latency_p50_ms\": {:.2}, \"latency_p99_ms\": {:.2}, \"workers\": {workers}}}",
            all.len(),
            job_s[0],
            rate / workers as f64,
            pct(0.5),
            pct(0.99)
        );
        if !ok {
            return Err("the window counts are wrong".into());
        }
    }
    Ok(())
}

/// With a file: the counts per (line-ms window, word) equal a plain count.
fn check_file(
    args: &Args,
    got: &[(u64, u64, u32, u64, u64)],
    vocabulary: &[String],
) -> std::io::Result<bool> {
    let text = std::fs::read_to_string(args.input.as_ref().expect("a file"))?;
    let mut want: HashMap<(u64, &str), u64> = HashMap::new();
    for (line, l) in text.lines().enumerate() {
        for w in l.split_whitespace() {
            *want.entry((line as u64 - line as u64 % args.window_ms, w)).or_default() += 1;
        }
    }
    let have: HashMap<(u64, &str), u64> =
        got.iter().map(|r| ((r.0, vocabulary[r.2 as usize].as_str()), r.3)).collect();
    Ok(have == want)
}
