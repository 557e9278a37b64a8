//! The job master: admits workers that prove they hold the job token, hands out the peer
//! table once all have joined, releases them together once all are connected, and then
//! stays off the data path: heartbeats both ways tell workers and master that the other is
//! alive, and when a worker reports a failure — or falls silent for the heartbeat timeout
//! (stopped, hung or cut off) — it tells every other worker, so the whole job aborts with
//! that cause (the first one is kept for the launcher to print).

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

use heddle_comm::AbortCause;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::channel::Channel;
use crate::control::{Control, PeerInfo};
use crate::secure::{self, ca::JobCa, Security};
use crate::{Error, Result};

/// The longest the master waits for a worker to take a message before the job starts.
const START_SEND: Duration = Duration::from_secs(10);

/// The longest the master waits for a running worker to take the news of an abort: a
/// worker that stopped reading must not hold the news up from the others.
const ABORT_SEND: Duration = Duration::from_secs(1);

/// How the master is set up.
#[derive(Debug, Clone)]
pub struct MasterConfig {
    /// Number of workers expected.
    pub world_size: usize,
    /// The job token workers must prove they know.
    pub token: String,
    /// How long workers have to register and connect.
    pub init_timeout: Duration,
    /// Where to listen (`127.0.0.1:0` for a local job).
    pub bind: SocketAddr,
    /// How often the master tells workers it is alive.
    pub heartbeat: Duration,
    /// Silence after which a running worker is declared failed.
    pub heartbeat_timeout: Duration,
    /// What protects the connections (`HEDDLE_SECURITY`).
    pub security: Security,
}

/// The master's credentials when links use TLS: the job CA and the control port's TLS.
pub(crate) struct Credentials {
    pub(crate) ca: JobCa,
    pub(crate) tls: Arc<rustls::ServerConfig>,
    /// The fingerprint of the master's certificate.
    pub(crate) fingerprint: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials").field("fingerprint", &self.fingerprint).finish()
    }
}

impl Credentials {
    fn new() -> Result<Credentials> {
        let ca = JobCa::new()?;
        let (cert, key) = ca.issue_master()?;
        let fingerprint = secure::fingerprint(&cert);
        Ok(Credentials { tls: secure::tls::master_server(cert, key)?, ca, fingerprint })
    }
}

/// A running job master (a thread of the launching process).
#[derive(Debug)]
pub struct JobMaster {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    failure: Arc<Mutex<Option<AbortCause>>>,
    /// Per rank: its connection closed and everything it sent was handled.
    closed: Arc<Mutex<Vec<bool>>>,
    silent: Arc<Mutex<Option<usize>>>,
    start_failure: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
}

impl JobMaster {
    /// Binds and starts serving.
    ///
    /// # Errors
    /// [`Error::Io`] if the address cannot be bound; [`Error::Auth`] if the job's
    /// certificate authority cannot be made.
    pub fn start(config: MasterConfig) -> Result<JobMaster> {
        let credentials =
            if config.security.uses_tls() { Some(Arc::new(Credentials::new()?)) } else { None };
        let listener = TcpListener::bind(config.bind)
            .map_err(|e| Error::io(format!("binding the job master to {}", config.bind), e))?;
        let addr = listener.local_addr().map_err(|e| Error::io("reading the master address", e))?;
        let stop = Arc::new(AtomicBool::new(false));
        let failure = Arc::new(Mutex::new(None));
        let closed = Arc::new(Mutex::new(vec![false; config.world_size]));
        let silent = Arc::new(Mutex::new(None));
        let start_failure = Arc::new(Mutex::new(None));
        let reports = Reports {
            failure: failure.clone(),
            closed: closed.clone(),
            silent: silent.clone(),
            start_failure: start_failure.clone(),
        };
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("heddle-master".into())
            .spawn(move || serve(listener, config, credentials, stop2, &reports))
            .map_err(|e| Error::io("starting the job master thread", e))?;
        Ok(JobMaster { addr, stop, failure, closed, silent, start_failure, thread: Some(thread) })
    }

