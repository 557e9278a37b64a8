//! `heddle master` and `heddle worker`: a job started by hand on several hosts.
//!
//! ```text
//! host-a$ heddle master --world-size 4 --listen 0.0.0.0 --token-file ~/job.token
//! 10.0.0.1:41237
//! host-a$ heddle worker --master 10.0.0.1:41237 --token-file ~/job.token -n 2 -- ./prog
//! host-b$ heddle worker --master 10.0.0.1:41237 --token-file ~/job.token -n 2 -- ./prog
//! ```

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use heddle_comm::settings;
use heddle_runtime::{LaunchSpec, MasterConfig, Security};

/// A `--security` value.
pub(crate) fn parse_security(v: &str) -> Result<Security, String> {
    Security::parse(v).map_err(|e| e.to_string())
}

#[derive(Debug, clap::Args)]
pub(crate) struct MasterArgs {
    /// Number of workers in the job.
    #[arg(long)]
    world_size: usize,
    /// Address to listen on (`IP` or `IP:PORT`; 0.0.0.0 for every interface, then the
    /// join address printed is this host's first network address).
    #[arg(long, default_value = "127.0.0.1")]
    listen: String,
    /// Where to write the job token (mode 0600); workers read it from there (copy it to
    /// their hosts, or use a shared directory). Removed when the job ends.
    #[arg(long)]
    token_file: PathBuf,
    /// Seconds workers have to join before the job fails.
    #[arg(long, default_value_t = 300.0)]
    init_timeout: f64,
    /// Seconds between heartbeats (default 1, or HEDDLE_HEARTBEAT_S).
    #[arg(long)]
    heartbeat_interval: Option<f64>,
    /// Seconds of silence after which a worker is declared failed (default 5, or
    /// HEDDLE_HEARTBEAT_TIMEOUT_S).
    #[arg(long)]
    heartbeat_timeout: Option<f64>,
    /// What protects the job's connections: tls, mac or none (default: TLS between hosts,
    /// plaintext on loopback; or HEDDLE_SECURITY). The same for the master and every
    /// worker.
    #[arg(long, value_parser = parse_security)]
    security: Option<Security>,
    /// Where to serve the web dashboard and /metrics: HOST:PORT (port 0: a free one) or
    /// off. Loopback unless told otherwise.
    #[arg(long, default_value = "127.0.0.1:0")]
    dashboard: heddle_runtime::DashboardAddr,
}

#[derive(Debug, clap::Args)]
pub(crate) struct WorkerArgs {
    /// The join address `heddle master` printed (`HOST:PORT`).
    #[arg(long)]
    master: String,
    /// The job token file `heddle master` wrote (must be private: mode 0600).
    #[arg(long)]
    token_file: PathBuf,
    /// How many workers (ranks) to run on this host.
    #[arg(short = 'n', long = "workers", default_value_t = 1)]
    workers: usize,
    /// Seconds to wait for the master and the other workers.
    #[arg(long, default_value_t = 300.0)]
    init_timeout: f64,
    /// Seconds between SIGTERM and SIGKILL when stopping workers.
    #[arg(long, default_value_t = 2.0)]
    kill_grace: f64,
    /// What protects the job's connections: tls, mac or none (default: TLS between hosts,
    /// plaintext on loopback; or HEDDLE_SECURITY). The same for the master and every
    /// worker.
    #[arg(long, value_parser = parse_security)]
    security: Option<Security>,
    /// The program and its arguments.
    #[arg(trailing_var_arg = true, required = true, allow_hyphen_values = true)]
    command: Vec<String>,
}

/// Seconds from a flag, checked against the setting's bounds.
fn seconds(flag: &str, bounds: settings::Bounds, v: f64) -> Result<Duration, String> {
    settings::seconds(&bounds, &v.to_string()).map_err(|e| format!("{flag}: {e}"))
}

fn listen_addr(v: &str) -> Result<SocketAddr, String> {
    v.parse::<SocketAddr>()
        .or_else(|_| v.parse::<std::net::IpAddr>().map(|ip| SocketAddr::new(ip, 0)))
        .map_err(|_| format!("--listen {v:?} is neither an IP address nor IP:PORT"))
}

fn master_config(args: &MasterArgs) -> Result<MasterConfig, String> {
    if args.world_size == 0 {
        return Err("--world-size must be at least 1".into());
    }
    let mut spec = LaunchSpec::new(args.world_size, Vec::new());
    spec.settings_from(|k| std::env::var(k).ok()).map_err(|e| e.to_string())?;
    if let Some(v) = args.heartbeat_interval {
        spec.heartbeat = seconds("--heartbeat-interval", settings::HEARTBEAT_S, v)?;
    }
    if let Some(v) = args.heartbeat_timeout {
        spec.heartbeat_timeout = seconds("--heartbeat-timeout", settings::HEARTBEAT_TIMEOUT_S, v)?;
    }
    heddle_runtime::check_heartbeat(spec.heartbeat, spec.heartbeat_timeout)
        .map_err(|e| e.to_string())?;
    if let Some(security) = args.security {
        spec.security = security;
    }
    Ok(MasterConfig {
        world_size: args.world_size,
        token: String::new(),
        init_timeout: seconds("--init-timeout", settings::INIT_TIMEOUT_S, args.init_timeout)?,
        bind: listen_addr(&args.listen)?,
        heartbeat: spec.heartbeat,
        heartbeat_timeout: spec.heartbeat_timeout,
        security: spec.security,
    })
}

/// `heddle master`: prints the join address on a line of its own, then serves the job.
pub(crate) fn master(args: MasterArgs) -> i32 {
    let config = match master_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("heddle master: {e}");
            return 2;
        }
    };
    let announce = |addr: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{addr}");
        let _ = out.flush();
        eprintln!(
            "heddle master: waiting for {} workers: heddle worker --master {addr} --token-file {} \
             -- PROGRAM",
            args.world_size,
            args.token_file.display()
        );
    };
    match heddle_runtime::serve_master(config, &args.token_file, args.dashboard, announce) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("heddle master: {e}");
            1
        }
    }
}

/// `heddle worker`: claims ranks from the master and runs the program as them.
pub(crate) fn worker(args: WorkerArgs) -> i32 {
    let token = match heddle_runtime::token_file::read(&args.token_file) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("heddle worker: {e}");
            return 2;
        }
    };
    let mut spec = LaunchSpec::new(args.workers, args.command);
    match seconds("--init-timeout", settings::INIT_TIMEOUT_S, args.init_timeout) {
        Ok(t) => spec.init_timeout = t,
        Err(e) => {
            eprintln!("heddle worker: {e}");
            return 2;
        }
    }
    spec.kill_grace = Duration::from_secs_f64(args.kill_grace.max(0.0));
    if let Err(e) = spec.settings_from(|k| std::env::var(k).ok()) {
        eprintln!("heddle worker: {e}");
        return 2;
    }
    if let Some(security) = args.security {
        spec.security = security;
    }
    match heddle_runtime::run_worker(&spec, &args.master, &token) {
        Ok(outcome) => outcome.exit_code(),
        Err(e) => {
            eprintln!("heddle worker: {e}");
            1
        }
    }
}
