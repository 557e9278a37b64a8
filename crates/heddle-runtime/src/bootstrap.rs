//! Worker bootstrap: register with the job master, receive the peer table, connect to
//! every peer (shared memory on the same host, TCP otherwise, each TCP link
//! authenticated with the job token), wait for the start signal, then watch the master.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_comm::transport::shm::ShmSegment;
use heddle_comm::{CommConfig, Communicator, TransportChoice, WorldBuilder};

use crate::channel::Channel;
use crate::control::{self, Control, PeerInfo};
use crate::peer_links::{accept_peers, connect_peer, LinkSecurity};
use crate::secure::{self, ca::WorkerKey, tls::PeerTls};
use crate::{Error, Result, WorkerEnv};

/// Joins the job described by the environment and returns the world communicator.
/// Without a launcher this is a world of one.
///
/// # Errors
/// [`Error::Env`] for a bad environment; [`Error::Refused`], [`Error::Timeout`],
/// [`Error::Auth`] or I/O errors when the job cannot start.
pub fn init() -> Result<Communicator> {
    crate::logging::install_logging("heddle: worker", None);
    crate::env::check_known_keys(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))?;
    let config = CommConfig::from_env()?;
    if config.transport == TransportChoice::Mpi {
        return crate::mpi_world::init(config);
    }
    init_with(&WorkerEnv::from_env()?, config)
}

/// [`init`] with an explicit environment and configuration.
///
/// # Errors
/// As [`init`].
pub fn init_with(env: &WorkerEnv, config: CommConfig) -> Result<Communicator> {
    crate::logging::install_logging(&format!("heddle: rank {}", env.rank), None);
    if config.transport == TransportChoice::Mpi {
        return crate::mpi_world::init(config);
    }
    let Some(link) = crate::rendezvous::master_link(env)? else {
        return Ok(heddle_comm::solo(config)?);
    };
    let (master, token) = (link.addr.as_str(), link.token.as_str());
    let deadline = Instant::now() + env.init_timeout;
    let sock = connect_retrying(master, deadline)?;
    let local_ip = sock.local_addr().map_err(|e| Error::io("reading the local address", e))?.ip();
    set_deadline(&sock, deadline)?;
    let mut opening = secure::open_to_master(sock, env.security, deadline)?;
    let first = control::recv(&mut opening.stream).map_err(|e| opening.first_message_error(e));
    let Control::Challenge { nonce } = first? else {
        return Err(Error::Protocol("the master did not send a challenge".into()));
    };

    let tcp_only = config.transport == TransportChoice::Tcp;
    let mut builder = WorldBuilder::new(env.rank, env.size, config)?;
    builder.set_attempt(env.attempt);
    let listener = TcpListener::bind(SocketAddr::new(local_ip, 0))
        .map_err(|e| Error::io(format!("binding a peer listener on {local_ip}"), e))?;
    let tcp_addr =
        listener.local_addr().map_err(|e| Error::io("reading the listener address", e))?;
    let segment = if tcp_only { None } else { create_segment(&builder, token, env.rank) };
    let me = PeerInfo {
        rank: env.rank,
        host: host_id(),
        pid: std::process::id(),
        tcp_addr: tcp_addr.to_string(),
        shm_path: segment.as_ref().map(|s| s.path().display().to_string()),
        tcp_only,
        cert: None,
    };
    let (ms, joined) = register(opening, &nonce, me.clone(), env, token, deadline)?;
    let peers = joined.peers;

    let names: Vec<String> = peers.iter().map(|p| p.host.clone()).collect();
    builder.set_hosts(host_numbers(&names))?;
    let use_shm = |p: &PeerInfo| {
        p.host == me.host
            && !p.tcp_only
            && !me.tcp_only
            && p.shm_path.is_some()
            && segment.is_some()
    };
    let sec = Arc::new(LinkSecurity {
        rank: env.rank,
        token: token.to_string(),
        security: env.security,
        tls: joined.tls,
        certs: peers.iter().map(|p| p.cert.clone()).collect(),
    });
    let expected: Vec<usize> =
        peers.iter().filter(|p| p.rank > env.rank && !use_shm(p)).map(|p| p.rank).collect();
    let acceptor = {
        let sec = sec.clone();
        std::thread::spawn(move || accept_peers(&listener, &sec, expected, deadline))
    };
    for p in peers.iter().filter(|p| p.rank != env.rank) {
        if use_shm(p) {
            let (own, path) = (
                segment.as_ref().expect("checked by use_shm"),
                p.shm_path.as_deref().unwrap_or_default(),
            );
            builder.add_shm(p.rank, own, Path::new(path))?;
        } else if p.rank < env.rank {
            builder.add_stream(p.rank, connect_peer(p, env.rank, &sec, deadline)?)?;
        }
    }
    for (rank, stream) in
        acceptor.join().map_err(|_| Error::Protocol("the peer acceptor panicked".into()))??
    {
        builder.add_stream(rank, stream)?;
    }
    ms.send(&Control::Ready, left(deadline))?;
    match ms.recv(Some(left(deadline))).map_err(|e| waiting_error(e, "the start signal", env))? {
        Control::Go => {}
        Control::Abort { reason } | Control::Refused { reason } => {
            return Err(Error::Refused(reason))
        }
        other => return Err(Error::Protocol(format!("expected the start signal, got {other:?}"))),
    }
    drop(segment); // every peer has mapped it: remove the name from /dev/shm
    crate::rendezvous::joined();
    let comm = builder.build()?;
    let abort = comm.abort_handle();
    // Failure reports and heartbeats share the master connection with its watcher.
    let (report, send_timeout) = (ms.clone(), env.heartbeat_timeout);
    abort.set_reporter(Box::new(move |cause| {
        if let Err(e) = report.send(&Control::Failed { cause: cause.clone() }, send_timeout) {
            tracing::warn!("could not tell the job master that this worker failed: {e}");
        }
    }));
    abort_on_panic(&abort, env.rank);
    send_heartbeats(ms.clone(), env.heartbeat, env.heartbeat_timeout);
    watch_master(ms, env, abort);
    tracing::info!(
        rank = env.rank,
        size = env.size,
        tcp_peers = comm.tcp_peers(),
        attempt = env.attempt,
        "joined the job"
    );
    Ok(comm)
}

