//! Terasort on the dataflow layer (the data-API version is `terasort`): N 100-byte
//! records with 10-byte keys, sorted across workers. Each worker generates (or reads) its
//! share; key samples are gathered to rank 0, which broadcasts
//! the splitters (BSP collectives); a dataflow sort range-partitions the records and
//! sorts each target's range with disk spill beyond `--mem-budget`; each target streams
//! its sorted range into its part file. A validator checks global order, record count and an order-independent
//! checksum against the input.
//!
//! The clock starts once every worker holds its share of the input, or with `--time-read`
//! before the workers read (or generate) it, so that the job time includes reading the
//! input as a sort job's does; the input's checksum is taken after the clock either way.
//!
//! `heddle run -n 2 -- target/release/examples/terasort_dataflow --records 1000000 --output /tmp/ts`

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
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
    /// Sort this file instead: 100-byte records, or 100-byte lines ending in a newline.
    #[arg(long)]
    input: Option<PathBuf>,
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
            Some(path) => {
                let mut f = std::fs::File::open(path).map_err(|e| format!("cannot open --input {}: {e}", path.display()))?;
                let len = f.metadata()?.len();
                // Lines if the first record ends in a newline and the size fits; else raw records.
                let mut first = [0u8; RECORD + 1];
                let lines = len % (RECORD as u64 + 1) == 0 && f.read_exact(&mut first).is_ok() && first[RECORD] == b'\n';
                let stride = if lines { RECORD + 1 } else { RECORD };
                if len % stride as u64 != 0 {
                    return Err(format!("{} holds {len} bytes: not a whole number of 100-byte records or lines", path.display()).into());
                }
                let (lo, hi) = split(len / stride as u64);
                f.seek(SeekFrom::Start(lo * stride as u64))?;
                let mut bytes = vec![0u8; (hi - lo) as usize * stride];
                f.read_exact(&mut bytes)?;
                Ok(Input { bytes, stride })
            }
        }
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
        (0..self.len()).fold(0u64, |sum, i| sum.wrapping_add(record_hash(self.key(i).as_slice(), self.value(i))))
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
    let input = Input::load(&args, rank, size)?;
    let in_count = input.len() as u64;
    comm.barrier()?;
    let start = if args.time_read { read_start } else { Instant::now() };
    let cut = splitters(&comm, &input)?;
    // One source and one target per worker: task w and task size + w on worker w.
    let p = size as TaskId;
    let placement = Placement::from_pairs((0..p).map(|w| (w, w as usize)).chain((0..p).map(|w| (p + w, w as usize))));
    let spec = EdgeSpec::new(1, (0..p).collect(), (p..2 * p).collect(), placement);
    let dirs = vec![args.spill_dir.clone().unwrap_or_else(std::env::temp_dir)];
    let opts = Options::batch().spill(args.mem_budget, dirs).batch_size(256 << 10);
    let mut sort = Sort::new_bytewise(&comm, spec, opts, cut)?;
    // Stream: offer this worker's records, and write (and check) the target's sorted
    // records as they come, never holding the sorted part in memory.
    let (source, target) = (rank as TaskId, p + rank as TaskId);
    let mut part = Part::create(args.output.as_deref(), rank)?;
    let mut records = (0..input.len()).map(|i| (input.key(i), ByteBuf::from(input.value(i).to_vec())));
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
    let parts: Vec<([u8; KEY], [u8; KEY])> = bounds.into_iter().filter_map(|(a, b)| a.zip(b)).collect();
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
            "{{\"example\": \"terasort_dataflow\", \"ok\": {valid}, \"records\": {out_count}, \"valid\": {valid}, \"job_s\": {job_s:.3}, \"spilled_bytes\": {spilled}, \"workers\": {size}}}"
        );
    }
    if valid {
        Ok(())
    } else {
        Err("the output is not a sorted permutation of the input".into())
    }
}
