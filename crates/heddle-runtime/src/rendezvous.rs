//! Where a worker finds its job master when no `heddle run` started one: under `mpirun`,
//! `srun` or a Kubernetes Indexed Job, rank 0 hosts the master on a thread of its own
//! process, and the other ranks learn its address and the job token
//!
//! - from `HEDDLE_MASTER` (and `HEDDLE_JOB_TOKEN` or `HEDDLE_JOB_TOKEN_FILE`), when rank 0
//!   listens where they expect it (`HEDDLE_MASTER_LISTEN`, as in Kubernetes);
//! - otherwise, when the launcher runs a PMIx server (Open MPI's `mpirun`, `srun
//!   --mpi=pmix`) and `HEDDLE_RENDEZVOUS` is not set, from the launcher's key-value store
//!   ([`crate::pmix`]): no shared directory needed;
//! - otherwise from a **rendezvous file** that rank 0 writes (mode 0600, in a directory of
//!   this user's alone) and removes once every rank has joined, named for the launcher's job
//!   id: in `HEDDLE_RENDEZVOUS` (a directory all hosts share), or in a private directory of
//!   this host when the launcher says every rank runs here.
//!
//! Rank 0 keeps the master until every other rank has left the job, however its program
//! ends (an `atexit` handler waits for them), so no rank loses its master early.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use heddle_comm::private;
use serde::{Deserialize, Serialize};

use crate::master::{JobMaster, MasterConfig};
use crate::pmix::Pmix;
use crate::{Error, Result, WorkerEnv};

/// How a worker reaches its master: `host:port` and the job token.
pub(crate) struct MasterLink {
    pub(crate) addr: String,
    pub(crate) token: String,
}

/// What rank 0 leaves for the others.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    master: String,
    token: String,
    world_size: usize,
    host: String,
    pid: u32,
}

/// The master rank 0 hosts, and its rendezvous file until every rank has joined.
struct Hosted {
    master: JobMaster,
    /// Whether this rank joined the job: if not, nobody waits for it at exit.
    joined: bool,
    file: Option<PathBuf>,
    /// The PMIx session the note was published through, kept until every rank joined.
    pmix: Option<Pmix>,
    size: usize,
    grace: Duration,
}

/// The PMIx key of rank 0's note.
const PMIX_KEY: &str = "heddle.master";

static HOSTED: Mutex<Option<Hosted>> = Mutex::new(None);

/// Set when rank 0 closes the master it hosted, at its exit: its own worker's watch on the
/// master connection must not take that for a lost master.
static CLOSING: AtomicBool = AtomicBool::new(false);

/// Whether this process is closing the master it hosted.
pub(crate) fn closing() -> bool {
    CLOSING.load(Ordering::SeqCst)
}

/// The master of `env`'s job, hosting it on rank 0 when nobody else does; `None` for a
/// world of one without a master.
///
/// # Errors
/// [`Error::Env`] for a missing token or an address that does not parse; [`Error::Io`] or
/// [`Error::Timeout`] when the rendezvous file cannot be written or never appears.
pub(crate) fn master_link(env: &WorkerEnv) -> Result<Option<MasterLink>> {
    let token = match (&env.token, &env.token_file) {
        (Some(t), _) => Some(t.clone()),
        (None, Some(f)) => Some(crate::token_file::read(f)?),
        (None, None) => None,
    };
    if env.rank == 0 && env.size > 1 && env.master_listen.is_some() {
        let token = token.ok_or_else(|| {
            Error::Env(
                "HEDDLE_MASTER_LISTEN is set but neither HEDDLE_JOB_TOKEN nor \
                 HEDDLE_JOB_TOKEN_FILE is: rank 0 needs the job token to host the master"
                    .into(),
            )
        })?;
        let addr = host(env, &token, None)?;
        return Ok(Some(MasterLink { addr, token }));
    }
    if let Some(addr) = &env.master {
        let token = token.ok_or_else(|| {
            Error::Env("HEDDLE_MASTER is set but HEDDLE_JOB_TOKEN (or _FILE) is not".into())
        })?;
        return Ok(Some(MasterLink { addr: addr.clone(), token }));
    }
    if env.size == 1 {
        return Ok(None);
    }
    if env.rendezvous.is_none() && env.launch.pmix {
        match Pmix::connect() {
            Some(pmix) => return through_pmix(env, pmix).map(Some),
            None if !env.launch.one_host => {
                return Err(Error::Env(format!(
                    "rank {}: the ranks span several hosts and {}'s PMIx server cannot be \
                     reached (is libpmix.so.2 installed?): set HEDDLE_RENDEZVOUS to a \
                     directory every host shares, or HEDDLE_MASTER to a running `heddle master`",
                    env.rank, env.launch.name
                )))
            }
            None => {}
        }
    }
    let file = note_path(env)?;
    if env.rank == 0 {
        let token = hex::encode(rand::random::<[u8; 32]>());
        let addr = host(env, &token, Some(&file))?;
        return Ok(Some(MasterLink { addr, token }));
    }
    read_note(&file, env).map(Some)
}

