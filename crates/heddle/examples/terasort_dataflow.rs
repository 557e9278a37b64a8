//! Terasort on the dataflow layer (the data-API version is `terasort`): N 100-byte
//! records with 10-byte keys, sorted across workers. Each worker generates (or reads) its
//! share; key samples are gathered to rank 0, which broadcasts
//! the splitters (BSP collectives); a dataflow sort range-partitions the records and
//! sorts each target's range with disk spill beyond `--mem-budget`; each target streams
//! its sorted range into its part file. A validator checks global order, record count and
//! an order-independent checksum against the input.
//!
//! The clock starts once every worker holds its share of the input, or with `--time-read`
//! before the workers read (or generate) it, so that the job time includes reading the
//! input as a sort job's does; the input's checksum is taken after the clock either way.
//!
//! An input file holds 100-byte lines (`--format lines`, the default: 101 bytes each with
//! the newline) or raw 100-byte records back to back (`--format raw`); its form is told,
//! not guessed, and a file not of that form is an error naming it (and the line).
//!
//! ```text
//! heddle run -n 2 -- target/release/examples/terasort_dataflow --records 1000000 \
//!     --output /tmp/ts
//! heddle run -n 2 -- target/release/examples/terasort_dataflow --input records.bin \
//!     --format raw
//! ```

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{Parser, ValueEnum};
use heddle::dataflow::{EdgeSpec, Event, Offer, Operation, Options, Placement, Sort, TaskId};
use heddle::{Communicator, Op};
use serde_bytes::ByteBuf;

#[path = "common/records.rs"]
mod records;
use records::{generate, record_hash, Part, KEY, RECORD};

// Millions of small records: an allocator built for that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Encoded as a length (always 10) and the bytes, so encoded keys sort like the keys.
type Key = serde_bytes::ByteArray<KEY>;

#[derive(Debug, Parser)]
struct Args {
    /// Records to generate (ignored with --input).
    #[arg(long, default_value_t = 1_000_000)]
    records: u64,
    /// Sort this file instead (as --format says it holds them); an empty file is no records.
    #[arg(long)]
    input: Option<PathBuf>,
    /// What --input holds: `lines` of 100 bytes and a newline each, or `raw` 100-byte
    /// records back to back.
    #[arg(long, value_enum, default_value_t = Format::Lines)]
    format: Format,
    /// Start the clock before loading the input (reading --input, or generating it).
    #[arg(long)]
    time_read: bool,
    /// Memory for held records per target before sorted runs spill to disk.
    #[arg(long, default_value_t = 1 << 30)]
    mem_budget: usize,
    /// Write the sorted part files (one per target, in key order) here.
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

/// The form of an input file: told, never guessed (raw records can look like lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    /// 100-byte lines, each followed by a newline (101 bytes apart).
    Lines,
    /// 100-byte records back to back.
    Raw,
}

/// This worker's share of the input: records back to back in one buffer (no per-record
/// allocation), `stride` bytes apart.
struct Input {
    bytes: Vec<u8>,
    stride: usize,
}

impl Input {
    fn load(args: &Args, rank: usize, size: usize) -> Result<Input, BoxError> {
        let split = |n: u64| (n * rank as u64 / size as u64, n * (rank as u64 + 1) / size as u64);
        match &args.input {
            None => {
                let (lo, hi) = split(args.records);
                let mut bytes = Vec::with_capacity((hi - lo) as usize * RECORD);
                for i in lo..hi {
                    bytes.extend_from_slice(&generate(args.seed, i));
                }
                Ok(Input { bytes, stride: RECORD })
            }
            Some(path) => Input::read(path, args.format, rank, size),
        }
    }