    /// Whether rank `rank`'s connection has closed and all it reported was handled (so
    /// [`JobMaster::failure`] already holds any failure it reported).
    pub fn settled(&self, rank: usize) -> bool {
        self.closed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(rank)
            .copied()
            .unwrap_or(true)
    }

    /// Why the job could not start (a rank did not join in time, the master was stopped),
    /// once that happened.
    pub fn start_failure(&self) -> Option<String> {
        self.start_failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Whether every rank has joined, connected to its peers and then left the job.
    pub fn all_left(&self) -> bool {
        self.closed.lock().unwrap_or_else(PoisonError::into_inner).iter().all(|c| *c)
    }

    /// The rank declared failed because it sent no heartbeat for the timeout (stopped,
    /// hung or cut off), if one was: it will not end by itself.
    pub fn silent(&self) -> Option<usize> {
        *self.silent.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The first failure a worker reported, once one did (the job was then aborted).
    pub fn failure(&self) -> Option<AbortCause> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// The address workers connect to (`HEDDLE_MASTER`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and closes every worker connection.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for JobMaster {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// A worker admitted to the job.
pub(crate) struct Joined {
    pub(crate) channel: Channel,
    pub(crate) peer: PeerInfo,
    /// Its certificate (DER, hex), when links use TLS.
    pub(crate) cert: Option<String>,
    /// The master's proof for its [`Control::Table`].
    pub(crate) proof: String,
}

/// What the master learns while the job runs, shared with [`JobMaster`].
struct Reports {
    failure: Arc<Mutex<Option<AbortCause>>>,
    closed: Arc<Mutex<Vec<bool>>>,
    /// The rank declared failed for its silence, if one was.
    silent: Arc<Mutex<Option<usize>>>,
    /// Why the job could not start.
    start_failure: Arc<Mutex<Option<String>>>,
}

fn serve(
    listener: TcpListener,
    config: MasterConfig,
    credentials: Option<Arc<Credentials>>,
    stop: Arc<AtomicBool>,
    reports: &Reports,
) {
    let (tx, rx) = mpsc::channel::<Joined>();
    let started = Arc::new(AtomicBool::new(false));
    let ca = credentials.as_ref().map(|c| hex::encode(c.ca.cert()));
    let acceptor = {
        let (config, stop, started) = (config.clone(), stop.clone(), started.clone());
        std::thread::spawn(move || {
            crate::admission::accept_loop(listener, &config, credentials, &stop, &started, tx)
        })
    };
    let deadline = Instant::now() + config.init_timeout;
    let mut joined: Vec<Option<Joined>> = (0..config.world_size).map(|_| None).collect();
    let outcome = (|| -> std::result::Result<(), String> {
        while joined.iter().any(Option::is_none) {
            if stop.load(Ordering::SeqCst) {
                return Err("the job was stopped".into());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let missing: Vec<usize> =
                    (0..joined.len()).filter(|&r| joined[r].is_none()).collect();
                return Err(format!(
                    "timed out after {:?} waiting for ranks {missing:?} to join",
                    config.init_timeout
                ));
            }
            if let Ok(j) = rx.recv_timeout(left.min(Duration::from_millis(50))) {
                let r = j.peer.rank;
                if joined[r].is_some() {
                    tracing::warn!("refused a second registration for rank {r}");
                    let _ = j.channel.send(
                        &Control::Refused { reason: format!("rank {r} is already registered") },
                        START_SEND,
                    );
                } else {
                    joined[r] = Some(j);
                }
            }
        }
        let peers: Vec<PeerInfo> = joined.iter().flatten().map(|j| j.peer.clone()).collect();
        for j in joined.iter().flatten() {
            let table = Control::Table {
                peers: peers.clone(),
                ca: ca.clone(),
                cert: j.cert.clone(),
                proof: j.proof.clone(),
            };
            j.channel.send(&table, START_SEND).map_err(|e| e.to_string())?;
        }
        for j in joined.iter().flatten() {
            let left =
                deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
            match j.channel.recv(Some(left)) {
                Ok(Control::Ready) => {}
                Ok(other) => {
                    return Err(format!("rank {} sent {other:?} instead of ready", j.peer.rank))
                }
                Err(e) => {
                    return Err(format!(
                        "rank {} did not connect to its peers in time: {e}",
                        j.peer.rank
                    ))
                }
            }
        }
        for j in joined.iter().flatten() {
            j.channel.send(&Control::Go, START_SEND).map_err(|e| e.to_string())?;
        }
        Ok(())
    })();
    started.store(true, Ordering::SeqCst);
    let peers: Vec<PeerInfo> = joined.iter().flatten().map(|j| j.peer.clone()).collect();
    let mut streams: Vec<(usize, Channel)> =
        joined.into_iter().flatten().map(|j| (j.peer.rank, j.channel)).collect();
    match outcome {
        Err(reason) => {
            if !stop.load(Ordering::SeqCst) {
                tracing::error!("job start failed: {reason}");
            }
            *reports.start_failure.lock().unwrap_or_else(PoisonError::into_inner) =
                Some(reason.clone());
            for (_, s) in &streams {
                let _ = s.send(&Control::Abort { reason: reason.clone() }, START_SEND);
            }
            // Keep the connections open: workers treat their closing as the job's end.
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(()) => {
            crate::observatory::global().running(&peers);
            relay_failures(&mut streams, &peers, &config, &stop, reports)
        }
    }
    for (_, s) in &streams {
        s.shutdown();
    }
    let _ = acceptor.join();
}

/// While the job runs: the first failure a worker reports, or the first worker silent for
/// the heartbeat timeout, is kept and sent to every other worker; every heartbeat interval
/// each worker hears from the master. The connections stay open until `stop`: workers
/// treat their closing as the job's end.
fn relay_failures(
    streams: &mut [(usize, Channel)],
    peers: &[PeerInfo],
    config: &MasterConfig,
    stop: &AtomicBool,
    reports: &Reports,
) {
    // `None`: the worker's connection closed (after everything it sent).
    let (tx, rx) = mpsc::channel::<(usize, Option<Control>)>();
    let mut readers = Vec::new();
    for (rank, s) in streams.iter() {
        let (rank, tx, reader) = (*rank, tx.clone(), s.clone());
        readers.push(std::thread::spawn(move || {
            // Ends when the worker exits or the master shuts the connection down.
            while let Ok(msg) = reader.recv(None) {
                if tx.send((rank, Some(msg))).is_err() {
                    return;
                }
            }
            let _ = tx.send((rank, None));
        }));
    }
    drop(tx);
    // When each worker was last heard from; `None` once it was declared failed.
    let mut heard = vec![Some(Instant::now()); config.world_size];
    // Ranks whose connection failed a write: a frame may be half-written, so nothing more
    // is written there.
    let mut broken = vec![false; config.world_size];
    let mut next_beat = Instant::now();
    let mut last_pass = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now - last_pass > config.heartbeat_timeout {
            // The master itself stalled (the launcher was suspended, say): the silence
            // was its own, so nobody is blamed for it.
            heard.iter_mut().flatten().for_each(|h| *h = now);
        }
        last_pass = now;
        if now >= next_beat {
            next_beat = now + config.heartbeat;
            for (rank, s) in streams.iter() {
                // A worker that stopped reading must not block the master's heartbeats.
                if !broken[*rank] && s.send(&Control::Heartbeat, config.heartbeat).is_err() {
                    broken[*rank] = true;
                }
            }
        }
        // Everything already received counts before anyone is found silent.
        while let Ok((from, msg)) = rx.try_recv() {
            handle(streams, &mut broken, &mut heard, from, msg, reports);
        }
        if let Some(rank) = silent(&heard, reports, config.heartbeat_timeout) {
            heard[rank] = None;
            crate::observatory::global().worker_state(rank, "silent");
            // The timeout, not the silence measured, so the message is the same however
            // late this pass came.
            let cause = no_heartbeat(rank, peers, config.heartbeat_timeout);
            abort_all(streams, &mut broken, rank, cause, reports);
            // Only now may a launcher kill it: the others heard why first.
            *reports.silent.lock().unwrap_or_else(PoisonError::into_inner) = Some(rank);
        }
        let wait =
            next_beat.saturating_duration_since(Instant::now()).min(Duration::from_millis(20));
        match rx.recv_timeout(wait) {
            Ok((from, msg)) => handle(streams, &mut broken, &mut heard, from, msg, reports),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(Duration::from_millis(20))
            }
        }
    }
    for (_, s) in streams.iter() {
        s.shutdown();
    }
    for r in readers {
        let _ = r.join();
    }
}

/// One message from worker `from` (`None`: its connection closed).
fn handle(
    streams: &mut [(usize, Channel)],
    broken: &mut [bool],
    heard: &mut [Option<Instant>],
    from: usize,
    msg: Option<Control>,
    reports: &Reports,
) {
    if let Some(Some(h)) = heard.get_mut(from) {
        *h = Instant::now();
    }
    let observed = crate::observatory::global();
    match msg {
        None => {
            observed.worker_state(from, "exited");
            if let Some(c) =
                reports.closed.lock().unwrap_or_else(PoisonError::into_inner).get_mut(from)
            {
                *c = true;
            }
        }
        Some(Control::Heartbeat) => observed.heard(from, None),
        Some(Control::Metrics { snapshot }) => observed.heard(from, Some(*snapshot)),
        Some(Control::Failed { cause }) => {
            observed.worker_state(from, "failed");
            abort_all(streams, broken, from, cause, reports)
        }
        Some(other) => tracing::warn!("rank {from} sent an unexpected message: {other:?}"),
    }
}

/// The first running worker not heard from for longer than `timeout`.
fn silent(heard: &[Option<Instant>], reports: &Reports, timeout: Duration) -> Option<usize> {
    let closed = reports.closed.lock().unwrap_or_else(PoisonError::into_inner);
    heard.iter().enumerate().find_map(|(rank, last)| {
        let silence = (*last)?.elapsed();
        (silence > timeout && !closed.get(rank).copied().unwrap_or(true)).then_some(rank)
    })
}

/// The cause of a job whose worker `rank` fell silent for longer than `timeout`.
fn no_heartbeat(rank: usize, peers: &[PeerInfo], timeout: Duration) -> AbortCause {
    let whereabouts = peers
        .iter()
        .find(|p| p.rank == rank)
        .map(|p| format!(" on host {} (pid {})", p.host, p.pid))
        .unwrap_or_default();
    AbortCause::new(
        rank,
        NO_HEARTBEAT,
        format!(
            "no heartbeat for {:.1} s from rank {rank}{whereabouts}: the worker is stopped, \
             hung or cut off (HEDDLE_HEARTBEAT_TIMEOUT_S, --heartbeat-timeout)",
            timeout.as_secs_f64()
        ),
    )
}

/// The [`AbortCause::kind`] of a worker declared failed for its silence.
const NO_HEARTBEAT: &str = "NoHeartbeat";

/// Keeps `cause` if it is the job's first failure and sends it to every worker but `from`.
fn abort_all(
    streams: &mut [(usize, Channel)],
    broken: &mut [bool],
    from: usize,
    cause: AbortCause,
    reports: &Reports,
) {
    let mut first = reports.failure.lock().unwrap_or_else(PoisonError::into_inner);
    if first.is_some() {
        return;
    }
    *first = Some(cause.clone());
    drop(first);
    for (rank, s) in streams.iter_mut().filter(|(rank, _)| *rank != from) {
        if broken[*rank] {
            continue;
        }
        if let Err(e) = s.send(&Control::Aborted { cause: cause.clone() }, ABORT_SEND) {
            tracing::debug!("could not tell rank {rank} of the abort: {e}");
            broken[*rank] = true;
        }
    }
}