/// What the master hands a registered worker.
struct Registered {
    peers: Vec<PeerInfo>,
    /// This worker's TLS for its peer links, when the master certified it.
    tls: Option<PeerTls>,
}

/// Registers as `me` on the opened master connection (challenged with `nonce`): proves the
/// token (bound to the master's certificate under TLS), asks for a certificate when links
/// may use TLS, and checks the master's own proof on the peer table it sends back.
fn register(
    mut opening: secure::Opening,
    nonce: &str,
    me: PeerInfo,
    env: &WorkerEnv,
    token: &str,
    deadline: Instant,
) -> Result<(Channel, Registered)> {
    let key = if env.security.uses_tls() { Some(WorkerKey::new()?) } else { None };
    let csr = key.as_ref().map(WorkerKey::request).transpose()?.map(hex::encode);
    let worker_nonce = control::nonce();
    let fingerprint = opening.fingerprint.clone();
    let message = control::register_proof(
        nonce,
        &fingerprint,
        env.rank,
        env.size,
        csr.as_deref().unwrap_or_default(),
    );
    let register = Control::Register {
        peer: me,
        world_size: env.size,
        csr,
        nonce: worker_nonce.clone(),
        mac: control::mac(token, &message),
    };
    control::send(&mut opening.stream, &register)?;
    match control::recv(&mut opening.stream)
        .map_err(|e| waiting_error(e, "the master's answer", env))?
    {
        Control::Accepted => {}
        Control::Refused { reason } | Control::Abort { reason } => {
            return Err(Error::Refused(reason))
        }
        other => return Err(Error::Protocol(format!("expected an answer, got {other:?}"))),
    }
    let label = format!("master|{nonce}|{worker_nonce}");
    let ms = Channel::new(opening.finish(token, &label, true, "the job master".into()))?;
    let (peers, ca, cert, proof) = match ms
        .recv(Some(left(deadline)))
        .map_err(|e| waiting_error(e, "the peer table", env))?
    {
        Control::Table { peers, ca, cert, proof } => (peers, ca, cert, proof),
        Control::Refused { reason } | Control::Abort { reason } => {
            return Err(Error::Refused(reason))
        }
        other => return Err(Error::Protocol(format!("expected the peer table, got {other:?}"))),
    };
    if !control::verify(token, &control::table_proof(&worker_nonce, &fingerprint), &proof) {
        return Err(Error::Auth(
            "the job master did not prove it knows the job token: another process answers              at HEDDLE_MASTER"
                .into(),
        ));
    }
    if peers.len() != env.size || peers.iter().enumerate().any(|(i, p)| p.rank != i) {
        return Err(Error::Protocol("the peer table does not list every rank once".into()));
    }
    let der = |what: &str, hex_der: String| {
        hex::decode(hex_der)
            .map(rustls::pki_types::CertificateDer::from)
            .map_err(|e| Error::Protocol(format!("the {what} in the peer table is not hex: {e}")))
    };
    let tls = match (key, ca, cert) {
        (Some(key), Some(ca), Some(cert)) => {
            Some(PeerTls::new(der("CA", ca)?, der("certificate", cert)?, key.private())?)
        }
        _ => None,
    };
    Ok((ms, Registered { peers, tls }))
}

