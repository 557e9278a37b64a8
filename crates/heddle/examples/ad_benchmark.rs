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
//! Rank 0 produces the events (a thread pipelining `XADD`s every 10 ms) and keeps its own
//! tally of views per campaign and window; at the end it reads the results back from Redis
//! and checks them against that tally. It prints one JSON line: `"throughput_eps"` (events
//! read over the time from the first event to the job's end), the latency p50/p99 of the
//! window results that fired while events still flowed (the last, partial windows fire at
//! the end of input and are left out), and `"correct"`; a wrong count exits non-zero.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use heddle::data::{RedisEntry, Session, Window};
use redis::Commands;

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

/// The fields of an ad event the job reads (the others are parsed over).
#[derive(serde::Deserialize)]
struct AdEvent<'a> {
    ad_id: &'a str,
    event_type: &'a str,
    event_time: u64,
}

/// Views per (campaign, window start), as the generator counted them.
type Tally = HashMap<(String, u64), u64>;

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn ad_id(campaign: u32, ad: u32) -> String {
    format!("ad-{campaign:04}-{ad:02}")
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if !(args.rate > 0.0 && args.seconds > 0.0 && args.window_s >= 0.001) {
        return Err("--rate and --seconds must be above 0, --window-s at least 0.001".into());
    }
    if args.campaigns == 0 || args.ads_per_campaign == 0 {
        return Err("--campaigns and --ads-per-campaign must be above 0".into());
    }
    let comm = heddle::init()?;
    let table_key = format!("{}:campaigns", args.key);
    let client = redis::Client::open(args.redis.as_str())
        .map_err(|e| format!("--redis {}: {e}", args.redis))?;
    let connect = || {
        client.get_connection().map_err(|e| {
            format!("cannot reach Redis at {}: {e}; is redis-server running?", args.redis)
        })
    };
    if comm.rank() == 0 {
        let mut c = connect()?;
        let _: () = c.del(&[&args.key, &args.output_key, &table_key])?;
        let table: Vec<(String, String)> = (0..args.campaigns)
            .flat_map(|c| {
                (0..args.ads_per_campaign).map(move |a| (ad_id(c, a), format!("campaign-{c:04}")))
            })
            .collect();
        let _: () = c.hset_multiple(&table_key, &table)?;
    }
    comm.barrier()?;
    let table: HashMap<String, String> = connect()?.hgetall(&table_key)?;
    let table = Arc::new(table);
    let window_ms = (args.window_s * 1000.0) as u64;
    let started = Instant::now();
    let generator = (comm.rank() == 0).then(|| {
        let (url, key, args_c) = (args.redis.clone(), args.key.clone(), (args.rate, args.seconds));
        let (campaigns, ads, seed) = (args.campaigns, args.ads_per_campaign, args.seed);
        std::thread::spawn(move || produce(&url, &key, args_c, (campaigns, ads), seed, window_ms))
    });
    let session = Session::new(comm)?;
    let events = session.redis_stream(&args.redis, &args.key, "0", Some("end"), None);
    let views = events.flat_map(move |e: RedisEntry| {
        let json = e.fields.iter().find(|(f, _)| f == "event").map(|(_, v)| v.as_str())?;
        let ev: AdEvent<'_> = serde_json::from_str(json).ok()?;
        (ev.event_type == "view").then(|| (ev.ad_id.to_string(), ev.event_time))
    });
    let lookup = table.clone();
    let by_campaign =
        views.flat_map(move |(ad, t)| lookup.get(&ad).map(|c| (c.clone(), (t, 1u64))));
    let window = Window::tumbling(Duration::from_millis(window_ms))
        .event_time(Duration::from_millis(50), Duration::ZERO);
    let counts = by_campaign.window(window, |v| v.0, |a, b| (a.0.max(b.0), a.1 + b.1));
    let lines = counts.map(|w| {
        let lag = now_ms() as i64 - w.end as i64;
        format!("{} {} {} {lag}", w.key, w.start, w.value.1)
    });
    lines.write_redis(&args.redis, &args.output_key, None)?;
    session.comm().barrier()?; // every worker's results are in Redis
    let job_s = started.elapsed().as_secs_f64();
    let Some(generator) = generator else { return Ok(()) };
    let (tally, produced, last_event) =
        generator.join().map_err(|_| "the event generator panicked")??;
    let results: Vec<(String, Vec<(String, String)>)> = {
        let mut c = connect()?;
        let reply: redis::streams::StreamRangeReply = c.xrange_all(&args.output_key)?;
        reply
            .ids
            .into_iter()
            .map(|e| {
                let fields = e
                    .map
                    .into_iter()
                    .map(|(k, v)| (k, redis::from_redis_value::<String>(&v).unwrap_or_default()))
                    .collect();
                (e.id, fields)
            })
            .collect()
    };
    let mut got: Tally = HashMap::new();
    let mut lags = Vec::new();
    for (id, fields) in &results {
        let value = fields.iter().find(|(f, _)| f == "value").map(|(_, v)| v.as_str());
        let parts: Vec<&str> = value.unwrap_or_default().split(' ').collect();
        let [campaign, start, count, lag] = parts[..] else {
            return Err(format!("output entry {id} is not `campaign start count lag`").into());
        };
        let (start, count, lag): (u64, u64, i64) = (start.parse()?, count.parse()?, lag.parse()?);
        *got.entry((campaign.to_string(), start)).or_default() += count;
        if start + window_ms <= last_event {
            lags.push(lag);
        }
    }
    lags.sort_unstable();
    let pct =
        |p: f64| lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1)));
    let correct = got == tally;
    let summary = serde_json::json!({
        "example": "ad_benchmark",
        "input_rate": args.rate,
        "events": produced,
        "views": tally.values().sum::<u64>(),
        "windows": got.len(),
        "throughput_eps": produced as f64 / job_s,
        "latency_p50_ms": pct(0.5),
        "latency_p99_ms": pct(0.99),
        "job_s": job_s,
        "correct": correct,
    });
    println!("{summary}");
    if !correct {
        return Err(format!(
            "window counts differ from the generator's tally: {} windows expected, {} written",
            tally.len(),
            got.len()
        )
        .into());
    }
    Ok(())
}