    /// Worker `rank`'s share of the records of a file in `format` (of `size` workers):
    /// records `n * rank / size .. n * (rank + 1) / size` of its `n`. Lines are checked
    /// to end in a newline each.
    fn read(path: &Path, format: Format, rank: usize, size: usize) -> Result<Input, BoxError> {
        let name = path.display();
        let mut f =
            std::fs::File::open(path).map_err(|e| format!("cannot open --input {name}: {e}"))?;
        let len = f.metadata().map_err(|e| format!("cannot read --input {name}: {e}"))?.len();
        let (stride, what) = match format {
            Format::Lines => (RECORD + 1, "100-byte lines (101 bytes each with the newline)"),
            Format::Raw => (RECORD, "100-byte records (--format raw)"),
        };
        if len % stride as u64 != 0 {
            let hint = if format == Format::Lines && len % RECORD as u64 == 0 {
                "; raw records need --format raw"
            } else {
                ""
            };
            return Err(
                format!("{name} holds {len} bytes: not a whole number of {what}{hint}").into()
            );
        }
        let n = len / stride as u64;
        let (lo, hi) = (n * rank as u64 / size as u64, n * (rank as u64 + 1) / size as u64);
        let read_err = |e| format!("cannot read --input {name}: {e}");
        f.seek(SeekFrom::Start(lo * stride as u64)).map_err(read_err)?;
        let mut bytes = vec![0u8; (hi - lo) as usize * stride];
        f.read_exact(&mut bytes).map_err(read_err)?;
        if format == Format::Lines {
            if let Some(i) = bytes.chunks_exact(stride).position(|l| l[RECORD] != b'\n') {
                let (line, at) =
                    (lo + i as u64 + 1, (lo + i as u64) * stride as u64 + RECORD as u64);
                return Err(format!(
                    "{name} line {line}: expected 100 bytes and a newline, found byte {:?} at \
                     byte {at} where the newline goes{}",
                    char::from(bytes[i * stride + RECORD]),
                    if i == 0 && lo == 0 { " (raw records need --format raw)" } else { "" }
                )
                .into());
            }
        }
        Ok(Input { bytes, stride })
    }

    fn len(&self) -> usize {
        self.bytes.len() / self.stride
    }

    fn key(&self, i: usize) -> Key {
        let at = i * self.stride;
        Key::new(self.bytes[at..at + KEY].try_into().expect("a record holds a key"))
    }

    fn value(&self, i: usize) -> &[u8] {
        let at = i * self.stride;
        &self.bytes[at + KEY..at + RECORD]
    }

    fn checksum(&self) -> u64 {
        (0..self.len()).fold(0u64, |sum, i| {
            sum.wrapping_add(record_hash(self.key(i).as_slice(), self.value(i)))
        })
    }
}

