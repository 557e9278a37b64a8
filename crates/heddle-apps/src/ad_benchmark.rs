//! The Yahoo streaming benchmark's shape over a real Redis: ad events (JSON) produced into
//! a Redis stream at a set rate, read by a Heddle stream, filtered to `view` events,
//! projected to (ad, event time), joined with the campaign table (ad → campaign, a Redis
//! hash every worker loads), counted per campaign in tumbling event-time windows, and the
//! window results written to another Redis stream as `campaign start count lag_ms` (lag:
//! from the window's end to its result).
//!
//! Worker 0 produces the events (a thread pipelining `XADD`s every 10 ms) and keeps its own
//! tally of views per campaign and window; at the end it reads the results back from Redis
//! and checks them against that tally ([`Report::correct`]).
//!
//! ```no_run
//! use heddle_apps::ad_benchmark::{run, Options};
//! let comm = heddle_comm::solo(heddle_comm::CommConfig::default())?;
//! let opts = Options { rate: 20_000.0, seconds: 5.0, ..Options::new("redis://127.0.0.1:6379/") };
//! if let Some(report) = run(comm, &opts)? {
//!     assert!(report.correct);
//!     println!("{} events/s, p99 {:?} ms", report.throughput_eps, report.latency_p99_ms);
//! }
//! # Ok::<(), heddle_apps::ad_benchmark::Error>(())
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use heddle_comm::Communicator;
use heddle_data::{RedisEntry, Session, Window};
use redis::Commands;

/// What can go wrong in a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Settings that cannot work; the message names the setting.
    #[error("{0}")]
    InvalidArgument(String),
    /// Redis refused or could not be reached; the message names the server and what to do.
    #[error("{0}")]
    Redis(String),
    /// The results in Redis are not what the job writes.
    #[error("{0}")]
    Output(String),
    /// The Heddle job failed.
    #[error(transparent)]
    Data(#[from] heddle_data::Error),
    /// A collective failed.
    #[error(transparent)]
    Comm(#[from] heddle_comm::Error),
}

/// The result type of this module.
pub type Result<T> = std::result::Result<T, Error>;

/// Settings of [`run`].
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The Redis server, as `redis://host:port/`.
    pub redis: String,
    /// Events produced per second.
    pub rate: f64,
    /// Seconds of events.
    pub seconds: f64,
    /// Campaigns, each with `ads_per_campaign` ads.
    pub campaigns: u32,
    /// Ads of each campaign.
    pub ads_per_campaign: u32,
    /// Window length (10 s in the benchmark).
    pub window: Duration,
    /// The stream the events go to (its old entries are removed first); the campaign
    /// table is the hash `KEY:campaigns`.
    pub key: String,
    /// The stream the window results go to (emptied first).
    pub output_key: String,
    /// Seed of the event generator.
    pub seed: u64,
}

impl Options {
    /// The benchmark's defaults against the server at `redis`: 10,000 events/s for 30 s,
    /// 100 campaigns of 10 ads, 10 s windows, streams `ad-events` and `ad-counts`.
    pub fn new(redis: impl Into<String>) -> Options {
        Options {
            redis: redis.into(),
            rate: 10_000.0,
            seconds: 30.0,
            campaigns: 100,
            ads_per_campaign: 10,
            window: Duration::from_secs(10),
            key: "ad-events".into(),
            output_key: "ad-counts".into(),
            seed: 1,
        }
    }
}

/// What worker 0 measured and checked.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Events produced (and read).
    pub events: u64,
    /// `view` events among them.
    pub views: u64,
    /// (campaign, window) results written.
    pub windows: usize,
    /// Events read over the time from the first event to the job's end.
    pub throughput_eps: f64,
    /// Lag of the window results that fired while events still flowed (the last, partial
    /// windows fire at the end of input and are left out), ms: median and 99th percentile.
    pub latency_p50_ms: Option<i64>,
    /// See `latency_p50_ms`.
    pub latency_p99_ms: Option<i64>,
    /// Seconds from the first event to every worker's results being in Redis.
    pub job_s: f64,
    /// Whether every window count equals the generator's own tally.
    pub correct: bool,
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

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn ad_id(campaign: u32, ad: u32) -> String {
    format!("ad-{campaign:04}-{ad:02}")
}

fn check(o: &Options) -> Result<()> {
    if !(o.rate > 0.0 && o.rate.is_finite() && o.seconds > 0.0 && o.seconds.is_finite()) {
        return Err(Error::InvalidArgument(format!(
            "rate = {}, seconds = {}: both must be above 0",
            o.rate, o.seconds
        )));
    }
    if o.window < Duration::from_millis(1) {
        return Err(Error::InvalidArgument(format!("window = {:?}: at least 1 ms", o.window)));
    }
    if o.campaigns == 0 || o.ads_per_campaign == 0 {
        return Err(Error::InvalidArgument(format!(
            "campaigns = {}, ads_per_campaign = {}: both must be above 0",
            o.campaigns, o.ads_per_campaign
        )));
    }
    Ok(())
}