/// What is left of `deadline` (at least a millisecond).
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))
}

fn waiting_error(e: Error, what: &str, env: &WorkerEnv) -> Error {
    match e {
        Error::Io { source, .. }
            if matches!(
                source.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            Error::Timeout(format!(
                "rank {} timed out after {:?} waiting for {what}: not every worker of {} \
                 joined (raise HEDDLE_INIT_TIMEOUT_S if they start slowly)",
                env.rank, env.init_timeout, env.size
            ))
        }
        other => other,
    }
}

pub(crate) fn set_deadline(s: &TcpStream, deadline: Instant) -> Result<()> {
    s.set_read_timeout(Some(left(deadline))).map_err(|e| Error::io("setting a read timeout", e))
}

/// Connects to `addr`, retrying until `deadline`: the master may not listen yet, and its
/// name may not resolve yet (a Kubernetes pod's DNS record appears once it is scheduled).
pub(crate) fn connect_retrying(addr: &str, deadline: Instant) -> Result<TcpStream> {
    let mut pause = Duration::from_millis(10);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let attempt = match addr.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(target)) => {
                TcpStream::connect_timeout(&target, left.max(Duration::from_millis(1)))
                    .map_err(|e| e.to_string())
            }
            Ok(None) => Err("it resolves to no address".to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                return Err(Error::Env(format!("HEDDLE_MASTER={addr:?} is not a host:port ({e})")))
            }
            Err(e) => Err(format!("it does not resolve ({e})")),
        };
        match attempt {
            Ok(s) => return Ok(s),
            Err(why) if left.is_zero() => {
                return Err(Error::Timeout(format!(
                    "cannot reach the job master at {addr} (HEDDLE_MASTER): {why}"
                )))
            }
            Err(_) => {
                std::thread::sleep(pause.min(left));
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// Where shared-memory segments live.
pub(crate) const SHM_DIR: &str = "/dev/shm";

/// The name prefix of every shared-memory segment of the job whose token is `token`.
pub(crate) fn segment_prefix(token: &str) -> String {
    format!("heddle-{}-", &control::mac(token, "shm")[..12])
}

fn create_segment(builder: &WorldBuilder, token: &str, rank: usize) -> Option<ShmSegment> {
    let dir = Path::new(SHM_DIR);
    if !dir.is_dir() {
        return None;
    }
    heddle_comm::transport::shm::reap_stale(dir);
    let path: PathBuf = dir.join(format!("{}{rank}", segment_prefix(token)));
    let _ = std::fs::remove_file(&path);
    match builder.create_segment(&path) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!("shared memory unavailable, using TCP: {e}");
            None
        }
    }
}

