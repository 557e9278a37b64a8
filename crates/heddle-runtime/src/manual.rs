//! A job started by hand across hosts: `heddle master --world-size N --token-file F`
//! prints its join address and writes the job token to `F` (mode 0600); on each host
//! `heddle worker --master ADDR:PORT --token-file F [-n K] -- PROGRAM` claims K ranks from
//! the master (in the order workers join) and runs PROGRAM as those ranks, with the local
//! launcher's guarantees on that host.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::control::{self, Control};
use crate::guardian::Guardian;
use crate::launcher::{JobOutcome, LaunchSpec};
use crate::master::{JobMaster, MasterConfig};
use crate::{Error, Result};

/// Runs a job master for workers that join by hand: writes a fresh job token to
/// `token_file`, calls `announce` with the address to join (`IP:PORT`; with an unspecified
/// bind address, this host's first network address), and serves until every rank has
/// joined and left, a worker failed, or SIGINT, SIGTERM or SIGHUP arrives. The token
/// file is removed at the end.
///
/// # Errors
/// [`Error::Io`] if the master cannot listen or the token file cannot be written.
pub fn serve_master(
    mut config: MasterConfig,
    token_file: &Path,
    dashboard: crate::DashboardAddr,
    announce: impl FnOnce(&str),
) -> Result<JobOutcome> {
    let signal = crate::launcher::catch_signals()?;
    let _dashboard = crate::dashboard::open(dashboard, "heddle master", config.world_size)?;
    config.token = hex::encode(rand::random::<[u8; 32]>());
    crate::token_file::write(token_file, &config.token)?;
    let master = match JobMaster::start(config.clone()) {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_file(token_file);
            return Err(e);
        }
    };
    let bound = master.addr();
    let ip = if bound.ip().is_unspecified() {
        crate::rendezvous::first_address().unwrap_or(bound.ip())
    } else {
        bound.ip()
    };
    announce(&std::net::SocketAddr::new(ip, bound.port()).to_string());
    let mut failed_at: Option<Instant> = None;
    let outcome = loop {
        let sig = signal.load(Ordering::SeqCst);
        if sig != 0 {
            break JobOutcome::Interrupted { signal: sig as i32 };
        }
        if let Some(reason) = master.start_failure() {
            eprintln!("heddle master: the job could not start: {reason}");
            break JobOutcome::LauncherFailed {
                launcher: "heddle master".into(),
                status: reason,
                code: 1,
            };
        }
        if let Some(cause) = master.failure() {
            // The others were told; give them the heartbeat timeout to leave.
            let at = *failed_at.get_or_insert_with(Instant::now);
            if master.all_left() || at.elapsed() > 2 * config.heartbeat_timeout {
                eprintln!("heddle master: the job was aborted: {cause}");
                let status = cause.kind.clone();
                break JobOutcome::WorkerFailed { rank: cause.origin, status, code: 1 };
            }
        } else if master.all_left() {
            break JobOutcome::Success;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    master.shutdown();
    let _ = std::fs::remove_file(token_file);
    crate::observatory::global().ended(crate::launcher::ended_with(&outcome));
    Ok(outcome)
}

/// Joins the job of the master at `master` with `spec.workers` workers of this host:
/// claims that many ranks, then runs `spec.command` as them, supervised as by `heddle run`.
///
/// # Errors
/// [`Error::Timeout`] if the master cannot be reached within `spec.init_timeout`;
/// [`Error::Refused`] if it refuses the claim (bad token, no ranks left).
pub fn run_worker(spec: &LaunchSpec, master: &str, token: &str) -> Result<JobOutcome> {
    let program = spec
        .command
        .first()
        .ok_or_else(|| Error::Env("no program given: heddle worker ... -- PROGRAM".into()))?;
    let signal = crate::launcher::catch_signals()?;
    let deadline = Instant::now() + spec.init_timeout;
    let stream = crate::bootstrap::connect_retrying(master, deadline)?;
    let _ = stream.set_read_timeout(Some(spec.init_timeout));
    let opening = crate::secure::open_to_master(stream, spec.security, deadline)?;
    let (ranks, world, heartbeat, timeout) = claim(opening, token, spec.workers)?;
    let mut job = spec.clone();
    job.workers = world;
    job.heartbeat = heartbeat;
    job.heartbeat_timeout = timeout;
    eprintln!("heddle worker: ranks {ranks:?} of {world}, master {master}");
    let run = hex::encode(rand::random::<[u8; 8]>());
    let env = crate::local::worker_env(&job, master, token, 0, &run);
    let mut guardian =
        Guardian::start().map_err(|e| Error::io("starting the launcher's guardian process", e))?;
    let (mut workers, out_rx) = crate::local::spawn(&job, program, &ranks, &env, &guardian)?;
    let none = |_| None;
    let outcome =
        crate::local::supervise(&mut workers, &guardian, &signal, job.kill_grace, &none, &|| None);
    Ok(crate::local::finish(outcome, &mut guardian, &out_rx, None))
}

/// Claims `count` ranks: the ranks, the world size and the master's heartbeats.
fn claim(
    opening: crate::secure::Opening,
    token: &str,
    count: usize,
) -> Result<(Vec<usize>, usize, Duration, Duration)> {
    let mut opening = opening;
    let first = control::recv(&mut opening.stream).map_err(|e| opening.first_message_error(e));
    let (mut stream, fingerprint) = (opening.stream, opening.fingerprint);
    let stream = &mut stream;
    let Control::Challenge { nonce } = first? else {
        return Err(Error::Protocol("the master did not send a challenge".into()));
    };
    let mac = control::mac(token, &format!("claim|{nonce}|{fingerprint}|{count}"));
    control::send(stream, &Control::Claim { count, mac })?;
    match control::recv(stream)? {
        Control::Ranks { ranks, world_size, heartbeat_ms, heartbeat_timeout_ms } => Ok((
            ranks,
            world_size,
            Duration::from_millis(heartbeat_ms),
            Duration::from_millis(heartbeat_timeout_ms),
        )),
        Control::Refused { reason } => Err(Error::Refused(reason)),
        other => Err(Error::Protocol(format!("expected ranks, got {other:?}"))),
    }
}
