//! CCR micro-benchmark: the overhead per stage of the five message patterns of the CCR
//! multicore paper, on `heddle_task::ports`.
//!
//! `lanes` chains of `stages` stages each run in parallel (one lane per dispatcher
//! thread); every stage computes for `grain` µs and then messages. Overhead per stage is
//! (wall time − wall time of the same lanes computing without messages) / stages; each
//! timed run is paired with its own message-free baseline run, and the median of `reps`
//! pairs is reported.
//!
//! * spawned pipeline — each stage's handler posts to its lane's port; a fresh handler
//!   (persistent receive) runs the next stage;
//! * spawned shift — the handler posts to the next lane's port instead;
//! * spawned two shifts — the handler posts to both neighbours; a multiple-item receive of
//!   two items runs the next stage;
//! * rendezvous shift — long-running lanes post to the right neighbour and block until
//!   their left neighbour's message arrives (MPI_SENDRECV around a ring);
//! * rendezvous exchange — post to both neighbours, then receive from both; also timed as
//!   two shifts (right, then left) for comparison.
//!
//! `cargo run --release -p heddle-task --example ccr_bench -- [--stages N] [--json]`

use std::hint::black_box;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use heddle_task::ports::{Activation, Dispatcher, DispatcherQueue, Port};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// How long any lane waits for a message before the run is declared failed.
const PATIENCE: Duration = Duration::from_secs(60);

#[derive(Debug, Parser)]
#[command(about = "Overhead per stage of the CCR paper's message patterns")]
struct Args {
    /// Stages each lane runs per repetition.
    #[arg(long, default_value_t = 20_000)]
    stages: u64,
    /// Parallel lanes, one dispatcher thread each [default: available cores].
    #[arg(long)]
    lanes: Option<usize>,
    /// Computation per stage, in microseconds.
    #[arg(long, default_value_t = 1.0)]
    grain_us: f64,
    /// Timed repetitions per pattern (after one warm-up); the median is reported.
    #[arg(long, default_value_t = 7)]
    reps: usize,
    /// Print only the JSON line.
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, Debug)]
enum Pattern {
    SpawnedPipeline,
    SpawnedShift,
    SpawnedTwoShifts,
    RendezvousShift,
    RendezvousExchange,
    RendezvousExchangeAsTwoShifts,
}

const PATTERNS: [(Pattern, &str); 6] = [
    (Pattern::SpawnedPipeline, "spawned_pipeline"),
    (Pattern::SpawnedShift, "spawned_shift"),
    (Pattern::SpawnedTwoShifts, "spawned_two_shifts"),
    (Pattern::RendezvousShift, "rendezvous_shift"),
    (Pattern::RendezvousExchange, "rendezvous_exchange"),
    (Pattern::RendezvousExchangeAsTwoShifts, "rendezvous_exchange_as_two_shifts"),
];

/// One stage's computation: `iters` rounds of integer mixing.
fn compute(iters: u64) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..iters {
        x = (x.wrapping_mul(0x5851_F42D_4C95_7F2D).wrapping_add(i)) ^ (x >> 29);
    }
    black_box(x)
}

/// Rounds of [`compute`] per microsecond on this machine.
fn calibrate() -> f64 {
    let rounds = 2_000_000;
    compute(rounds / 10);
    let start = Instant::now();
    compute(rounds);
    rounds as f64 / (start.elapsed().as_secs_f64() * 1e6)
}

/// Everything a run needs.
#[derive(Clone, Copy)]
struct Shape {
    lanes: usize,
    stages: u64,
    iters: u64,
}

fn ports<T>(n: usize) -> Vec<Port<T>> {
    (0..n).map(|_| Port::new()).collect()
}

/// Spawned patterns: persistent receivers whose handlers post onward; a lane reports
/// on `done` after its last stage.
fn spawned(
    queue: &DispatcherQueue,
    pattern: Pattern,
    shape: Shape,
    done: &Port<bool>,
) -> Vec<Activation> {
    let Shape { lanes, stages, iters } = shape;
    let inbox: Vec<Port<u64>> = ports(lanes);
    let mut activations = Vec::with_capacity(lanes);
    for lane in 0..lanes {
        let (right, left) =
            (inbox[(lane + 1) % lanes].clone(), inbox[(lane + lanes - 1) % lanes].clone());
        let (own, done) = (inbox[lane].clone(), done.clone());
        activations.push(match pattern {
            Pattern::SpawnedPipeline | Pattern::SpawnedShift => {
                let next = if matches!(pattern, Pattern::SpawnedPipeline) { own } else { right };
                queue.receive(true, &inbox[lane], move |stage: u64| {
                    compute(iters);
                    if stage + 1 < stages {
                        next.post(stage + 1)
                    } else {
                        done.post(true)
                    }
                })
            }
            _ => {
                let count = std::sync::atomic::AtomicU64::new(0);
                queue.multiple_receive(true, 2, &inbox[lane], move |_pair: Vec<u64>| {
                    let stage = count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    compute(iters);
                    if stage + 1 < stages {
                        left.post(stage + 1);
                        right.post(stage + 1);
                    } else {
                        done.post(true);
                    }
                })
            }
        });
    }
    for port in &inbox {
        port.post(0);
        if matches!(pattern, Pattern::SpawnedTwoShifts) {
            port.post(0);
        }
    }
    activations
}

