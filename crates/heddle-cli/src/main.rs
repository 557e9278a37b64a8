//! The `heddle` command: `heddle run` launches jobs, `heddle bench` measures Heddle
//! against its peers.

mod bench;
mod bench_bridges;
mod bench_dataflow;
mod bench_isolation;
mod bench_recovery;
mod bridge;
mod config;
mod k8s;
mod manual;

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Parser, Subcommand};
use heddle_runtime::{run_job, LaunchSpec};

/// Heddle: MPI-class collectives and big-data dataflow in one runtime.
#[derive(Debug, Parser)]
#[command(name = "heddle", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run PROGRAM as N workers on this machine: heddle run -n 4 -- PROGRAM ARGS...
    #[command(args_override_self = true)]
    Run(Box<RunArgs>),
    /// Benchmarks that run Heddle and a peer system side by side.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Serve a job master for workers started by hand (`heddle worker`) on any host.
    Master(manual::MasterArgs),
    /// Join a job served by `heddle master`: run PROGRAM as K of its ranks on this host.
    Worker(manual::WorkerArgs),
    /// Kubernetes: the objects of a job (heddle k8s manifest -n 4 --image IMG -- PROG).
    #[command(subcommand)]
    K8s(k8s::K8sCmd),
    /// Bridged tasks in other languages: heddle bridge conformance -- CMD.
    #[command(subcommand)]
    Bridge(bridge::BridgeCmd),
    /// What this host offers to tasks: cores and memory, and where each figure comes from
    /// (the machine, its control groups, a Slurm allocation).
    Offer(OfferArgs),
}

#[derive(Debug, clap::Args)]
struct OfferArgs {
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Collective latency and bandwidth against Open MPI (mpi4py).
    Collectives(bench::BenchCollectivesArgs),
    /// Dataflow operation throughput and streaming latency.
    Dataflow(bench_dataflow::BenchDataflowArgs),
    /// Bridged filters per language and transport against a raw C ping-pong.
    Bridges(bench_bridges::BenchBridgesArgs),
    /// What checkpoints cost (throughput, duration, size) and how fast a killed job is
    /// back.
    Recovery(bench_recovery::BenchRecoveryArgs),
    /// What running a task as an isolated process costs against a thread.
    Isolation(bench_isolation::BenchIsolationArgs),
}

#[derive(Debug, clap::Args)]
struct RunArgs {
    /// A TOML file of defaults for these options, HEDDLE_* settings ([settings]) and the
    /// tasks' default contract ([resources]); the command line wins (also HEDDLE_CONFIG).
    #[arg(long, value_name = "FILE")]
    config: Option<std::path::PathBuf>,
    /// Number of workers.
    #[arg(short = 'n', long = "workers", default_value_t = 1)]
    workers: usize,
    /// Seconds workers have to join before the job fails.
    #[arg(long, default_value_t = 60.0)]
    init_timeout: f64,
    /// Transport between workers on this host: auto, shm or tcp (sets HEDDLE_TRANSPORT).
    #[arg(long)]
    transport: Option<String>,
    /// Address the job master listens on (default: loopback, or with a launcher whose
    /// workers span hosts this host's first network address; port 0: any free port).
    #[arg(long)]
    master_bind: Option<SocketAddr>,
    /// Who starts the workers: local (this machine), mpirun (Open MPI) or slurm (srun).
    #[arg(long, default_value = "local")]
    launcher: String,
    /// Arguments for mpirun, srun, salloc or sbatch, before the program (one string,
    /// split at spaces: --launcher-args "--oversubscribe").
    #[arg(long, allow_hyphen_values = true)]
    launcher_args: Option<String>,
    /// With --launcher slurm: get an allocation first with salloc, or queue the job with
    /// sbatch --wait (default: srun alone, in the allocation it runs in or one of its own).
    #[arg(long)]
    allocate: Option<String>,
    /// Seconds between SIGTERM and SIGKILL when stopping workers.
    #[arg(long, default_value_t = 2.0)]
    kill_grace: f64,
    /// Start a failed job again, all workers with the same ranks, up to this many times
    /// (each attempt sees HEDDLE_ATTEMPT = 0, 1, ...).
    #[arg(long, default_value_t = 0)]
    restarts: u32,
    /// Cores each worker offers to task placement (e.g. 0.5), instead of its share of what
    /// the host offers (`heddle offer`; sets HEDDLE_CPUS_PER_WORKER).
    #[arg(long, value_name = "CORES")]
    cpus_per_worker: Option<String>,
    /// Memory each worker offers to task placement (e.g. 4GiB), instead of its share of
    /// what the host offers (sets HEDDLE_MEMORY_PER_WORKER).
    #[arg(long, value_name = "AMOUNT")]
    memory_per_worker: Option<String>,
    /// Seconds between heartbeats of the master and the workers (default 1, or
    /// HEDDLE_HEARTBEAT_S).
    #[arg(long)]
    heartbeat_interval: Option<f64>,
    /// Seconds of silence after which a worker is declared failed: stopped, hung or cut
    /// off (default 5, or HEDDLE_HEARTBEAT_TIMEOUT_S).
    #[arg(long)]
    heartbeat_timeout: Option<f64>,
    /// Seconds between two checkpoints of the job's streams (sets
    /// HEDDLE_CHECKPOINT_INTERVAL_S; default: streams do not checkpoint). With --restarts,
    /// a restarted job resumes from its last complete checkpoint, exactly once.
    #[arg(long)]
    checkpoint_interval: Option<f64>,
    /// Seconds a checkpoint aligns its barriers before it goes on unaligned, storing the
    /// records in flight, as Flink's aligned-checkpoint timeout (sets
    /// HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S; default 0.005; `off`: always aligned).
    #[arg(long)]
    alignment_timeout: Option<String>,
    /// Where checkpoints go: a directory of this host's, or one every host shares (sets
    /// HEDDLE_CHECKPOINT_DIR; default: heddle-checkpoints-<uid>/<program> in the
    /// temporary directory).
    #[arg(long)]
    checkpoint_dir: Option<std::path::PathBuf>,
    /// What protects the job's TCP connections: tls (TLS 1.3, a per-job CA), mac (a
    /// MAC per frame, not encrypted) or none (default: TLS between hosts, plaintext on
    /// loopback; or HEDDLE_SECURITY).
    #[arg(long, value_parser = manual::parse_security)]
    security: Option<heddle_runtime::Security>,
    /// Where to serve the web dashboard and /metrics while the job runs: HOST:PORT (port
    /// 0: a free one; the address is printed) or off. Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:0")]
    dashboard: heddle_runtime::DashboardAddr,
    /// A progress bar of the stage running (records of the known total, rate, ETA) on
    /// a terminal: auto (when stderr is one) or never.
    #[arg(long, default_value = "auto")]
    progress: heddle_runtime::ProgressMode,
    /// How the launcher and the workers write their logs (levels from HEDDLE_LOG):
    /// text, or json (one object per line; sets HEDDLE_LOG_FORMAT).
    #[arg(long, value_enum)]
    log_format: Option<LogFormat>,
    /// Programs written for mpi4py run unchanged: `from mpi4py import MPI` in the workers
    /// loads heddle.MPI (for this job only; an installed mpi4py is not shadowed elsewhere).
    #[arg(long)]
    mpi4py: bool,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// A `--log-format`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Json => "json",
        }
    }
}

