//! Terasort on the dataflow layer (the data-API version is `terasort`): N 100-byte
//! records with 10-byte keys, sorted across workers. Each worker samples the keys of its
//! share; the samples are gathered to rank 0, which broadcasts the splitters (BSP
//! collectives); a dataflow sort range-partitions the records as each worker reads (or
//! generates) its share a chunk at a time, and sorts each target's range with disk spill
//! beyond `--mem-budget`; each target streams its sorted range into its part file. The
//! input is never held whole: each record is held once, by the sort. A validator checks
//! global order, record count and an order-independent checksum against the input.
//!
//! The clock starts once every worker has opened its share, or with `--time-read` before
//! that, so that the job time includes reading the input as a sort job's does; the input
//! is read again for its checksum after the clock either way.
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

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use heddle::dataflow::{EdgeSpec, Event, Offer, Operation, Options, Placement, Sort, TaskId};
use heddle::{Communicator, Op};
use serde_bytes::ByteBuf;

#[path = "../common/records.rs"]
mod records;
mod share;
use records::{Part, KEY};
use share::{Format, Share};

// Millions of small records: an allocator built for that.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Encoded as its 10 bytes (an array has no length prefix), so encoded keys sort like the keys.
type Key = [u8; KEY];

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

pub(crate) type BoxError = Box<dyn std::error::Error>;

/// Splitters from every worker's key sample: gathered at rank 0, broadcast to all.
fn splitters(comm: &Communicator, sample: Vec<Key>) -> Result<Vec<Key>, BoxError> {
    let all = comm.gather_object(&sample, 0)?;
    let cut = all.map(|s| Sort::<Key, ByteBuf>::splitters_from_sample(s.concat(), comm.size()));
    let mut cut: Vec<Key> = comm.broadcast_object(cut.as_ref(), 0)?;
    cut.resize(comm.size() - 1, [0xff; KEY]);
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
    let opened = match &args.input {
        None => Ok(Share::generated(args.records, args.seed, rank, size)),
        Some(path) => Share::open(path, args.format, rank, size),
    }
    .and_then(|share| Ok((share.sample()?, share)));
    // Every worker learns whether all opened their share (and waits for the others).
    let mut ok = [u8::from(opened.is_ok())];
    comm.allreduce(&mut ok, Op::Min)?;
    let (sample, mut share) = match opened {
        Ok(_) if ok[0] == 0 => {
            return Err("another worker could not open its share of the input".into())
        }
        opened => opened?,
    };
    let in_count = share.len();
    let start = if args.time_read { read_start } else { Instant::now() };
    let cut = splitters(&comm, sample)?;
    // One source and one target per worker: task w and task size + w on worker w.
    let p = size as TaskId;
    let placement = Placement::from_pairs(
        (0..p).map(|w| (w, w as usize)).chain((0..p).map(|w| (p + w, w as usize))),
    );
    let spec = EdgeSpec::new(1, (0..p).collect(), (p..2 * p).collect(), placement);
    let dirs = vec![args.spill_dir.clone().unwrap_or_else(std::env::temp_dir)];
    let opts = Options::batch().spill(args.mem_budget, dirs).batch_size(256 << 10);
    let mut sort = Sort::new_bytewise(&comm, spec, opts, cut)?;
    // Stream: offer this worker's records as they are read, and write (and check) the
    // target's sorted records as they come, never holding the sorted part in memory.
    let (source, target) = (rank as TaskId, p + rank as TaskId);
    // The part file is made by the first sorted event, which comes once every worker has
    // read its share: an input error on any worker leaves no output behind.
    let mut part = None;
    let mut held = None;
    let (mut read_all, mut finished) = (false, false);
    loop {
        let mut moved = false;
        loop {
            let item = match held.take() {
                Some(item) => item,
                None => match share.next_record()? {
                    Some((k, v)) => (*k, ByteBuf::from(v)),
                    None => {
                        read_all = true;
                        break;
                    }
                },
            };
            match sort.offer(source, item)? {
                Offer::Accepted => moved = true,
                Offer::Full(back) => {
                    held = Some(back);
                    break;
                }
            }
        }
        if read_all && !finished {
            sort.finish(source)?;
            finished = true;
        }
        moved |= sort.progress()?;
        while let Some(event) = sort.poll(target) {
            moved = true;
            let part = match &mut part {
                Some(part) => part,
                None => part.insert(Part::create(args.output.as_deref(), rank)?),
            };
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
    let mut part = part.ok_or("the sort ended without an end event")?;
    part.close()?;
    let spilled = sort.spilled_bytes();
    let job_s = {
        let mut t = [start.elapsed().as_secs_f64()];
        comm.allreduce(&mut t, Op::Max)?;
        t[0]
    };

    // Validate: sorted within the part, parts in order, same count and checksum as the input.
    let in_sum = share.checksum()?;
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
