//! Word count with the task API: a source task per worker reads its byte range of a text
//! file in blocks of whole lines; a count task chained to it (records pass in memory)
//! counts the words of each block in a local table; a keyed-reduce edge sums the counts
//! by word into one total task per worker, which writes `word<TAB>count` lines to its part
//! file. Rank 0 then checks the totals against a plain single-threaded count of the file.
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/wordcount_task --generate --seed 1 --output /tmp/wc
//! heddle run -n 2 -- target/release/examples/wordcount_task --input big.txt --output /tmp/wc
//! ```

#[path = "common/text.rs"]
mod text;

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Parser;
use heddle::dataflow::Options;
use heddle::task::{
    Compute, Context, Edge, Job, Plan, Produced, Result as TaskResult, RoundRobin, Source,
    TaskGraph, WorkerSpec,
};
use heddle::Op;
use rustc_hash::FxHashMap;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    #[command(flatten)]
    data: text::TextInput,
    /// Print the plan.
    #[arg(long)]
    plan: bool,
}

/// Bytes a source emits per block.
const BLOCK: usize = 1 << 20;

/// Reads its byte range of the file, in blocks of whole lines. A line belongs to the
/// range its first byte lies in: a range skips the line it starts inside of, and finishes
/// the line that crosses its end, however many blocks that line spans.
struct ReadRange {
    file: File,
    /// File offset of the next byte to read.
    pos: u64,
    end: u64,
    /// The start of a line not finished yet (read, not emitted).
    carry: Vec<u8>,
    done: bool,
    /// Bytes read at once.
    block: usize,
}

impl ReadRange {
    fn open(path: &Path, index: u32, parallelism: u32) -> std::io::Result<ReadRange> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let range = |i: u32| len * u64::from(i) / u64::from(parallelism);
        let (mut pos, end) = (range(index), range(index + 1));
        if pos > 0 {
            // Skip the line that started in the previous range.
            file.seek(SeekFrom::Start(pos - 1))?;
            let mut byte = [0u8; 1];
            loop {
                if file.read(&mut byte)? == 0 || byte[0] == b'\n' {
                    break;
                }
                pos += 1;
            }
        }
        // No line starts in this range: the line at `pos` belongs to the next one.
        let done = pos >= end;
        Ok(ReadRange { file, pos, end, carry: Vec::new(), done, block: BLOCK })
    }

    /// The next lines of the range (whole lines, possibly none), or `None` at its end.
    fn next_lines(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        if self.done {
            return Ok(None);
        }
        let mut block = std::mem::take(&mut self.carry);
        let start = block.len();
        // File offset of block[0].
        let base = self.pos - start as u64;
        block.resize(start + self.block, 0);
        let n = self.file.read(&mut block[start..])?;
        block.truncate(start + n);
        self.pos += n as u64;
        if n == 0 {
            // The end of the file ends the last line, newline or not.
            self.done = true;
        } else {
            // The first newline at or after the range's last byte ends its last line.
            let from = (self.end - 1).saturating_sub(base) as usize;
            let last = block
                .get(from..)
                .and_then(|tail| tail.iter().position(|&b| b == b'\n'))
                .map(|p| from + p);
            let cut = match last {
                Some(p) => {
                    self.done = true;
                    p + 1
                }
                None => block.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1),
            };
            self.carry = block[cut..].to_vec();
            block.truncate(cut);
        }
        Ok(Some(block))
    }
}

impl Source for ReadRange {
    type Out = Vec<u8>;

    fn next(&mut self, ctx: &mut Context<'_, Vec<u8>>) -> TaskResult<Produced> {
        match self
            .next_lines()
            .map_err(|e| heddle::task::Error::Graph(format!("reading the input: {e}")))?
        {
            Some(lines) if !lines.is_empty() => ctx.emit(lines),
            _ => {}
        }
        Ok(if self.done { Produced::Done } else { Produced::More })
    }
}

/// Counts the words of every block in a local table; emits `(word, count)` at the end.
#[derive(Default)]
struct CountWords {
    counts: FxHashMap<Box<[u8]>, u64>,
}

impl Compute for CountWords {
    type In = Vec<u8>;
    type Out = (String, u64);

    fn execute(&mut self, _: &mut Context<'_, (String, u64)>, block: Vec<u8>) -> TaskResult<()> {
        for word in block.split(|&b| b == b' ' || b == b'\n').filter(|w| !w.is_empty()) {
            match self.counts.get_mut(word) {
                Some(c) => *c += 1,
                None => {
                    self.counts.insert(word.into(), 1);
                }
            }
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, (String, u64)>) -> TaskResult<()> {
        for (word, count) in self.counts.drain() {
            ctx.emit((String::from_utf8_lossy(&word).into_owned(), count));
        }
        Ok(())
    }
}

/// Collects the totals of the words hashed to it and writes its part file.
struct Totals {
    output: Option<PathBuf>,
    totals: Arc<Mutex<Vec<(String, u64)>>>,
}

impl Compute for Totals {
    type In = (String, u64);
    type Out = ();

