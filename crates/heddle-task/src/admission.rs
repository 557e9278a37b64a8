//! Admission of a job beside others on the same hosts: with `HEDDLE_ADMISSION=queue` or
//! `refuse` (a config file's `[resources] admission`), a job's workers each take a hold
//! on their host's cores and memory (what the plan puts on them: the memory its
//! instances request, and their cores up to the worker's share) in the host's
//! [`ledger`](crate::ledger) before anything starts. If every worker's hold fits beside
//! the other jobs' the job starts, holding them until it ends; if one does not, every
//! worker lets go, and the job either waits and asks again (`queue`, up to
//! `HEDDLE_ADMISSION_TIMEOUT_S`) or fails at once (`refuse`) with an error naming each
//! worker that did not fit, what it asked, what is free and which jobs hold the rest.
//! `shared` (the default) admits every job, as if it were alone.

use std::time::{Duration, Instant};

use heddle_comm::Communicator;

use crate::ledger::{self, Amount, Held};
use crate::{Error, Offer, Plan, Result, TaskGraph};

/// How a job is admitted beside others: `shared`, `queue` or `refuse`.
pub const ADMISSION_ENV: &str = "HEDDLE_ADMISSION";
/// Seconds a queued job waits for room before it fails (default 600).
pub const ADMISSION_TIMEOUT_ENV: &str = "HEDDLE_ADMISSION_TIMEOUT_S";

/// How a job is admitted beside the other jobs on its hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Every job runs as if alone (nothing is held).
    Shared,
    /// A job that does not fit waits for room.
    Queue,
    /// A job that does not fit fails before it starts.
    Refuse,
}

impl std::str::FromStr for Admission {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Admission, String> {
        match s {
            "shared" => Ok(Admission::Shared),
            "queue" => Ok(Admission::Queue),
            "refuse" => Ok(Admission::Refuse),
            other => Err(format!("admission {other:?}: use shared, queue or refuse")),
        }
    }
}

impl Admission {
    /// The mode [`ADMISSION_ENV`] sets (`Shared` when unset).
    ///
    /// ```
    /// assert_eq!("queue".parse(), Ok(heddle_task::Admission::Queue));
    /// ```
    ///
    /// # Errors
    /// [`Error::Plan`] naming the variable and its bad value.
    pub fn from_env() -> Result<Admission> {
        match std::env::var(ADMISSION_ENV) {
            Err(_) => Ok(Admission::Shared),
            Ok(v) => v.parse().map_err(|e| Error::Plan(format!("{ADMISSION_ENV}: {e}"))),
        }
    }
}

/// Seconds a queued job may wait, as [`ADMISSION_TIMEOUT_ENV`] writes them.
///
/// ```
/// assert_eq!(heddle_task::parse_admission_timeout("1.5"), Ok(std::time::Duration::from_millis(1500)));
/// assert!(heddle_task::parse_admission_timeout("-1").is_err());
/// ```
///
/// # Errors
/// Not a number of seconds, 0 or more.
pub fn parse_admission_timeout(v: &str) -> std::result::Result<Duration, String> {
    v.trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("{v:?}: seconds, 0 or more"))
}

fn timeout() -> Result<Duration> {
    match std::env::var(ADMISSION_TIMEOUT_ENV) {
        Err(_) => Ok(Duration::from_secs(600)),
        Ok(v) => parse_admission_timeout(&v)
            .map_err(|e| Error::Plan(format!("{ADMISSION_TIMEOUT_ENV}={e}"))),
    }
}

/// What this worker's instances of `plan` ask of its host, and which ask what.
fn asked(graph: &TaskGraph, plan: &Plan, me: usize) -> (Amount, String) {
    let (mut cpus, mut memory) = (0.0, 0u64);
    let mut tasks = Vec::new();
    for (v, def) in graph.vertices.iter().enumerate() {
        // An isolated instance's channel costs cores of its own at its expected rate.
        let channel = if plan.isolated.iter().any(|(i, _)| *i == v) {
            crate::expected::channel_cores(&def.resources)
        } else {
            0.0
        };
        for (i, _) in plan.workers[v].iter().enumerate().filter(|(_, &w)| w == me) {
            let r = &def.resources;
            cpus += r.cpus + channel;
            memory = memory.saturating_add(r.memory);
            tasks.push(format!(
                "{}[{i}] {} cores, {}",
                def.name,
                r.cpus,
                crate::format_bytes(r.memory)
            ));
        }
    }
    // Threads of one worker share its cores: it cannot hold more than its share.
    let share = plan.world[me].cpus;
    let capped = if cpus > share { format!(", at most its {share} cores") } else { String::new() };
    (Amount { cpus: cpus.min(share), memory }, format!("{}{capped}", tasks.join("; ")))
}

/// Admits the job of `graph` planned as `plan` (collective), as [`Admission::from_env`]
/// says: `Some` hold to keep while the job runs, `None` when jobs are shared.
///
/// # Errors
/// [`Error::Plan`]: refused (or queued past the timeout), naming each worker that did
/// not fit; a bad setting; communication errors.
pub(crate) fn admit(
    comm: &Communicator,
    graph: &TaskGraph,
    plan: &Plan,
    me: usize,
) -> Result<Option<Held>> {
    let mode = Admission::from_env()?;
    if mode == Admission::Shared {
        return Ok(None);
    }
    let limit = timeout()?;
    let (ask, tasks) = asked(graph, plan, me);
    let host = Offer::host()?;
    let capacity = Amount { cpus: host.cpus, memory: host.memory };
    let job = std::env::var("HEDDLE_RUN_ID").unwrap_or_else(|_| "unnamed".into());
    let started = Instant::now();
    let mut pause = Duration::from_millis(20);
    let mut waited = false;
    loop {
        let held = if ask.cpus > 0.0 || ask.memory > 0 {
            ledger::take(ask, capacity, comm.rank(), &job).map(Some)
        } else {
            Ok(None)
        };
        let short: Option<String> =
            held.as_ref().err().map(|e| format!("its tasks ({tasks}): {e}"));
        let gathered: Vec<(Option<String>, bool)> =
            comm.allgather_object(&(short, started.elapsed() >= limit))?;
        // Rank 0's clock decides, so that every worker stops waiting together.
        let expired = gathered[0].1;
        let all: Vec<Option<String>> = gathered.into_iter().map(|(s, _)| s).collect();
        if all.iter().all(Option::is_none) {
            if waited && comm.rank() == 0 {
                tracing::warn!("admitted after waiting {:.1} s", started.elapsed().as_secs_f64());
            }
            return held.map_err(Error::Plan);
        }
        drop(held);
        let why: Vec<String> = all
            .iter()
            .enumerate()
            .filter_map(|(r, s)| {
                s.as_ref().map(|s| format!("rank {r} on host {}: {s}", plan.world[r].host))
            })
            .collect();
        match mode {
            Admission::Refuse => {
                return Err(Error::Plan(format!(
                    "the job is not admitted beside the jobs already running: {}; wait for \
                     them, ask for less, or set admission = \"queue\" to wait",
                    why.join("; ")
                )))
            }
            _ if expired => {
                return Err(Error::Plan(format!(
                    "the job waited {:.0} s for room and was not admitted: {}",
                    started.elapsed().as_secs_f64(),
                    why.join("; ")
                )))
            }
            _ => {
                if !waited && comm.rank() == 0 {
                    tracing::warn!("waiting for room beside other jobs: {}", why.join("; "));
                }
                waited = true;
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}