/// Splitters from every worker's key sample: gathered at rank 0, broadcast to all.
fn splitters(comm: &Communicator, input: &Input) -> Result<Vec<Key>, BoxError> {
    let step = (input.len() / 1000).max(1);
    let sample: Vec<Key> = (0..input.len()).step_by(step).map(|i| input.key(i)).collect();
    let all = comm.gather_object(&sample, 0)?;
    let cut = all.map(|s| Sort::<Key, ByteBuf>::splitters_from_sample(s.concat(), comm.size()));
    let mut cut: Vec<Key> = comm.broadcast_object(cut.as_ref(), 0)?;
    cut.resize(comm.size() - 1, Key::new([0xff; KEY]));
    Ok(cut)
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), BoxError> {
    let comm = heddle::init()?;
    let (rank, size) = (comm.rank(), comm.size());
    if args.time_read {
        comm.barrier()?;
    }
    let read_start = Instant::now();
    let input = Input::load(&args, rank, size);
    // Every worker learns whether all loaded their share (and waits for the others).
    let mut loaded = [u8::from(input.is_ok())];
    comm.allreduce(&mut loaded, Op::Min)?;
    let input = match input {
        Ok(_) if loaded[0] == 0 => {
            return Err("another worker could not load its share of the input".into())
        }
        loaded => loaded?,
    };
    let in_count = input.len() as u64;
    let start = if args.time_read { read_start } else { Instant::now() };
    let cut = splitters(&comm, &input)?;
    // One source and one target per worker: task w and task size + w on worker w.
    let p = size as TaskId;
    let placement = Placement::from_pairs(
        (0..p).map(|w| (w, w as usize)).chain((0..p).map(|w| (p + w, w as usize))),
    );
    let spec = EdgeSpec::new(1, (0..p).collect(), (p..2 * p).collect(), placement);
    let dirs = vec![args.spill_dir.clone().unwrap_or_else(std::env::temp_dir)];
    let opts = Options::batch().spill(args.mem_budget, dirs).batch_size(256 << 10);
    let mut sort = Sort::new_bytewise(&comm, spec, opts, cut)?;
    // Stream: offer this worker's records, and write (and check) the target's sorted
    // records as they come, never holding the sorted part in memory.
    let (source, target) = (rank as TaskId, p + rank as TaskId);
    let mut part = Part::create(args.output.as_deref(), rank)?;
    let mut records =
        (0..input.len()).map(|i| (input.key(i), ByteBuf::from(input.value(i).to_vec())));
    let mut held = None;
    let mut finished = false;
    loop {
        let mut moved = false;
        while let Some(item) = held.take().or_else(|| records.next()) {
            match sort.offer(source, item)? {
                Offer::Accepted => moved = true,
                Offer::Full(back) => {
                    held = Some(back);
                    break;
                }
            }
        }
        if held.is_none() && !finished {
            sort.finish(source)?;
            finished = true;
        }
        moved |= sort.progress()?;
        while let Some(event) = sort.poll(target) {
            moved = true;
            if let Event::Data((k, v)) = event {
                part.add(&k, &v)?;
            }
        }
        if finished && sort.is_done() {
            break;
        }
        if !moved {
            sort.wait()?;
        }
    }
    part.close()?;
    let spilled = sort.spilled_bytes();
    let job_s = {
        let mut t = [start.elapsed().as_secs_f64()];
        comm.allreduce(&mut t, Op::Max)?;
        t[0]
    };

    // Validate: sorted within the part, parts in order, same count and checksum as the input.
    let in_sum = input.checksum();
    let (ordered, out_sum) = (part.ordered, part.checksum);
    let bounds = comm.allgather_object(&(part.first, part.last))?;
    let parts: Vec<([u8; KEY], [u8; KEY])> =
        bounds.into_iter().filter_map(|(a, b)| a.zip(b)).collect();
    let across = parts.windows(2).all(|w| w[0].1 <= w[1].0);
    let [out_count, total, in_sum, out_sum, spilled] = {
        let mut c = [part.count, in_count, in_sum, out_sum, spilled];
        comm.allreduce(&mut c, Op::Sum)?;
        c
    };
    let mut ok = [u8::from(ordered)];
    comm.allreduce(&mut ok, Op::Min)?;
    let valid = ok[0] == 1 && across && out_count == total && in_sum == out_sum;
    if rank == 0 {
        println!(
            "{{\"example\": \"terasort_dataflow\", \"ok\": {valid}, \"records\": {out_count}, \
             \"valid\": {valid}, \"job_s\": {job_s:.3}, \"spilled_bytes\": {spilled}, \
             \"workers\": {size}}}"
        );
    }
    if valid {
        Ok(())
    } else {
        Err("the output is not a sorted permutation of the input".into())
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    use proptest::prelude::*;

    use super::{generate, Format, Input, RECORD};

    /// A file in the temp directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(content: &[u8]) -> TempFile {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("heddle-terasort-dataflow-{}-{n}", std::process::id()));
            std::fs::write(&path, content).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// `n` records from `seed`: binary, or printable ASCII for a file of lines.
    fn records(n: usize, seed: u64, text: bool) -> Vec<[u8; RECORD]> {
        (0..n as u64)
            .map(|i| generate(seed, i).map(|b| if text { b' ' + b % 95 } else { b }))
            .collect()
    }

    /// The file: raw records back to back, or each followed by a newline.
    fn render(records: &[[u8; RECORD]], lines: bool) -> Vec<u8> {
        let end: &[u8] = if lines { b"\n" } else { b"" };
        records.iter().flat_map(|r| r.iter().chain(end).copied()).collect()
    }

    /// Every worker's share of the file's records, in rank order.
    fn read_all(content: &[u8], format: Format, workers: usize) -> Result<Vec<Vec<u8>>, String> {
        let f = TempFile::new(content);
        let mut got = Vec::new();
        for rank in 0..workers {
            let input = Input::read(&f.0, format, rank, workers).map_err(|e| e.to_string())?;
            assert_eq!(input.bytes.len() % input.stride, 0);
            got.extend(
                (0..input.len()).map(|i| [input.key(i).as_slice(), input.value(i)].concat()),
            );
        }
        Ok(got)
    }

    fn format(lines: bool) -> Format {
        if lines {
            Format::Lines
        } else {
            Format::Raw
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Raw records or lines, any number of them (none too), any number of workers:
        /// the workers' shares in rank order are the file's records, each once.
        #[test]
        fn every_record_is_read_once(
            n in 0usize..300,
            seed in any::<u64>(),
            lines in any::<bool>(),
            workers in 1usize..9,
        ) {
            let records = records(n, seed, lines);
            let got = read_all(&render(&records, lines), format(lines), workers).unwrap();
            prop_assert_eq!(got, records.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
        }

        /// A trailing partial record or line (1 to 100 bytes) is an error naming the file
        /// and its size, on every worker.
        #[test]
        fn a_partial_last_record_is_an_error_naming_the_file(
            n in 0usize..50,
            seed in any::<u64>(),
            lines in any::<bool>(),
            extra in 1usize..=RECORD,
            workers in 1usize..9,
        ) {
            // A raw file cut after 100 bytes of a record holds whole records: cut earlier.
            let extra = if lines { extra } else { extra.min(RECORD - 1) };
            let mut content = render(&records(n + 1, seed, lines), lines);
            content.truncate(n * (RECORD + usize::from(lines)) + extra);
            let f = TempFile::new(&content);
            for rank in 0..workers {
                let e = Input::read(&f.0, format(lines), rank, workers)
                    .err()
                    .expect("an error")
                    .to_string();
                let want = format!(
                    "{} holds {} bytes: not a whole number of 100-byte {}",
                    f.0.display(),
                    content.len(),
                    if lines { "lines" } else { "records" }
                );
                prop_assert!(e.starts_with(&want), "{}\nshould start with: {}", e, want);
            }
        }

        /// Raw records read as lines are an error naming the file (by their size, or a
        /// line without its newline), whatever they hold.
        #[test]
        fn raw_records_are_not_lines(
            n in 1usize..300,
            seed in any::<u64>(),
            newline_at in 0usize..300,
        ) {
            let mut records = records(n, seed, false);
            records[newline_at % n][0] = b'\n';
            let content = render(&records, false);
            let f = TempFile::new(&content);
            let e = Input::read(&f.0, Format::Lines, 0, 1).err().expect("an error").to_string();
            prop_assert!(e.starts_with(&f.0.display().to_string()), "{}", e);
        }
    }

    /// 101 raw records whose second one starts with a newline are 100 lines by size and
    /// byte 100: read as raw records, they are the records.
    #[test]
    fn raw_records_that_look_like_lines_are_read_as_records() {
        let mut records = records(101, 3, false);
        records[1][0] = b'\n';
        let got = read_all(&render(&records, false), Format::Raw, 1).unwrap();
        assert_eq!(got.len(), records.len(), "records read");
        assert!(got.iter().zip(&records).all(|(g, r)| g == r), "records differ");
        // Read as lines, line 2 has no newline.
        let e = read_all(&render(&records, false), Format::Lines, 1).unwrap_err();
        assert!(e.contains(" line 2: expected 100 bytes and a newline"), "{e}");
    }

    /// 99 lines and one byte are 10,000 bytes: 100 raw records by size, but not lines.
    #[test]
    fn a_partial_line_is_an_error_even_at_a_multiple_of_100_bytes() {
        let mut content = render(&records(100, 3, true), true);
        content.truncate(99 * (RECORD + 1) + 1);
        assert_eq!(content.len() % RECORD, 0);
        let e = read_all(&content, Format::Lines, 1).unwrap_err();
        assert!(e.contains("holds 10000 bytes: not a whole number of 100-byte lines"), "{e}");
    }

    /// A line of the wrong length after a good first line (the size still a multiple of
    /// 101) is an error naming the file and the line, on the worker whose share holds it,
    /// not records shifted by a byte.
    #[test]
    fn a_line_of_the_wrong_length_is_an_error() {
        let mut content = render(&records(6, 3, true), true);
        content.remove(4 * (RECORD + 1) + 50); // line 5 is 99 bytes ...
        content.insert(5 * (RECORD + 1) + 10, b'x'); // ... and line 6 is 101
        let f = TempFile::new(&content);
        for workers in 1..=6 {
            let errors: Vec<String> = (0..workers)
                .filter_map(|rank| {
                    Input::read(&f.0, Format::Lines, rank, workers).err().map(|e| e.to_string())
                })
                .collect();
            let want = format!("{} line 5: expected 100 bytes and a newline", f.0.display());
            assert!(
                errors.len() == 1 && errors[0].starts_with(&want),
                "{workers} workers: {errors:?}"
            );
        }
    }

    /// An empty file is no records, in either format.
    #[test]
    fn an_empty_file_is_no_records() {
        for lines in [false, true] {
            assert_eq!(read_all(b"", format(lines), 3).unwrap(), Vec::<Vec<u8>>::new());
        }
    }
}
