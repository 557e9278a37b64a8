//! Exactly-once streaming from Redis to Redis: the entries of the Redis stream
//! `--input-key` (fields `id`, unique, and `key`; an entry with a field `end` ends the
//! stream) are keyed by `key`, a running count per key is kept in keyed state, and an entry
//! with one field, `value` = `ID KEY COUNT`, goes to the stream `--output-key` for each
//! input entry. Checkpoints every `--checkpoint-ms` keep the id of the last entry read,
//! the counts and the records the sink has not committed yet; the sink appends a
//! checkpoint's records in one atomic script together with its commit marker
//! (`<output-key>:heddle-commits`), so a job killed and restarted (`heddle run --restarts
//! N`) resumes from its last complete checkpoint, every ID appears exactly once in the
//! output and each KEY's COUNTs are exactly 1..n(KEY).
//!
//! ```text
//! heddle run -n 3 --restarts 20 -- target/release/examples/exactly_once_redis \
//!     --url redis://127.0.0.1:6379/ --input-key events --output-key counts \
//!     --checkpoint-ms 200 --checkpoint-dir /tmp/ckpt --rate 5000
//! ```
//!
//! An entry without `id` or `key` is skipped with a warning. Each worker prints one JSON
//! line at the end: its rank and its attempt.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use heddle::data::{RedisEntry, Session};

#[derive(Debug, Parser)]
struct Args {
    /// The Redis server, as `redis://host:port/`.
    #[arg(long)]
    url: String,
    /// The stream of input entries (fields `id` and `key`; `end` ends it).
    #[arg(long)]
    input_key: String,
    /// The stream the `ID KEY COUNT` entries go to (committed at checkpoints).
    #[arg(long)]
    output_key: String,
    /// Time between checkpoints, in ms.
    #[arg(long, default_value_t = 1000)]
    checkpoint_ms: u64,
    /// The checkpoint directory (a restarted job resumes from the newest there).
    #[arg(long)]
    checkpoint_dir: PathBuf,
    /// Entries read per second (unpaced if absent).
    #[arg(long)]
    rate: Option<f64>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The entry's (`key`, `id`), or `None` (with a warning) if it lacks either.
fn parse(entry: RedisEntry, stream: &str) -> Option<(String, String)> {
    let field = |name: &str| entry.fields.iter().find(|(f, _)| f == name).map(|(_, v)| v.clone());
    match (field("key"), field("id")) {
        (Some(key), Some(id)) => Some((key, id)),
        _ => {
            eprintln!(
                "warning: entry {} of stream {stream} has no `id` or no `key` field: skipped",
                entry.id
            );
            None
        }
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.checkpoint_ms == 0 {
        return Err("--checkpoint-ms must be above 0".into());
    }
    let comm = heddle::init()?;
    let attempt = comm.attempt();
    let interval = Some(Duration::from_millis(args.checkpoint_ms));
    let session = Session::new(comm)?.with_checkpoints(
        &args.checkpoint_dir,
        interval,
        "exactly_once_redis",
    )?;
    let entries = session.redis_stream(&args.url, &args.input_key, "0", Some("end"), args.rate);
    let input = args.input_key.clone();
    let keyed = entries.flat_map(move |e| parse(e, &input));
    let counted = keyed.map_with_state(|key: &String, id, count: &mut Option<u64>| {
        let n = count.unwrap_or(0) + 1;
        *count = Some(n);
        format!("{id} {key} {n}")
    });
    counted.write_redis(&args.url, &args.output_key, None)?;
    let summary = serde_json::json!({
        "rank": session.rank(),
        "attempt": attempt,
        "output_key": args.output_key,
    });
    println!("{summary}");
    Ok(())
}