fn main() {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match config::apply(Cli::parse_from(&argv), &argv) {
        Ok(cli) => cli,
        Err(e) => {
            eprintln!("heddle run: {e}");
            std::process::exit(2);
        }
    };
    let format = match &cli.command {
        Cmd::Run(args) => args.log_format.map(LogFormat::as_str),
        _ => None,
    };
    heddle_runtime::install_logging("heddle", format);
    let code =
        match cli.command {
            Cmd::Run(args) => run(*args),
            Cmd::Bench(BenchCmd::Collectives(args)) => bench::bench_collectives(&args)
                .unwrap_or_else(|e| {
                    eprintln!("heddle bench: {e}");
                    1
                }),
            Cmd::Bench(BenchCmd::Dataflow(args)) => bench_dataflow::bench_dataflow(&args)
                .unwrap_or_else(|e| {
                    eprintln!("heddle bench: {e}");
                    1
                }),
            Cmd::Bench(BenchCmd::Isolation(args)) => bench_isolation::bench_isolation(&args)
                .unwrap_or_else(|e| {
                    eprintln!("heddle bench isolation: {e}");
                    1
                }),
            Cmd::Bench(BenchCmd::Bridges(args)) => bench_bridges::bench_bridges(&args)
                .unwrap_or_else(|e| {
                    eprintln!("heddle bench bridges: {e}");
                    1
                }),
            Cmd::Master(args) => manual::master(args),
            Cmd::Worker(args) => manual::worker(args),
            Cmd::K8s(cmd) => k8s::k8s(cmd),
            Cmd::Bridge(cmd) => bridge::bridge(cmd),
            Cmd::Offer(args) => offer(&args),
            Cmd::Bench(BenchCmd::Recovery(args)) => bench_recovery::bench_recovery(&args)
                .unwrap_or_else(|e| {
                    eprintln!("heddle bench: {e}");
                    1
                }),
        };
    std::process::exit(code);
}

