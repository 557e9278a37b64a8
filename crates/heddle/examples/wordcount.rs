//! Word count with the data API: blocks of whole lines of a text file, whose words are
//! counted into each partition's table as they are split (`flat_map_reduce_by_key`, keys
//! borrowed until new), then summed by key across workers; written as `word<TAB>count`
//! part files. `--plain` runs the textbook pipeline instead (a record per line, a
//! `(String, 1)` pair per word, `reduce_by_key`). Rank 0 checks the counts against a
//! plain single-threaded count of the file.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/wordcount --generate --seed 1 --output /tmp/wc
//! heddle run -n 4 -- target/release/examples/wordcount --input big.txt
//! ```

#[path = "common/text.rs"]
mod text;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Parser;
use heddle::data::Session;
use heddle::Op;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    data: text::TextInput,
    /// Print the plan.
    #[arg(long)]
    explain: bool,
    /// The textbook pipeline instead: a record per line, a `(String, 1)` pair per word
    /// (`flat_map`), then `reduce_by_key` — about 3× slower, allocating every word.
    #[arg(long)]
    plain: bool,
}

/// Bytes of text per record (blocks of whole lines).
const BLOCK_BYTES: u64 = 1 << 20;

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let session = Session::new(heddle::init()?)?;
    let input = args.data.resolve(session.comm())?;
    session.comm().barrier()?;
    let start = Instant::now();
    let counts = if args.plain {
        session
            .text_file(&input)?
            .flat_map(|line| {
                line.split_ascii_whitespace().map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>()
            })
            .reduce_by_key(|a, b| a + b)
    } else {
        session.text_blocks(&input, BLOCK_BYTES)?.flat_map_reduce_by_key(
            |block: String, c| block.split_ascii_whitespace().for_each(|w| c.add(w, 1u64)),
            |a, b| a + b,
        )
    };
    if args.explain && session.rank() == 0 {
        print!("{}", counts.explain()?);
    }
    let result = match &args.data.output {
        Some(dir) => {
            counts.map(|(w, c)| format!("{w}\t{c}")).write_text(
                heddle::data::Output::new(dir).mode(heddle::data::WriteMode::Overwrite),
            )?;
            None
        }
        None => counts.collect()?,
    };
    let mut job_s = [start.elapsed().as_secs_f64()];
    session.comm().allreduce(&mut job_s, Op::Max)?;
    if session.rank() == 0 {
        let got: HashMap<String, u64> = match result {
            Some(pairs) => pairs.into_iter().collect(),
            None => read_parts(args.data.output.as_deref().expect("written above"))?,
        };
        let ok = args.data.no_verify || got == reference(&input)?;
        let words: u64 = got.values().sum();
        println!(
            "{{\"example\": \"wordcount\", \"api\": \"data\", \"plain\": {}, \"ok\": {ok}, \
             \"words\": {words}, \"distinct\": {}, \"job_s\": {:.3}, \"workers\": {}}}",
            args.plain,
            got.len(),
            job_s[0],
            session.comm().size()
        );
        if !ok {
            return Err("the counts differ from a single-threaded count of the input".into());
        }
    }
    Ok(())
}

fn read_parts(dir: &Path) -> std::io::Result<HashMap<String, u64>> {
    let mut counts = HashMap::new();
    for part in std::fs::read_dir(dir)?.flatten() {
        for line in std::fs::read_to_string(part.path())?.lines() {
            if let Some((w, c)) = line.split_once('\t') {
                counts.insert(w.to_string(), c.parse().unwrap_or(0));
            }
        }
    }
    Ok(counts)
}

/// A plain count of every word of the input (a file, or every file of a directory).
fn reference(path: &Path) -> std::io::Result<HashMap<String, u64>> {
    let mut counts = HashMap::new();
    let files: Vec<PathBuf> = if path.is_dir() {
        std::fs::read_dir(path)?.flatten().map(|e| e.path()).collect()
    } else {
        vec![path.to_path_buf()]
    };
    for f in files {
        for word in std::fs::read_to_string(f)?.split_ascii_whitespace() {
            *counts.entry(word.to_string()).or_insert(0) += 1;
        }
    }
    Ok(counts)
}