/// Rank 0 hosts the master and publishes the note through the launcher's PMIx server;
/// the others read it from there.
fn through_pmix(env: &WorkerEnv, pmix: Pmix) -> Result<MasterLink> {
    if pmix.rank() as usize != env.rank {
        return Err(Error::Env(format!(
            "{} says this is rank {} but the launcher's PMIx server says rank {} (of \
             namespace {}): the launcher's variables disagree",
            env.launch.rank_var,
            env.rank,
            pmix.rank(),
            pmix.namespace()
        )));
    }
    tracing::debug!(namespace = %pmix.namespace(), rank = env.rank, "rendezvous through PMIx");
    if env.rank == 0 {
        let token = hex::encode(rand::random::<[u8; 32]>());
        let addr = host(env, &token, None)?;
        let note = Note {
            master: addr.clone(),
            token: token.clone(),
            world_size: env.size,
            host: crate::bootstrap::host_id(),
            pid: std::process::id(),
        };
        let json = serde_json::to_string(&note).map_err(|e| Error::Protocol(e.to_string()))?;
        pmix.publish(PMIX_KEY, &json)?;
        // Finalized once every rank has joined (the others have read the note by then).
        if let Some(h) = HOSTED.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            h.pmix = Some(pmix);
        }
        return Ok(MasterLink { addr, token });
    }
    let json = pmix.lookup(0, PMIX_KEY, env.init_timeout)?;
    drop(pmix);
    let note = serde_json::from_str::<Note>(&json).map_err(|e| {
        Error::Env(format!(
            "rank 0's {PMIX_KEY:?} in the launcher's PMIx store does not parse: {e}"
        ))
    })?;
    check_note(Some(note), Path::new("the launcher's PMIx store"), env, "")?
        .ok_or_else(|| Error::Env("rank 0's note in the launcher's PMIx store is stale".into()))
}