fn run(args: RunArgs) -> i32 {
    let mut spec = LaunchSpec::new(args.workers, args.command);
    match heddle_comm::settings::seconds(
        &heddle_comm::settings::INIT_TIMEOUT_S,
        &args.init_timeout.to_string(),
    ) {
        Ok(t) => spec.init_timeout = t,
        Err(e) => {
            eprintln!("heddle run: --init-timeout: {e}");
            return 2;
        }
    }
    if let Err(e) = spec.settings_from(|k| std::env::var(k).ok()) {
        eprintln!("heddle run: {e}");
        return 2;
    }
    if let Some(security) = args.security {
        spec.security = security;
    }
    spec.dashboard = args.dashboard;
    spec.progress = args.progress;
    spec.mpi4py = args.mpi4py;
    if let Some(f) = args.log_format {
        spec.env.push((heddle_runtime::LOG_FORMAT_VAR.into(), f.as_str().into()));
    }
    for (flag, bounds, value, field) in [
        (
            "--heartbeat-interval",
            heddle_comm::settings::HEARTBEAT_S,
            args.heartbeat_interval,
            &mut spec.heartbeat,
        ),
        (
            "--heartbeat-timeout",
            heddle_comm::settings::HEARTBEAT_TIMEOUT_S,
            args.heartbeat_timeout,
            &mut spec.heartbeat_timeout,
        ),
    ] {
        let Some(v) = value else { continue };
        match heddle_comm::settings::seconds(&bounds, &v.to_string()) {
            Ok(t) => *field = t,
            Err(e) => {
                eprintln!("heddle run: {flag}: {e}");
                return 2;
            }
        }
    }
    if let Some(v) = args.checkpoint_interval {
        let bounds = heddle_comm::settings::CHECKPOINT_INTERVAL_S;
        if let Err(e) = heddle_comm::settings::seconds(&bounds, &v.to_string()) {
            eprintln!("heddle run: --checkpoint-interval: {e}");
            return 2;
        }
        spec.env.push((bounds.name.into(), v.to_string()));
    }
    if let Some(v) = args.alignment_timeout {
        if let Err(e) = heddle_comm::settings::alignment_timeout(&v) {
            eprintln!("heddle run: --alignment-timeout: {e}");
            return 2;
        }
        let name = heddle_comm::settings::CHECKPOINT_ALIGNMENT_TIMEOUT_S.name;
        spec.env.push((name.into(), v));
    }
    if let Some(dir) = args.checkpoint_dir {
        // Workers may start elsewhere: name it absolutely.
        let dir = std::path::absolute(&dir).unwrap_or(dir);
        spec.env.push((heddle_comm::settings::CHECKPOINT_DIR.into(), dir.display().to_string()));
    }
    spec.restarts = args.restarts;
    if let Some(v) = args.cpus_per_worker {
        if let Err(e) = heddle_task::parse_cpus(&v) {
            eprintln!("heddle run: --cpus-per-worker: {e}");
            return 2;
        }
        spec.env.push((heddle_task::CPUS_PER_WORKER_ENV.into(), v));
    }
    if let Some(v) = args.memory_per_worker {
        if let Err(e) = heddle_task::parse_bytes(&v) {
            eprintln!("heddle run: --memory-per-worker: {e}");
            return 2;
        }
        spec.env.push((heddle_task::MEMORY_PER_WORKER_ENV.into(), v));
    }
    match args.launcher.parse::<heddle_runtime::Launcher>() {
        Ok(l) => spec.launcher = l,
        Err(e) => {
            eprintln!("heddle run: --launcher: {e}");
            return 2;
        }
    }
    spec.launcher_args =
        args.launcher_args.iter().flat_map(|a| a.split_whitespace()).map(String::from).collect();
    match args.allocate.as_deref() {
        None | Some("srun") => {}
        Some("salloc") => spec.allocation = heddle_runtime::Allocation::Salloc,
        Some("sbatch") => spec.allocation = heddle_runtime::Allocation::Sbatch,
        Some(other) => {
            eprintln!("heddle run: --allocate {other:?}: use salloc or sbatch");
            return 2;
        }
    }
    if let Err(e) = spec.check() {
        eprintln!("heddle run: {e}");
        return 2;
    }
    spec.master_bind =
        args.master_bind.unwrap_or_else(|| heddle_runtime::default_master_bind(&spec));
    spec.kill_grace = Duration::from_secs_f64(args.kill_grace.max(0.0));
    if let Some(t) = args.transport {
        if let Err(e) = t.parse::<heddle_comm::TransportChoice>() {
            eprintln!("heddle run: {e}");
            return 2;
        }
        spec.env.push(("HEDDLE_TRANSPORT".into(), t));
    }
    // Every worker would refuse a bad setting: refuse it once, before starting any.
    let mut vars: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .collect();
    vars.extend(spec.env.iter().cloned());
    if let Err(e) = heddle_runtime::check_environment(&vars) {
        eprintln!("heddle run: {e}");
        return 2;
    }
    match run_job(&spec) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("heddle run: {e}");
            1
        }
    }
}

/// `heddle offer`: what this host offers, as text or JSON.
fn offer(args: &OfferArgs) -> i32 {
    match heddle_task::Offer::host() {
        Ok(o) if args.json => {
            println!("{}", serde_json::to_string(&o).unwrap_or_default());
            0
        }
        Ok(o) => {
            println!("{o}");
            0
        }
        Err(e) => {
            eprintln!("heddle offer: {e}");
            2
        }
    }
}
