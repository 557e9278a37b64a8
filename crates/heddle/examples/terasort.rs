//! Terasort with the data API: N 100-byte records with 10-byte keys (generated, or read
//! from a file of 100-byte lines), `sort_by_key` across workers (a sample of the keys
//! picks the ranges; each range is sorted with disk spill beyond `--mem-budget`), each
//! sorted partition streamed into its part file. The clock covers reading the input,
//! sampling, sorting and writing. A validator then checks global order, record count and
//! an order-independent checksum against the input's (taken before the clock, in the pass
//! that checks every line of a file). (`terasort_dataflow` is the same job written on the
//! dataflow layer.)
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/terasort --records 1000000 --output /tmp/ts
//! heddle run -n 2 -- target/release/examples/terasort --input records.txt --mem-budget 268435456
//! ```

#[path = "common/records.rs"]
mod records;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Parser;
use heddle::data::{DataSet, Session};
use heddle::dataflow::Options;
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
    /// Sort this file instead: 100-byte lines (a 10-byte key, 90 bytes, a newline); an
    /// empty file is no records.
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

/// Bytes of a line of the input: a record and its newline.
const LINE: usize = RECORD + 1;

/// A record's key and the rest of it (`bytes` holds at least a record).
fn split(bytes: &[u8]) -> Record {
    let mut key = [0u8; KEY];
    key.copy_from_slice(&bytes[..KEY]);
    (key, ByteBuf::from(bytes[KEY..RECORD].to_vec()))
}

/// The input (lazy: read by the job that uses it), its record count and its
/// order-independent checksum (taken before the clock, for the validator).
struct Input {
    records: DataSet<Record>,
    count: u64,
    checksum: u64,
}

fn input(session: &Session, args: &Args) -> Result<Input, BoxError> {
    match &args.input {
        None => {
            let seed = args.seed;
            let records = session.generate(args.records, move |i| split(&generate(seed, i)));
            let count = records.count()?;
            let checksum =
                records.map(|(k, v)| record_hash(&k, &v)).reduce(u64::wrapping_add)?.unwrap_or(0);
            Ok(Input { records, count, checksum })
        }
        Some(path) => read_lines(session, path, BLOCK),
    }
}

/// Bytes of lines read at once.
const BLOCK: u64 = 4 << 20;

/// The records of a file of 100-byte lines (none in an empty file), split among the
/// partitions in blocks of about `block` bytes of whole lines. Every line is checked
/// first (a job of its own, before the clock): a file of any other form is an error
/// naming it, and the line, if one is wrong.
fn read_lines(session: &Session, path: &Path, block: u64) -> Result<Input, BoxError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read --input {}: {e}", path.display()))?;
    let len = meta.len();
    if !meta.is_file() || len % LINE as u64 != 0 {
        return Err(format!(
            "{} is not a file of 100-byte lines ({len} bytes, not a whole number of lines of \
             100 bytes and a newline); raw 100-byte records are read by terasort_dataflow \
             --format raw",
            path.display()
        )
        .into());
    }
    let (count, checksum) = check_lines(session, path, len / LINE as u64, block)?;
    // Checked: each block holds whole lines of 101 bytes.
    let records = session.text_blocks(path, block)?.flat_map(|block: String| {
        block.as_bytes().chunks_exact(LINE).map(split).collect::<Vec<_>>()
    });
    Ok(Input { records, count, checksum })
}

/// Checks the `lines` lines of `path`, in chunks of about `block` bytes across the
/// partitions: each 100 bytes of text without a newline, then a newline. Returns their
/// count and checksum (on every worker).
fn check_lines(
    session: &Session,
    path: &Path,
    lines: u64,
    block: u64,
) -> Result<(u64, u64), BoxError> {
    let per_chunk = (block / LINE as u64).max(1);
    let sums: Arc<[AtomicU64; 2]> = Arc::default();
    let (file, into) = (path.to_path_buf(), sums.clone());
    session.generate(lines.div_ceil(per_chunk), |j| j).for_each(move |_, j| {
        let first = j * per_chunk;
        let checksum = check_chunk(&file, first, per_chunk.min(lines - first))?;
        into[0].fetch_add(per_chunk.min(lines - first), Ordering::Relaxed);
        into[1].fetch_add(checksum, Ordering::Relaxed);
        Ok(())
    })?;
    let mut total = sums.each_ref().map(|s| s.load(Ordering::Relaxed));
    session.comm().allreduce(&mut total, Op::Sum)?;
    Ok((total[0], total[1]))
}