/// Every rank has joined: the rendezvous file (or the PMIx session) has served.
pub(crate) fn joined() {
    let mut hosted = HOSTED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(h) = hosted.as_mut() {
        h.joined = true;
        h.pmix = None;
        if let Some(f) = h.file.take() {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Starts the master on rank 0 and, with `file`, leaves its address there; returns that
/// address.
fn host(env: &WorkerEnv, token: &str, file: Option<&Path>) -> Result<String> {
    let bind = listen_addr(env)?;
    let master = JobMaster::start(MasterConfig {
        world_size: env.size,
        token: token.to_string(),
        init_timeout: env.init_timeout,
        bind,
        heartbeat: env.heartbeat,
        heartbeat_timeout: env.heartbeat_timeout,
        security: env.security,
    })?;
    let bound = master.addr();
    let advertised = if bound.ip().is_unspecified() {
        SocketAddr::new(first_address().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST)), bound.port())
    } else {
        bound
    };
    if let Some(file) = file {
        let note = Note {
            master: advertised.to_string(),
            token: token.to_string(),
            world_size: env.size,
            host: crate::bootstrap::host_id(),
            pid: std::process::id(),
        };
        write_note(file, &note)?;
    }
    let grace = 2 * env.heartbeat_timeout;
    *HOSTED.lock().unwrap_or_else(PoisonError::into_inner) = Some(Hosted {
        master,
        joined: false,
        file: file.map(Path::to_path_buf),
        pmix: None,
        size: env.size,
        grace,
    });
    // SAFETY: registers a plain extern "C" function with no arguments.
    if unsafe { libc::atexit(keep_master_until_all_left) } != 0 {
        tracing::warn!("cannot wait for the other ranks at exit: they may lose the master early");
    }
    // Rank 0 reaches its master where the others do: its peer listener binds to the
    // address this connection leaves from.
    Ok(advertised.to_string())
}

/// At rank 0's exit: the master serves until every other rank has left the job (or was
/// declared failed, or `grace` after a failure), then closes; at once if the job never
/// started or this rank did not join it.
extern "C" fn keep_master_until_all_left() {
    let Some(hosted) = HOSTED.lock().unwrap_or_else(PoisonError::into_inner).take() else {
        return;
    };
    if let Some(f) = &hosted.file {
        let _ = std::fs::remove_file(f);
    }
    let mut failed_at = None;
    loop {
        let silent = hosted.master.silent();
        if !hosted.joined
            || hosted.master.start_failure().is_some()
            || (1..hosted.size).all(|r| hosted.master.settled(r) || silent == Some(r))
        {
            break;
        }
        if hosted.master.failure().is_some() {
            let at = *failed_at.get_or_insert_with(Instant::now);
            if at.elapsed() > hosted.grace {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    CLOSING.store(true, Ordering::SeqCst);
    hosted.master.shutdown();
}

/// `HEDDLE_MASTER_LISTEN` (`IP` or `IP:PORT`), else an ephemeral port on loopback when
/// every rank runs on this host, on this host's first network address otherwise.
fn listen_addr(env: &WorkerEnv) -> Result<SocketAddr> {
    if let Some(v) = &env.master_listen {
        if let Ok(a) = v.parse::<SocketAddr>() {
            return Ok(a);
        }
        return v.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 0)).map_err(|_| {
            Error::Env(format!(
                "HEDDLE_MASTER_LISTEN={v:?} is neither an IP address nor IP:PORT (as in \
                 0.0.0.0:29500)"
            ))
        });
    }
    if env.launch.one_host {
        return Ok(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
    }
    let ip = first_address().ok_or_else(|| {
        Error::Env(
            "the ranks span several hosts but this host has no network address up besides \
             loopback: set HEDDLE_MASTER_LISTEN to the address rank 0 listens on"
                .into(),
        )
    })?;
    Ok(SocketAddr::new(ip, 0))
}

/// The first IPv4 address of an interface that is up and not loopback.
pub(crate) fn first_address() -> Option<IpAddr> {
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list we free below.
    if unsafe { libc::getifaddrs(&mut list) } != 0 {
        return None;
    }
    let mut found = None;
    let mut cur = list;
    while !cur.is_null() && found.is_none() {
        // SAFETY: `cur` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*cur };
        let up = ifa.ifa_flags & (libc::IFF_UP as u32) != 0;
        let loopback = ifa.ifa_flags & (libc::IFF_LOOPBACK as u32) != 0;
        if up && !loopback && !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points to a sockaddr whose family says its real type.
            let family = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if family == libc::AF_INET {
                // SAFETY: an AF_INET address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                found = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr))));
            }
        }
        cur = ifa.ifa_next;
    }
    // SAFETY: frees the list getifaddrs allocated, once.
    unsafe { libc::freeifaddrs(list) };
    found
}

/// The rendezvous file of `env`'s job, its directory made private if missing.
fn note_path(env: &WorkerEnv) -> Result<PathBuf> {
    let id = env.launch.job_id.as_deref().unwrap_or("job");
    let dir = match &env.rendezvous {
        Some(d) => d.clone(),
        None => crate::job_files::base_dir()
            .join(format!("heddle-rendezvous-{}", private::effective_uid())),
    };
    if env.rank == 0 {
        private::ensure_dir(&dir).map_err(|e| match e {
            private::EnsureDirError::Io(p, source) => {
                Error::io(format!("making the rendezvous directory {}", p.display()), source)
            }
            private::EnsureDirError::NotPrivate(e) => Error::Comm(e),
        })?;
    }
    let safe: String =
        id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).collect();
    Ok(dir.join(format!("job-{safe}.json")))
}

/// Writes the note whole under a temporary name, then renames it into place.
fn write_note(file: &Path, note: &Note) -> Result<()> {
    let bytes = serde_json::to_vec(note).map_err(|e| Error::Protocol(e.to_string()))?;
    crate::token_file::replace_private(file, &bytes)
        .map_err(|e| Error::io(format!("writing the rendezvous file {}", file.display()), e))
}

/// Waits (up to the init timeout) for rank 0's note of this job; a note left by a rank 0
/// of this host that is gone is stale and skipped.
fn read_note(file: &Path, env: &WorkerEnv) -> Result<MasterLink> {
    let deadline = Instant::now() + env.init_timeout;
    let me = crate::bootstrap::host_id();
    loop {
        match private::open_owned(file, false) {
            Ok(f) => {
                if let Some(link) = check_note(serde_json::from_reader(f).ok(), file, env, &me)? {
                    return Ok(link);
                }
            }
            // Someone else's file, or readable by others: never trusted.
            Err(e @ heddle_comm::Error::NotPrivate { .. }) => return Err(Error::Comm(e)),
            Err(_) => {}
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout(format!(
                "rank {} waited {:?} for rank 0 to write {} (HEDDLE_INIT_TIMEOUT_S): is \
                 HEDDLE_RENDEZVOUS a directory every host shares, and did rank 0 start?",
                env.rank,
                env.init_timeout,
                file.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A note that is whole and not stale gives the master; one of another world size is an
/// error.
fn check_note(
    note: Option<Note>,
    file: &Path,
    env: &WorkerEnv,
    me: &str,
) -> Result<Option<MasterLink>> {
    let Some(note) = note else { return Ok(None) };
    if note.host == me && !heddle_comm::transport::shm::process_alive(note.pid) {
        return Ok(None);
    }
    if note.world_size != env.size {
        return Err(Error::Env(format!(
            "rank 0 of this job ({}) says the world has {} ranks, this rank says {} ({}): the \
             launcher's variables disagree",
            file.display(),
            note.world_size,
            env.size,
            env.launch.size_var
        )));
    }
    Ok(Some(MasterLink { addr: note.master, token: note.token }))
}

/// Without `HEDDLE_MASTER`, rank 0 hosts the master and leaves its address in the
/// launcher's PMIx store or a rendezvous file: that needs the launcher's job id, and PMIx
/// or a directory every host sees.
pub(crate) fn check_rendezvous(
    rank: usize,
    size: usize,
    launch: &crate::env::Launch,
    dir: Option<&std::path::Path>,
) -> Result<()> {
    let what = format!("this is rank {rank} of {size} (from {}) but HEDDLE_MASTER is not set", {
        if launch.rank_var.is_empty() {
            "the environment".to_string()
        } else {
            format!("{} and {}", launch.rank_var, launch.size_var)
        }
    });
    if launch.name == "heddle run" && dir.is_none() {
        return Err(Error::Env(format!(
            "{what}; start the job with `heddle run -n {size} -- PROGRAM`"
        )));
    }
    if launch.job_id.is_none() {
        return Err(Error::Env(format!(
            "{what}, and {} gives no job id: set HEDDLE_RUN_ID to one value in every rank \
             (unique to this run), or start the job with `heddle run -n {size} -- PROGRAM`",
            launch.name
        )));
    }
    if dir.is_none() && !launch.one_host && !launch.pmix {
        return Err(Error::Env(format!(
            "{what}, the ranks span several hosts and {} runs no PMIx server: set \
             HEDDLE_RENDEZVOUS to a directory every host shares (rank 0 leaves the master's \
             address there), or HEDDLE_MASTER to a running `heddle master`",
            launch.name
        )));
    }
    Ok(())
}
