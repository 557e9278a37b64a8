//! A job in which one rank misbehaves, to watch `heddle run` stop the rest: the chosen
//! rank exits with a code, kills itself with a signal, panics, or never joins; every other
//! rank waits in a barrier that cannot complete. Used by the launcher tests.
//!
//! `heddle run -n 3 -- target/release/examples/worker_faults --fail-rank 1 --exit-code 3`

use clap::Parser;

#[derive(Debug, Parser)]
struct Args {
    /// The rank that misbehaves.
    #[arg(long, default_value_t = 0)]
    fail_rank: usize,
    /// Exit with this code after joining the job.
    #[arg(long)]
    exit_code: Option<i32>,
    /// Kill itself with this signal after joining the job.
    #[arg(long)]
    signal: Option<i32>,
    /// Sleep this many seconds instead of joining the job.
    #[arg(long)]
    never_join: Option<u64>,
    /// Every rank joins, then sleeps this many seconds (to test stopping a running job).
    #[arg(long)]
    sleep: Option<u64>,
    /// Panic after joining the job (the others' barrier is aborted at once).
    #[arg(long)]
    panic: bool,
    /// Misbehave only in the first this many attempts of the job (`heddle run --restarts`);
    /// later attempts succeed.
    #[arg(long)]
    fail_attempts: Option<u32>,
    /// Stop itself (SIGSTOP) after joining the job, as a hung worker: only its missing
    /// heartbeats tell.
    #[arg(long)]
    stop: bool,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: Args) -> Result<(), Box<dyn std::error::Error>> {
    let env = heddle::WorkerEnv::from_env()?;
    if env.rank == args.fail_rank {
        if let Some(s) = args.never_join {
            std::thread::sleep(std::time::Duration::from_secs(s));
            return Ok(());
        }
    }
    let comm = heddle::init()?;
    println!("rank {} of {} joined (attempt {})", comm.rank(), comm.size(), comm.attempt());
    if let Some(s) = args.sleep {
        std::thread::sleep(std::time::Duration::from_secs(s));
        return Ok(());
    }
    // Every rank has said it joined before one misbehaves (a launcher stops the others
    // as soon as it does).
    comm.barrier()?;
    let fails = args.fail_attempts.is_none_or(|n| comm.attempt() < n);
    if comm.rank() == args.fail_rank && fails {
        if args.panic {
            panic!("rank {} cannot go on", comm.rank());
        }
        if args.stop {
            // SAFETY: raising a signal in our own process.
            unsafe { libc_raise(19) }; // SIGSTOP
        }
        if let Some(sig) = args.signal {
            // SAFETY: raising a signal in our own process.
            unsafe { libc_raise(sig) };
        }
        std::process::exit(args.exit_code.unwrap_or(1));
    }
    comm.barrier()?;
    Ok(())
}

extern "C" {
    #[link_name = "raise"]
    fn libc_raise(sig: i32) -> i32;
}