    fn execute(&mut self, _: &mut Context<'_, ()>, pair: (String, u64)) -> TaskResult<()> {
        self.totals.lock().expect("the totals' lock").push(pair);
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, ()>) -> TaskResult<()> {
        let Some(dir) = &self.output else { return Ok(()) };
        let io = |e: std::io::Error| {
            heddle::task::Error::Graph(format!("writing {}: {e}", dir.display()))
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let mut out =
            BufWriter::new(File::create(dir.join(format!("part-{:05}", ctx.index()))).map_err(io)?);
        for (word, count) in self.totals.lock().expect("the totals' lock").iter() {
            writeln!(out, "{word}\t{count}").map_err(io)?;
        }
        out.flush().map_err(io)
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let comm = heddle::init()?;
    let input = args.data.resolve(&comm)?;
    if !input.is_file() {
        return Err(format!("--input {} is not a readable file", input.display()).into());
    }
    let p = comm.size() as u32;
    let totals = Arc::new(Mutex::new(Vec::new()));
    let mut graph = TaskGraph::new();
    let path = input.clone();
    let read = graph.source("read", p, move |i| {
        ReadRange::open(&path, i, p).expect("the input was checked above")
    });
    let count = graph.compute("count", p, |_| CountWords::default());
    let (out, t) = (args.data.output.clone(), totals.clone());
    let total =
        graph.compute("total", p, move |_| Totals { output: out.clone(), totals: t.clone() });
    graph.connect(&read, &count, Edge::direct());
    graph.connect(&count, &total, Edge::keyed_reduce(|a: u64, b| a + b));
    let plan = Plan::new(&graph, &WorkerSpec::discover(&comm)?, &RoundRobin)?;
    if args.plan && comm.rank() == 0 {
        print!("{plan}");
    }
    comm.barrier()?;
    // Job time: from here until the counts are on rank 0 (or written), as the data-API
    // version's `collect` measures it.
    let start = Instant::now();
    Job::new(&comm, &graph, &plan, Options::batch())?.run()?;
    let local = totals.lock().expect("the totals' lock").clone();
    let gathered =
        if args.data.output.is_none() { Some(comm.gather_object(&local, 0)?) } else { None };
    let mut job_s = [start.elapsed().as_secs_f64()];
    comm.allreduce(&mut job_s, Op::Max)?;

    let mut stats = [local.len() as u64, local.iter().map(|(_, c)| c).sum()];
    comm.allreduce(&mut stats, Op::Sum)?;
    // Written counts are gathered only now, to check them.
    let all = match gathered {
        Some(all) => all,
        None => comm.gather_object(&local, 0)?,
    };
    if let Some(all) = all {
        let ok = if args.data.no_verify {
            true
        } else {
            let got: HashMap<String, u64> = all.into_iter().flatten().collect();
            got == reference(&input)?
        };
        println!(
            "{{\"example\": \"wordcount_task\", \"ok\": {ok}, \"words\": {}, \"distinct\": {}, \
             \"bytes\": {}, \"job_s\": {:.3}, \"workers\": {p}}}",
            stats[1],
            stats[0],
            std::fs::metadata(&input)?.len(),
            job_s[0]
        );
        if !ok {
            return Err("the counts differ from a single-threaded count of the input".into());
        }
    }
    Ok(())
}

/// A plain count of every word of the file.
fn reference(path: &Path) -> std::io::Result<HashMap<String, u64>> {
    let text = std::fs::read_to_string(path)?;
    let mut counts = HashMap::new();
    for word in text.split_ascii_whitespace() {
        *counts.entry(word.to_string()).or_insert(0) += 1;
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::ReadRange;

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 200,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// For any file (empty lines, CRLF, no final newline, lines longer than the block),
        /// any number of ranges and any block size, the ranges' lines in order are the file.
        #[test]
        fn ranges_read_every_line_once(
            lines in prop::collection::vec(("[a-z ]{0,12}|[a-z]{40,300}", prop::bool::ANY), 0..60),
            final_newline in prop::bool::ANY,
            parallelism in 1u32..9,
            block in prop_oneof![1usize..8, 8usize..128, Just(2usize << 20)],
        ) {
            let mut content = Vec::new();
            for (i, (text, crlf)) in lines.iter().enumerate() {
                content.extend_from_slice(text.as_bytes());
                if i + 1 < lines.len() || final_newline {
                    content.extend_from_slice(if *crlf { b"\r\n" } else { b"\n" });
                }
            }
            let path = std::env::temp_dir()
                .join(format!("heddle-readrange-{}-{parallelism}-{block}", std::process::id()));
            std::fs::write(&path, &content).unwrap();
            let mut got = Vec::new();
            for i in 0..parallelism {
                let mut r = ReadRange::open(&path, i, parallelism).unwrap();
                r.block = block;
                while let Some(part) = r.next_lines().unwrap() {
                    prop_assert!(
                        part.is_empty()
                            || part.ends_with(b"\n")
                            || got.len() + part.len() == content.len()
                    );
                    got.extend_from_slice(&part);
                }
            }
            std::fs::remove_file(&path).unwrap();
            prop_assert_eq!(got, content);
        }
    }
}