/// One number per distinct host name, in order of first appearance, for each rank.
pub(crate) fn host_numbers(names: &[String]) -> Vec<u32> {
    let mut seen: Vec<&str> = Vec::new();
    names
        .iter()
        .map(|n| match seen.iter().position(|s| s == n) {
            Some(i) => i as u32,
            None => {
                seen.push(n);
                (seen.len() - 1) as u32
            }
        })
        .collect()
}

/// This host's identity: `HEDDLE_HOST_ID`, else the hostname.
pub(crate) fn host_id() -> String {
    if let Ok(h) = std::env::var("HEDDLE_HOST_ID") {
        if !h.is_empty() {
            return h;
        }
    }
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname NUL-terminates within it.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A panic on any thread of this worker aborts the job (after the usual panic message),
/// so the other workers' calls fail at once with its message instead of waiting for this
/// worker until they time out.
pub(crate) fn abort_on_panic(abort: &std::sync::Arc<heddle_comm::JobAbort>, rank: usize) {
    let abort = abort.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        abort.raise(heddle_comm::AbortCause::new(rank, "Panic", info.to_string()));
    }));
}

/// Tells the master every `interval` that this worker is alive, with its metrics, from a
/// thread of its own (so a worker busy computing, or waiting in Python, still beats; a
/// stopped one does not).
/// Ends when the master connection fails.
fn send_heartbeats(ms: Channel, interval: Duration, timeout: Duration) {
    let spawned = std::thread::Builder::new().name("heddle-heartbeat".into()).spawn(move || loop {
        std::thread::sleep(interval);
        let beat = Control::Metrics { snapshot: Box::new(heddle_comm::metrics::snapshot()) };
        if ms.send(&beat, timeout).is_err() {
            return;
        }
    });
    if let Err(e) = spawned {
        tracing::warn!("cannot send heartbeats to the job master: {e}");
    }
}

/// Listens to the master for the rest of the job: a failure elsewhere aborts this
/// worker's calls ([`heddle_comm::JobAbort`]); if the connection closes, or the master is
/// silent for the heartbeat timeout, the launcher is gone or cut off, so the job is over
/// and this worker exits rather than linger.
fn watch_master(ms: Channel, env: &WorkerEnv, abort: std::sync::Arc<heddle_comm::JobAbort>) {
    let (rank, timeout) = (env.rank, env.heartbeat_timeout);
    let spawned =
        std::thread::Builder::new().name("heddle-master-watch".into()).spawn(move || loop {
            match ms.recv(Some(timeout)) {
                Ok(Control::Aborted { cause }) => abort.receive(cause),
                Ok(Control::Heartbeat) => {}
                Ok(other) => {
                    tracing::warn!("ignored an unexpected message from the job master: {other:?}")
                }
                Err(Error::Io { source, .. })
                    if matches!(
                        source.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    eprintln!(
                        "heddle: rank {rank}: no heartbeat from the job master for {:.1} s \
                         (HEDDLE_HEARTBEAT_TIMEOUT_S); exiting",
                        timeout.as_secs_f64()
                    );
                    std::process::exit(70);
                }
                Err(_) if crate::rendezvous::closing() => return,
                Err(e) => {
                    eprintln!("heddle: rank {rank}: lost the job master ({e}); exiting");
                    std::process::exit(70);
                }
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch the job master: {e}");
    }
}
