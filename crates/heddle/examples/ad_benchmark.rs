//! The Yahoo streaming benchmark's shape over a real Redis: ad events (JSON) are produced
//! into a Redis stream at `--rate` events/s for `--seconds`, read by a Heddle stream,
//! filtered to `view` events, projected to (ad, event time), joined with the campaign
//! table (ad → campaign, kept in a Redis hash and loaded by every worker), counted per
//! campaign in tumbling event-time windows (`--window-s`, 10 s as the benchmark), and the
//! window results written to the Redis stream `--output-key` as `campaign start count
//! lag_ms` (lag: from the window's end to its result).
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/ad_benchmark --redis redis://127.0.0.1:6379/ \
//!     --rate 50000 --seconds 30
//! ```
//!
//! The pipeline is the library's `heddle::apps::ad_benchmark::run`; this is its command
//! line. Rank 0 produces the events (a thread pipelining `XADD`s every 10 ms) and keeps its own
//! tally of views per campaign and window; at the end it reads the results back from Redis
//! and checks them against that tally. It prints one JSON line: `"throughput_eps"` (events
//! read over the time from the first event to the job's end), the latency p50/p99 of the
//! window results that fired while events still flowed (the last, partial windows fire at
//! the end of input and are left out), and `"correct"`; a wrong count exits non-zero.

use std::time::Duration;

use clap::Parser;
use heddle::apps::ad_benchmark::{run as benchmark, Options};

#[derive(Debug, Parser)]
struct Args {
    /// The Redis server, as `redis://host:port/`.
    #[arg(long)]
    redis: String,
    /// Events produced per second.
    #[arg(long, default_value_t = 10_000.0)]
    rate: f64,
    /// Seconds of events.
    #[arg(long, default_value_t = 30.0)]
    seconds: f64,
    /// Campaigns (each with `--ads-per-campaign` ads).
    #[arg(long, default_value_t = 100)]
    campaigns: u32,
    /// Ads of each campaign.
    #[arg(long, default_value_t = 10)]
    ads_per_campaign: u32,
    /// Window length, in seconds.
    #[arg(long, default_value_t = 10.0)]
    window_s: f64,
    /// The stream the events go to (its old entries are removed first).
    #[arg(long, default_value = "ad-events")]
    key: String,
    /// The stream the window results go to (emptied first).
    #[arg(long, default_value = "ad-counts")]
    output_key: String,
    /// Seed of the event generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.window_s >= 0.001 && args.window_s.is_finite()) {
        return Err(format!("--window-s {}: at least 0.001", args.window_s).into());
    }
    let opts = Options {
        rate: args.rate,
        seconds: args.seconds,
        campaigns: args.campaigns,
        ads_per_campaign: args.ads_per_campaign,
        window: Duration::from_secs_f64(args.window_s),
        key: args.key,
        output_key: args.output_key,
        seed: args.seed,
        ..Options::new(args.redis)
    };
    let Some(r) = benchmark(heddle::init()?, &opts)? else { return Ok(()) };
    let summary = serde_json::json!({
        "example": "ad_benchmark",
        "input_rate": opts.rate,
        "events": r.events,
        "views": r.views,
        "windows": r.windows,
        "throughput_eps": r.throughput_eps,
        "latency_p50_ms": r.latency_p50_ms,
        "latency_p99_ms": r.latency_p99_ms,
        "job_s": r.job_s,
        "correct": r.correct,
    });
    println!("{summary}");
    if !r.correct {
        return Err("window counts differ from the generator's tally".into());
    }
    Ok(())
}
