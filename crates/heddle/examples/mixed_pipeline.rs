//! A pipeline of filters in four languages, as DataCutter composes them: a C filter splits
//! each line into lower-cased words, a Java filter drops words shorter than 3 letters and
//! keys the rest by themselves, the words are partitioned by key, a Go filter counts each
//! partition's words, and a Python filter writes `word count` lines into part files of the
//! output directory. Every filter runs as a bridged process of each partition
//! (`DataSet::pipe`). Rank 0 checks the part files against a count of the input in Rust and
//! exits 1 if they differ.
//!
//! The filters are built on first use into `target/bridges/` (`examples/bridges/build.sh`:
//! CMake, Maven, go build).
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/mixed_pipeline --input FILE --output DIR
//! ```

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use heddle::bridge::{BridgeConfig, FilterCommand, Record, Transport};
use heddle::data::{DataSet, Session};

#[derive(Debug, Parser)]
struct Args {
    /// The text file (or directory, or glob) to count.
    #[arg(long)]
    input: PathBuf,
    /// Where the part files go; must not exist or be empty.
    #[arg(long)]
    output: PathBuf,
    /// Transport of every bridge: pipe, fifo, tcp or unix.
    #[arg(long, default_value = "pipe")]
    transport: String,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Builds the filters (once, under a lock) and returns their commands.
fn filters() -> Result<[FilterCommand; 4], Box<dyn std::error::Error>> {
    let root = repo();
    let status = std::process::Command::new(root.join("examples/bridges/build.sh")).status()?;
    if !status.success() {
        return Err(format!(
            "building the filters failed ({status}); run examples/bridges/build.sh"
        )
        .into());
    }
    let out = root.join("target/bridges");
    let cp = std::fs::read_to_string(out.join("java.classpath"))?;
    Ok([
        FilterCommand::new(out.join("lower_words").display().to_string()),
        FilterCommand::new("java")
            .args(["-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", cp.trim()])
            .arg("dev.heddle.bridge.examples.DropShortWords"),
        FilterCommand::new(out.join("count_words").display().to_string()),
        FilterCommand::new("python3")
            .arg(root.join("sdk/python/examples/write_counts.py").display().to_string()),
    ])
}

fn key_hash(r: &Record) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    r.key.hash(&mut h);
    h.finish()
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::new(heddle::init()?)?;
    let transport: Transport = args.transport.parse()?;
    let [c, java, go, python] = filters()?;
    if session.rank() == 0 && args.output.read_dir().is_ok_and(|mut d| d.next().is_some()) {
        return Err(format!(
            "{} is not empty: choose a new output directory",
            args.output.display()
        )
        .into());
    }
    session.comm().barrier()?;
    let start = Instant::now();
    let cfg = |name: &str| BridgeConfig::new(name).transport(transport);
    let words: DataSet<Record> = session.text_file(&args.input)?.pipe_with(c, cfg("lower (C)"));
    let long: DataSet<Record> = words.pipe_with(java, cfg("drop short (Java)"));
    let counts: DataSet<Record> = long.partition_by(key_hash).pipe_with(go, cfg("count (Go)"));
    let out_dir = std::path::absolute(&args.output)?;
    let written: DataSet<String> =
        counts.pipe_with(python, cfg("write (Python)").args([out_dir.display().to_string()]));
    let lines: u64 = written.collect_all()?.iter().map(|n| n.parse::<u64>().unwrap_or(0)).sum();
    let job_s = start.elapsed().as_secs_f64();
    if session.rank() != 0 {
        return Ok(());
    }
    let expected = reference_counts(&args.input)?;
    let got = read_parts(&out_dir)?;
    let ok = got == expected && lines == expected.len() as u64;
    println!(
        "{}",
        serde_json::json!({
            "example": "mixed_pipeline", "workers": session.comm().size(), "transport": args.transport,
            "distinct_words": got.len(), "words": got.values().sum::<u64>(),
            "lines_written": lines, "job_s": job_s, "ok": ok,
        })
    );
    if !ok {
        let missing = expected.iter().find(|(w, c)| got.get(*w) != Some(c));
        return Err(
            format!("the part files differ from a count in Rust (first: {missing:?})").into()
        );
    }
    Ok(())
}

/// Words of 3 letters or more, lower-cased (ASCII), counted in Rust.
fn reference_counts(input: &Path) -> Result<HashMap<String, u64>, Box<dyn std::error::Error>> {
    let mut counts = HashMap::new();
    for (file, _) in heddle::data::list_files(input)? {
        let text = std::fs::read(&file)?;
        for line in text.split(|b| *b == b'\n') {
            let line = String::from_utf8_lossy(line);
            for w in line.split_ascii_whitespace() {
                let w = w.to_ascii_lowercase();
                if w.chars().count() >= 3 {
                    *counts.entry(w).or_insert(0) += 1;
                }
            }
        }
    }
    Ok(counts)
}

fn read_parts(dir: &Path) -> Result<HashMap<String, u64>, Box<dyn std::error::Error>> {
    let mut got = HashMap::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if !path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("part-")) {
            continue;
        }
        for line in std::fs::read_to_string(&path)?.lines() {
            let (w, c) = line
                .rsplit_once(' ')
                .ok_or_else(|| format!("{}: bad line {line:?}", path.display()))?;
            if got.insert(w.to_string(), c.parse::<u64>()?).is_some() {
                return Err(format!("{w} appears in two part files").into());
            }
        }
    }
    Ok(got)
}