/// Checks lines `first .. first + n` of `path` (each at its multiple of 101 bytes);
/// returns their checksum, or an error naming the file and the first wrong line.
fn check_chunk(path: &Path, first: u64, n: u64) -> heddle::data::Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let name = path.display().to_string();
    let io = |source| heddle::data::Error::Io { path: name.clone(), source };
    let mut f = std::fs::File::open(path).map_err(io)?;
    f.seek(SeekFrom::Start(first * LINE as u64)).map_err(io)?;
    let mut bytes = vec![0u8; n as usize * LINE];
    f.read_exact(&mut bytes).map_err(io)?;
    let mut checksum = 0u64;
    for (i, line) in (first..).zip(bytes.chunks_exact(LINE)) {
        let (record, end) = line.split_at(RECORD);
        let found = match record.iter().position(|&b| b == b'\n') {
            Some(at) => Some(format!("a newline after {at} bytes")),
            None if end[0] != b'\n' => {
                Some(format!("byte {:?} after 100 bytes", char::from(end[0])))
            }
            None if std::str::from_utf8(record).is_err() => {
                Some("bytes that are not UTF-8 text".into())
            }
            None => None,
        };
        if let Some(found) = found {
            let message = format!(
                "expected a 100-byte line (100 bytes of text and a newline), found {found} \
                 (the line from byte {})",
                i * LINE as u64
            );
            return Err(heddle::data::Error::Parse { path: name, line: i + 1, message });
        }
        checksum = checksum.wrapping_add(record_hash(&record[..KEY], &record[KEY..]));
    }
    Ok(checksum)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    let dirs = vec![args.spill_dir.clone().unwrap_or_else(std::env::temp_dir)];
    let session = Session::new(heddle::init()?)?
        .with_options(Options::batch().spill(args.mem_budget, dirs))?;
    let Input { records, count: in_count, checksum: in_sum } = input(&session, &args)?;
    if let Some(dir) = &args.output {
        // There even with no records (a part is made by its partition's first record).
        std::fs::create_dir_all(dir).map_err(|source| io(&args.output, source))?;
    }
    session.comm().barrier()?;
    let start = Instant::now();
    // Each sorted partition streams into its part, written and checked on the way.
    let parts: Arc<Mutex<BTreeMap<u32, Part>>> = Arc::default();
    let (sink, dir) = (parts.clone(), args.output.clone());
    records.sort_by_key()?.for_each(move |i, (k, v)| {
        let mut parts = sink.lock().expect("the parts' lock");
        let part = match parts.entry(i) {
            std::collections::btree_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::btree_map::Entry::Vacant(e) => e.insert(
                Part::create(dir.as_deref(), i as usize).map_err(|source| io(&dir, source))?,
            ),
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
    let bounds = comm
        .allgather_object(&parts.iter().map(|(i, p)| (*i, p.first, p.last)).collect::<Vec<_>>())?;
    let mut ranges: Vec<(u32, [u8; KEY], [u8; KEY])> =
        bounds.into_iter().flatten().filter_map(|(i, a, b)| Some((i, a?, b?))).collect();
    ranges.sort();
    let across = ranges.windows(2).all(|w| w[0].2 <= w[1].1);
    let ordered = parts.values().all(|p| p.ordered);
    let [out_count, out_sum] = {
        let mut c = [
            parts.values().map(|p| p.count).sum::<u64>(),
            parts.values().fold(0u64, |s, p| s.wrapping_add(p.checksum)),
        ];
        comm.allreduce(&mut c, Op::Sum)?;
        c
    };
    let mut ok = [u8::from(ordered)];
    comm.allreduce(&mut ok, Op::Min)?;
    let valid = ok[0] == 1 && across && out_count == in_count && in_sum == out_sum;
    if comm.rank() == 0 {
        println!(
            "{{\"example\": \"terasort\", \"api\": \"data\", \"ok\": {valid}, \
             \"records\": {out_count}, \"valid\": {valid}, \"job_s\": {job_s:.3}, \
             \"workers\": {}}}",
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
    heddle::data::Error::Io {
        path: dir.as_ref().map_or_else(|| "(no output)".into(), |d| d.display().to_string()),
        source,
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    use heddle::data::Session;
    use proptest::prelude::*;

    use super::{generate, read_lines, split, Input, RECORD};

    fn session(partitions: u32) -> Session {
        let comm = heddle::comm::solo(heddle::comm::CommConfig::default()).expect("a world of one");
        Session::new(comm).and_then(|s| s.with_partitions(partitions)).expect("a session")
    }

    /// A file in the temp directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(content: &[u8]) -> TempFile {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("heddle-terasort-{}-{n}", std::process::id()));
            std::fs::write(&path, content).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// `n` records of printable ASCII (a file of lines is text), from `seed`.
    fn text_records(n: usize, seed: u64) -> Vec<[u8; RECORD]> {
        (0..n as u64).map(|i| generate(seed, i).map(|b| b' ' + b % 95)).collect()
    }

    /// Each record followed by `end`.
    fn lines(records: &[[u8; RECORD]], end: &[u8]) -> Vec<u8> {
        records.iter().flat_map(|r| r.iter().chain(end).copied()).collect()
    }

    fn error_of(content: &[u8]) -> (String, String) {
        let f = TempFile::new(content);
        let e = read_lines(&session(1), &f.0, 1 << 20)
            .err()
            .expect("an error before the sort")
            .to_string();
        (e, f.0.display().to_string())
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 48,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// For any number of lines, partitions and block size (down to one byte, so that
        /// every line spans many blocks), every record is read once, in file order.
        #[test]
        fn every_record_is_read_once(
            n in 1usize..300,
            seed in any::<u64>(),
            partitions in 1u32..9,
            block in prop_oneof![1u64..64, 64u64..4096, Just(2u64 << 20)],
        ) {
            let records = text_records(n, seed);
            let f = TempFile::new(&lines(&records, b"\n"));
            let Input { records: got, count, checksum } =
                read_lines(&session(partitions), &f.0, block).unwrap();
            let got = got.collect().unwrap().unwrap();
            let want: Vec<_> = records.iter().map(|r| split(r)).collect();
            prop_assert_eq!(count, n as u64);
            prop_assert_eq!(
                checksum,
                want.iter().fold(0u64, |s, (k, v)| s.wrapping_add(super::record_hash(k, v)))
            );
            prop_assert_eq!(got, want);
        }

        /// A trailing partial line (any 1 to 100 bytes after whole lines, with or without
        /// a newline) is refused before the job runs, naming the file.
        #[test]
        fn a_partial_last_line_is_an_error_naming_the_file(
            n in 0usize..50,
            seed in any::<u64>(),
            extra in 1usize..=RECORD,
            newline in any::<bool>(),
        ) {
            let mut content = lines(&text_records(n + 1, seed), b"\n");
            content.truncate(n * (RECORD + 1) + extra);
            if newline {
                *content.last_mut().unwrap() = b'\n';
            }
            let (e, path) = error_of(&content);
            prop_assert!(
                e.contains(&path) && e.contains("is not a file of 100-byte lines"),
                "{}",
                e
            );
        }

        /// Raw 100-byte records, and lines ending in CRLF, are refused, naming the file
        /// (and the first wrong line if the size fits lines).
        #[test]
        fn other_formats_are_errors_naming_the_file(
            n in 1usize..300,
            seed in any::<u64>(),
            crlf in any::<bool>(),
        ) {
            let content = if crlf {
                lines(&text_records(n, seed), b"\r\n")
            } else {
                (0..n as u64).flat_map(|i| generate(seed, i)).collect()
            };
            let (e, path) = error_of(&content);
            let fits = content.len() % (RECORD + 1) == 0;
            let want = if fits {
                format!("{path} line ")
            } else {
                format!("{path} is not a file of 100-byte lines")
            };
            prop_assert!(e.contains(&want) && e.contains("100-byte line"), "{}", e);
        }
    }

    /// A line of the wrong length after a good first line (the file's size still a
    /// multiple of 101) fails the job, naming the file and the line, rather than
    /// panicking (a 99-byte line) or losing a byte (a 101-byte line).
    #[test]
    fn a_line_of_the_wrong_length_fails_the_job() {
        let records = text_records(3, 1);
        let mut content = lines(&records, b"\n");
        content.remove(RECORD + 50); // line 2 is 99 bytes ...
        content.insert(2 * (RECORD + 1) + 10, b'x'); // ... and line 3 is 101
        let (e, path) = error_of(&content);
        let want = format!(
            "{path} line 2: expected a 100-byte line (100 bytes of text and a newline), found a \
             newline after 99 bytes"
        );
        assert!(e.contains(&want), "{e}\nshould contain: {want}");
        // A newline in a line's place but not at its end, or none at all, in later lines.
        for (at, byte, line) in
            [(5 * (RECORD + 1) + 30, b'\n', 6), (7 * (RECORD + 1) + RECORD, b'y', 8)]
        {
            let mut content = lines(&text_records(9, 2), b"\n");
            content[at] = byte;
            let (e, path) = error_of(&content);
            assert!(e.contains(&format!("{path} line {line}: expected a 100-byte line")), "{e}");
        }
    }

    /// An empty file is no records: a valid (empty) sort.
    #[test]
    fn an_empty_file_is_no_records() {
        let f = TempFile::new(b"");
        let Input { records, count, checksum } = read_lines(&session(3), &f.0, 1 << 20).unwrap();
        assert_eq!((count, checksum), (0, 0));
        assert_eq!(records.collect().unwrap().unwrap(), Vec::new());
    }
}