/// Runs the benchmark on every worker of `comm` (it becomes the job's session); worker 0
/// returns the report, the others `None`.
///
/// # Errors
/// [`Error::InvalidArgument`] for bad settings, [`Error::Redis`] when the server cannot
/// be reached or refuses, [`Error::Output`] for results it cannot read, and the job's
/// own errors. A wrong count is not an error: [`Report::correct`] says so.
pub fn run(comm: Communicator, opts: &Options) -> Result<Option<Report>> {
    check(opts)?;
    let table_key = format!("{}:campaigns", opts.key);
    let client = redis::Client::open(opts.redis.as_str())
        .map_err(|e| Error::Redis(format!("redis URL {}: {e}", opts.redis)))?;
    let connect = || {
        client.get_connection().map_err(|e| {
            Error::Redis(format!(
                "cannot reach Redis at {}: {e}; is redis-server running?",
                opts.redis
            ))
        })
    };
    let redis_err = |e: redis::RedisError| Error::Redis(format!("Redis at {}: {e}", opts.redis));
    if comm.rank() == 0 {
        let mut c = connect()?;
        let _: () = c.del(&[&opts.key, &opts.output_key, &table_key]).map_err(redis_err)?;
        let table: Vec<(String, String)> = (0..opts.campaigns)
            .flat_map(|c| {
                (0..opts.ads_per_campaign).map(move |a| (ad_id(c, a), format!("campaign-{c:04}")))
            })
            .collect();
        let _: () = c.hset_multiple(&table_key, &table).map_err(redis_err)?;
    }
    comm.barrier()?;
    let table: HashMap<String, String> = connect()?.hgetall(&table_key).map_err(redis_err)?;
    let table = Arc::new(table);
    let window_ms = opts.window.as_millis() as u64;
    let started = Instant::now();
    let generator = (comm.rank() == 0).then(|| {
        let o = opts.clone();
        std::thread::spawn(move || produce(&o, window_ms))
    });
    let session = Session::new(comm)?;
    let events = session.redis_stream(&opts.redis, &opts.key, "0", Some("end"), None);
    let views = events.flat_map(move |e: RedisEntry| {
        let json = e.fields.iter().find(|(f, _)| f == "event").map(|(_, v)| v.as_str())?;
        let ev: AdEvent<'_> = serde_json::from_str(json).ok()?;
        (ev.event_type == "view").then(|| (ev.ad_id.to_string(), ev.event_time))
    });
    let lookup = table.clone();
    let by_campaign =
        views.flat_map(move |(ad, t)| lookup.get(&ad).map(|c| (c.clone(), (t, 1u64))));
    let window =
        Window::tumbling(opts.window).event_time(Duration::from_millis(50), Duration::ZERO);
    let counts = by_campaign.window(window, |v| v.0, |a, b| (a.0.max(b.0), a.1 + b.1));
    let lines = counts.map(|w| {
        let lag = now_ms() as i64 - w.end as i64;
        format!("{} {} {} {lag}", w.key, w.start, w.value.1)
    });
    lines.write_redis(&opts.redis, &opts.output_key, None)?;
    session.comm().barrier()?; // every worker's results are in Redis
    let job_s = started.elapsed().as_secs_f64();
    let Some(generator) = generator else { return Ok(None) };
    let (tally, produced, last_event) =
        generator.join().map_err(|_| Error::Redis("the event generator panicked".into()))??;
    let reply: redis::streams::StreamRangeReply =
        connect()?.xrange_all(&opts.output_key).map_err(redis_err)?;
    let mut got: Tally = HashMap::new();
    let mut lags = Vec::new();
    for e in reply.ids {
        let value = e.map.get("value").and_then(|v| redis::from_redis_value::<String>(v).ok());
        let value = value.unwrap_or_default();
        let parts: Vec<&str> = value.split(' ').collect();
        let bad = || {
            Error::Output(format!(
                "output entry {} is not `campaign start count lag`: {value:?}",
                e.id
            ))
        };
        let [campaign, start, count, lag] = parts[..] else { return Err(bad()) };
        let (Ok(start), Ok(count), Ok(lag)) =
            (start.parse::<u64>(), count.parse::<u64>(), lag.parse::<i64>())
        else {
            return Err(bad());
        };
        *got.entry((campaign.to_string(), start)).or_default() += count;
        if start + window_ms <= last_event {
            lags.push(lag);
        }
    }
    lags.sort_unstable();
    let pct = |p: f64| {
        lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1))).copied()
    };
    Ok(Some(Report {
        events: produced,
        views: tally.values().sum(),
        windows: got.len(),
        throughput_eps: produced as f64 / job_s,
        latency_p50_ms: pct(0.5),
        latency_p99_ms: pct(0.99),
        job_s,
        correct: got == tally,
    }))
}

/// Produces `rate` events/s for `seconds` into the stream (a pipeline of `XADD`s every
/// 10 ms), then the end marker; returns the views per campaign and window, the events
/// produced and the last event's time.
fn produce(o: &Options, window_ms: u64) -> Result<(Tally, u64, u64)> {
    let err = |e: redis::RedisError| {
        Error::Redis(format!("producing into {} at {}: {e}", o.key, o.redis))
    };
    let mut c =
        redis::Client::open(o.redis.as_str()).and_then(|c| c.get_connection()).map_err(err)?;
    let mut state = o.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    const TYPES: [&str; 3] = ["view", "click", "purchase"];
    let (mut tally, mut produced, mut last) = (Tally::new(), 0u64, 0u64);
    let total = (o.rate * o.seconds) as u64;
    let start = Instant::now();
    while produced < total {
        let due = ((start.elapsed().as_secs_f64() * o.rate) as u64).min(total);
        if due == produced {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        }
        let mut pipe = redis::pipe();
        for _ in produced..due {
            let campaign = (next() % u64::from(o.campaigns)) as u32;
            let ad = (next() % u64::from(o.ads_per_campaign)) as u32;
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
            pipe.xadd(&o.key, "*", &[("event", event.to_string())]).ignore();
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
    let _: String = c.xadd(&o.key, "*", &[("end", "1")]).map_err(err)?;
    Ok((tally, produced, last))
}