/// Rendezvous patterns: one long-running handler per lane that blocks on its ports.
fn rendezvous(queue: &DispatcherQueue, pattern: Pattern, shape: Shape, done: &Port<bool>) {
    let Shape { lanes, stages, iters } = shape;
    let (from_left, from_right): (Vec<Port<u64>>, Vec<Port<u64>>) = (ports(lanes), ports(lanes));
    for lane in 0..lanes {
        let to_right = from_left[(lane + 1) % lanes].clone();
        let to_left = from_right[(lane + lanes - 1) % lanes].clone();
        let (mine_left, mine_right) = (from_left[lane].clone(), from_right[lane].clone());
        let done = done.clone();
        let expect = move |port: &Port<u64>, stage: u64| port.take_timeout(PATIENCE) == Some(stage);
        queue.spawn(move || {
            let mut ok = true;
            for stage in 0..stages {
                compute(iters);
                ok &= match pattern {
                    Pattern::RendezvousShift => {
                        to_right.post(stage);
                        expect(&mine_left, stage)
                    }
                    Pattern::RendezvousExchange => {
                        to_right.post(stage);
                        to_left.post(stage);
                        expect(&mine_left, stage) && expect(&mine_right, stage)
                    }
                    _ => {
                        to_right.post(stage);
                        let got_left = expect(&mine_left, stage);
                        to_left.post(stage);
                        got_left && expect(&mine_right, stage)
                    }
                };
                if !ok {
                    break;
                }
            }
            done.post(ok);
        });
    }
}

/// One timed run; `None` if a lane failed or timed out.
fn run(queue: &DispatcherQueue, pattern: Pattern, shape: Shape) -> Option<Duration> {
    let done = Port::new();
    let start = Instant::now();
    let activations = match pattern {
        Pattern::SpawnedPipeline | Pattern::SpawnedShift | Pattern::SpawnedTwoShifts => {
            spawned(queue, pattern, shape, &done)
        }
        _ => {
            rendezvous(queue, pattern, shape, &done);
            Vec::new()
        }
    };
    let mut ok = true;
    for _ in 0..shape.lanes {
        ok &= done.take_timeout(PATIENCE).unwrap_or(false);
    }
    let elapsed = start.elapsed();
    for activation in activations {
        activation.cancel(); // handlers hold their neighbours' ports: break the cycle
    }
    ok.then_some(elapsed)
}

/// The lanes' computation alone, run in parallel on the dispatcher without messages.
fn baseline(queue: &DispatcherQueue, shape: Shape) -> Option<Duration> {
    let done = Port::new();
    let start = Instant::now();
    for _ in 0..shape.lanes {
        let done = done.clone();
        queue.spawn(move || {
            (0..shape.stages).for_each(|_| {
                compute(shape.iters);
            });
            done.post(true);
        });
    }
    let mut ok = true;
    for _ in 0..shape.lanes {
        ok &= done.take_timeout(PATIENCE).unwrap_or(false);
    }
    ok.then(|| start.elapsed())
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() -> ExitCode {
    let args = Args::parse();
    let lanes =
        args.lanes.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get()));
    if lanes == 0 || args.stages == 0 || args.reps == 0 {
        eprintln!("error: lanes, stages and reps must be positive");
        return ExitCode::FAILURE;
    }
    let dispatcher = match Dispatcher::named("ccr-bench", lanes) {
        Ok(dispatcher) => dispatcher,
        Err(e) => {
            eprintln!("error: cannot start the dispatcher: {e}");
            return ExitCode::FAILURE;
        }
    };
    let queue = dispatcher.queue();
    let iters = (calibrate() * args.grain_us).round().max(0.0) as u64;
    let shape = Shape { lanes, stages: args.stages, iters };
    if !args.json {
        println!(
            "CCR patterns: {lanes} lanes on {lanes} dispatcher threads, {} stages, {:.2} µs \
             computation per stage, median of {}",
            args.stages, args.grain_us, args.reps
        );
        println!("{:<36} {:>10} {:>8} {:>8}", "pattern", "µs/stage", "min", "max");
    }
    let mut ok = true;
    let mut fields = Vec::new();
    for (pattern, name) in PATTERNS {
        let _ = run(&queue, pattern, shape); // warm-up
        let per_stage: Option<Vec<f64>> = (0..args.reps)
            .map(|_| {
                let messaging = run(&queue, pattern, shape)?;
                let computing = baseline(&queue, shape)?;
                let extra = messaging.as_secs_f64() - computing.as_secs_f64();
                Some(extra.max(0.0) * 1e6 / args.stages as f64)
            })
            .collect();
        let Some(per_stage) = per_stage else {
            ok = false;
            eprintln!("error: {name} failed: a lane timed out or got a message out of order");
            fields.push(format!("\"{name}\": null"));
            continue;
        };
        let (min, max) =
            per_stage.iter().fold((f64::MAX, 0.0f64), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        let med = median(per_stage);
        if !args.json {
            println!("{name:<36} {med:>10.3} {min:>8.3} {max:>8.3}");
        }
        fields.push(format!(
            "\"{name}\": {{\"us_per_stage\": {med:.4}, \"min\": {min:.4}, \"max\": {max:.4}}}"
        ));
    }
    if !args.json {
        println!(
            "target: under 2 µs per stage (the CCR paper measured 5–20 µs on 2007 \
             hardware)"
        );
    }
    println!(
        "{{\"example\": \"ccr_bench\", \"ok\": {ok}, \"lanes\": {lanes}, \"stages\": {}, \
         \"grain_us\": {}, \"reps\": {}, \"patterns\": {{{}}}}}",
        args.stages,
        args.grain_us,
        args.reps,
        fields.join(", ")
    );
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