/// Produces `rate` events/s for `seconds` into stream `key` (a pipeline of `XADD`s every
/// 10 ms), then the end marker; returns the views per campaign and window, the events
/// produced and the last event's time.
fn produce(
    url: &str,
    key: &str,
    (rate, seconds): (f64, f64),
    (campaigns, ads): (u32, u32),
    seed: u64,
    window_ms: u64,
) -> Result<(Tally, u64, u64), String> {
    let err = |e: redis::RedisError| format!("producing into {key} at {url}: {e}");
    let mut c = redis::Client::open(url).and_then(|c| c.get_connection()).map_err(err)?;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const TYPES: [&str; 3] = ["view", "click", "purchase"];
    let (mut tally, mut produced, mut last) = (Tally::new(), 0u64, 0u64);
    let total = (rate * seconds) as u64;
    let start = Instant::now();
    while produced < total {
        let due = ((start.elapsed().as_secs_f64() * rate) as u64).min(total);
        if due == produced {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let mut pipe = redis::pipe();
        for _ in produced..due {
            let (campaign, ad) =
                ((next() % u64::from(campaigns)) as u32, (next() % u64::from(ads)) as u32);
            let event_type = TYPES[(next() % 3) as usize];
            let t = now_ms();
            let event = serde_json::json!({
                "user_id": format!("user-{:06}", next() % 100_000),
                "page_id": format!("page-{:05}", next() % 10_000),
                "ad_id": ad_id(campaign, ad),
                "ad_type": "banner",
                "event_type": event_type,
                "event_time": t,
                "ip_address": "10.0.0.1",
            });
            pipe.xadd(key, "*", &[("event", event.to_string())]).ignore();
            if event_type == "view" {
                *tally
                    .entry((format!("campaign-{campaign:04}"), t - t % window_ms))
                    .or_default() += 1;
            }
            last = t;
        }
        pipe.query::<()>(&mut c).map_err(err)?;
        produced = due;
    }
    let _: String = c.xadd(key, "*", &[("end", "1")]).map_err(err)?;
    Ok((tally, produced, last))
}
