//! Exactly-once streaming with checkpoints: every file of `--input` is a replayable
//! source of lines `ID KEY` (ID unique); the records are keyed by KEY, a running count per
//! key is kept in keyed state, and `ID KEY COUNT` goes out for each record through the
//! two-phase file sink of `--output`. Checkpoints every `--checkpoint-ms` keep the
//! sources' byte offsets, the counts and the sink's pending files; killed and restarted
//! (`heddle run --restarts N`), the job resumes from its last complete checkpoint, so
//! every ID appears exactly once in the output and each KEY's COUNTs are exactly
//! 1..n(KEY).
//!
//! ```text
//! heddle run -n 4 --restarts 20 -- target/release/examples/exactly_once \
//!     --input in/ --output out/ --checkpoint-ms 200 --rate 20000
//! ```
//!
//! Each worker prints one JSON line at the end: its rank and its attempt.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use heddle::data::Session;

#[derive(Debug, Parser)]
struct Args {
    /// A directory of files of lines `ID KEY`.
    #[arg(long)]
    input: PathBuf,
    /// Where the `ID KEY COUNT` lines go (part files, committed at checkpoints).
    #[arg(long)]
    output: PathBuf,
    /// Time between checkpoints, in ms.
    #[arg(long, default_value_t = 1000)]
    checkpoint_ms: u64,
    /// Records per second over all sources (unpaced if absent).
    #[arg(long)]
    rate: Option<f64>,
    /// The checkpoint directory (default: `<output>.checkpoints`).
    #[arg(long)]
    checkpoint_dir: Option<PathBuf>,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// `ID KEY` → (KEY, Ok(ID)); a line of another shape → ("", Err(why)), which fails the
/// job where it is written.
fn parse(line: String) -> (String, Result<String, String>) {
    let mut words = line.split_whitespace();
    match (words.next(), words.next(), words.next()) {
        (Some(id), Some(key), None) => (key.to_string(), Ok(id.to_string())),
        _ => (
            String::new(),
            Err(format!(
                "an input line is not `ID KEY`: {line:?}; every line needs an id and a key"
            )),
        ),
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.checkpoint_ms == 0 {
        return Err("--checkpoint-ms must be above 0".into());
    }
    let comm = heddle::init()?;
    let attempt = comm.attempt();
    let checkpoints = args.checkpoint_dir.clone().unwrap_or_else(|| {
        let mut name = args.output.as_os_str().to_os_string();
        name.push(".checkpoints");
        PathBuf::from(name)
    });
    let interval = Some(Duration::from_millis(args.checkpoint_ms));
    let session = Session::new(comm)?.with_checkpoints(&checkpoints, interval, "exactly_once")?;
    let lines = session.stream_text(&args.input, args.rate)?;
    let counted = lines.map(parse).map_with_state(|key: &String, id, count: &mut Option<u64>| {
        let id = id?;
        let n = count.unwrap_or(0) + 1;
        *count = Some(n);
        Ok::<String, String>(format!("{id} {key} {n}"))
    });
    counted.write_parts(&args.output, None, |out, line| match line {
        Ok(l) => {
            use std::io::Write;
            writeln!(out, "{l}")
        }
        Err(e) => Err(std::io::Error::new(std::io::ErrorKind::InvalidData, e)),
    })?;
    let summary = serde_json::json!({
        "rank": session.rank(),
        "attempt": attempt,
        "output": args.output,
    });
    println!("{summary}");
    Ok(())
}
