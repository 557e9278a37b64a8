//! Terasort with the data API: N 100-byte records with 10-byte keys (generated, or read
//! from a file of 100-byte lines), `sort_by_key` across workers (a sample of the keys
//! picks the ranges; each range is sorted with disk spill beyond `--mem-budget`), each
//! sorted partition streamed into its part file. The clock covers reading the input,
//! sampling, sorting and writing. A validator then checks global order, record count and
//! an order-independent checksum against the input. (`terasort_dataflow` is the same job
//! written on the dataflow layer.)
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/terasort --records 1000000 --output /tmp/ts
//! heddle run -n 2 -- target/release/examples/terasort --input records.txt --mem-budget 268435456
//! ```

#[path = "common/records.rs"]
mod records;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Parser;
use heddle::dataflow::Options;
use heddle::data::{DataSet, Session};
use heddle::Op;
use records::{generate, record_hash, Part, KEY, RECORD};
use serde_bytes::ByteBuf;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Debug, Parser)]
struct Args {
    /// Records to generate (ignored with --input).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Sort this file instead: 100-byte lines (a 10-byte key, 90 bytes, a newline).
    #[arg(long, conflicts_with = "generate")]
    input: Option<PathBuf>,
    /// Generate the records (the default without --input), seeded with --seed.
    #[arg(long)]
    generate: bool,
    /// Memory for held records per partition before sorted runs spill to disk.
    #[arg(long, default_value_t = 1 << 30)]
    mem_budget: usize,
    /// Write the sorted part files (one per partition, in key order) here.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Directory for spill files (default: the system temp directory).
    #[arg(long)]
    spill_dir: Option<PathBuf>,
    /// Seed of the generator.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

type BoxError = Box<dyn std::error::Error>;
type Record = ([u8; KEY], ByteBuf);

/// A record's key and the rest of it.
fn split(bytes: &[u8]) -> Record {
    let mut key = [0u8; KEY];
    key.copy_from_slice(&bytes[..KEY]);
    (key, ByteBuf::from(bytes[KEY..RECORD].to_vec()))
}

/// The input as a data set (lazy: read by the job that uses it).
fn input(session: &Session, args: &Args) -> Result<DataSet<Record>, BoxError> {
    Ok(match &args.input {
        None => {
            let seed = args.seed;
            session.generate(args.records, move |i| split(&generate(seed, i)))
        }
        Some(path) => {
            check_lines(path)?;
            session.text_blocks(path, 4 << 20)?.flat_map(|block: String| block.lines().map(|l| split(l.as_bytes())).collect::<Vec<_>>())
        }
    })
}

/// A file of whole 100-byte lines, or a clear error.
fn check_lines(path: &Path) -> Result<(), BoxError> {
    let len = std::fs::metadata(path).map_err(|e| format!("cannot read --input {}: {e}", path.display()))?.len();
    let mut first = vec![0u8; RECORD + 1];
    let lines = len % (RECORD as u64 + 1) == 0
        && std::io::Read::read_exact(&mut std::fs::File::open(path)?, &mut first).is_ok()
        && first[RECORD] == b'\n';
    if !lines {
        return Err(format!(
            "{} is not a file of 100-byte lines ({len} bytes); raw 100-byte records are read by terasort_dataflow",
            path.display()
        )
        .into());
    }
    Ok(())
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    let dirs = vec![args.spill_dir.clone().unwrap_or_else(std::env::temp_dir)];
    let session = Session::new(heddle::init()?)?.with_options(Options::batch().spill(args.mem_budget, dirs))?;
    let records = input(&session, &args)?;
    session.comm().barrier()?;
    let start = Instant::now();
    // Each sorted partition streams into its part, written and checked on the way.
    let parts: Arc<Mutex<BTreeMap<u32, Part>>> = Arc::default();
    let (sink, dir) = (parts.clone(), args.output.clone());
    records.sort_by_key()?.for_each(move |i, (k, v)| {
        let mut parts = sink.lock().expect("the parts' lock");
        let part = match parts.entry(i) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(Part::create(dir.as_deref(), i as usize).map_err(|source| io(&dir, source))?),
        };
        part.add(&k, &v).map_err(|source| io(&dir, source))
    })?;
    let mut parts = std::mem::take(&mut *parts.lock().expect("the parts' lock"));
    for part in parts.values_mut() {
        part.close()?;
    }
    let job_s = {
        let mut t = [start.elapsed().as_secs_f64()];
        session.comm().allreduce(&mut t, Op::Max)?;
        t[0]
    };

    // Validate: each part sorted, parts in order, the same count and checksum as the input.
    let comm = session.comm();
    let bounds = comm.allgather_object(&parts.iter().map(|(i, p)| (*i, p.first, p.last)).collect::<Vec<_>>())?;
    let mut ranges: Vec<(u32, [u8; KEY], [u8; KEY])> = bounds.into_iter().flatten().filter_map(|(i, a, b)| Some((i, a?, b?))).collect();
    ranges.sort();
    let across = ranges.windows(2).all(|w| w[0].2 <= w[1].1);
    let ordered = parts.values().all(|p| p.ordered);
    let [out_count, out_sum] = {
        let mut c = [parts.values().map(|p| p.count).sum::<u64>(), parts.values().fold(0u64, |s, p| s.wrapping_add(p.checksum))];
        comm.allreduce(&mut c, Op::Sum)?;
        c
    };
    let in_count = records.count()?;
    let in_sum = records.map(|(k, v)| record_hash(&k, &v)).reduce(u64::wrapping_add)?.unwrap_or(0);
    let mut ok = [u8::from(ordered)];
    comm.allreduce(&mut ok, Op::Min)?;
    let valid = ok[0] == 1 && across && out_count == in_count && in_sum == out_sum;
    if comm.rank() == 0 {
        println!(
            "{{\"example\": \"terasort\", \"api\": \"data\", \"ok\": {valid}, \"records\": {out_count}, \"valid\": {valid}, \"job_s\": {job_s:.3}, \"workers\": {}}}",
            comm.size()
        );
    }
    if valid {
        Ok(())
    } else {
        Err("the output is not a sorted permutation of the input".into())
    }
}

fn io(dir: &Option<PathBuf>, source: std::io::Error) -> heddle::data::Error {
    heddle::data::Error::Io { path: dir.as_ref().map_or_else(|| "(no output)".into(), |d| d.display().to_string()), source }
}
