//! Worker bootstrap: register with the job master, receive the peer table, connect to
//! every peer (shared memory on the same host, TCP otherwise, each TCP link
//! authenticated with the job token), wait for the start signal, then watch the master.

use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_comm::transport::shm::ShmSegment;
use heddle_comm::{CommConfig, Communicator, TransportChoice, WorldBuilder};

use crate::control::{self, Control, PeerInfo};
use crate::{Error, Result, WorkerEnv};

/// Joins the job described by the environment and returns the world communicator.
/// Without a launcher this is a world of one.
///
/// # Errors
/// [`Error::Env`] for a bad environment; [`Error::Refused`], [`Error::Timeout`],
/// [`Error::Auth`] or I/O errors when the job cannot start.
pub fn init() -> Result<Communicator> {
    crate::env::check_known_keys(std::env::vars_os().filter_map(|(k, _)| k.into_string().ok()))?;
    init_with(&WorkerEnv::from_env()?, CommConfig::from_env()?)
}

/// [`init`] with an explicit environment and configuration.
///
/// # Errors
/// As [`init`].
pub fn init_with(env: &WorkerEnv, config: CommConfig) -> Result<Communicator> {
    let Some(link) = crate::rendezvous::master_link(env)? else {
        return Ok(heddle_comm::solo(config)?);
    };
    let (master, token) = (link.addr.as_str(), link.token.as_str());
    let deadline = Instant::now() + env.init_timeout;
    let mut ms = connect_retrying(master, deadline)?;
    let local_ip = ms.local_addr().map_err(|e| Error::io("reading the local address", e))?.ip();
    set_deadline(&ms, deadline)?;
    let Control::Challenge { nonce } = control::recv(&mut ms)? else {
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
    };
    let mac = control::mac(token, &format!("register|{nonce}"));
    control::send(&mut ms, &Control::Register { peer: me.clone(), world_size: env.size, mac })?;
    let peers = match control::recv(&mut ms).map_err(|e| waiting_error(e, "the peer table", env))? {
        Control::Table { peers } => peers,
        Control::Refused { reason } | Control::Abort { reason } => {
            return Err(Error::Refused(reason))
        }
        other => return Err(Error::Protocol(format!("expected the peer table, got {other:?}"))),
    };
    if peers.len() != env.size || peers.iter().enumerate().any(|(i, p)| p.rank != i) {
        return Err(Error::Protocol("the peer table does not list every rank once".into()));
    }

    let mut names: Vec<&str> = Vec::new();
    let hosts: Vec<u32> = peers
        .iter()
        .map(|p| match names.iter().position(|n| *n == p.host) {
            Some(i) => i as u32,
            None => {
                names.push(&p.host);
                (names.len() - 1) as u32
            }
        })
        .collect();
    builder.set_hosts(hosts)?;
    let use_shm = |p: &PeerInfo| {
        p.host == me.host
            && !p.tcp_only
            && !me.tcp_only
            && p.shm_path.is_some()
            && segment.is_some()
    };
    let expected: Vec<usize> =
        peers.iter().filter(|p| p.rank > env.rank && !use_shm(p)).map(|p| p.rank).collect();
    let acceptor = {
        let token = token.to_string();
        std::thread::spawn(move || accept_peers(&listener, &token, expected, deadline))
    };
    for p in peers.iter().filter(|p| p.rank != env.rank) {
        if use_shm(p) {
            let (own, path) = (
                segment.as_ref().expect("checked by use_shm"),
                p.shm_path.as_deref().unwrap_or_default(),
            );
            builder.add_shm(p.rank, own, Path::new(path))?;
        } else if p.rank < env.rank {
            builder.add_tcp(p.rank, connect_peer(p, env.rank, token, deadline)?)?;
        }
    }
    for (rank, stream) in
        acceptor.join().map_err(|_| Error::Protocol("the peer acceptor panicked".into()))??
    {
        builder.add_tcp(rank, stream)?;
    }
    control::send(&mut ms, &Control::Ready)?;
    match control::recv(&mut ms).map_err(|e| waiting_error(e, "the start signal", env))? {
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
    // One writer at a time on the master connection: failure reports and heartbeats.
    let to_master = std::sync::Arc::new(std::sync::Mutex::new(
        ms.try_clone().map_err(|e| Error::io("cloning the master connection", e))?,
    ));
    let report = to_master.clone();
    abort.set_reporter(Box::new(move |cause| {
        let mut stream = report.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Err(e) = control::send(&mut stream, &Control::Failed { cause: cause.clone() }) {
            tracing::warn!("could not tell the job master that this worker failed: {e}");
        }
    }));
    abort_on_panic(&abort, env.rank);
    send_heartbeats(to_master, env.heartbeat);
    watch_master(ms, env, abort);
    Ok(comm)
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

fn set_deadline(s: &TcpStream, deadline: Instant) -> Result<()> {
    let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
    s.set_read_timeout(Some(left)).map_err(|e| Error::io("setting a read timeout", e))
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

fn connect_peer(p: &PeerInfo, my_rank: usize, token: &str, deadline: Instant) -> Result<TcpStream> {
    let mut s = connect_retrying(&p.tcp_addr, deadline)?;
    set_deadline(&s, deadline)?;
    let Control::Challenge { nonce } = control::recv(&mut s)? else {
        return Err(Error::Protocol(format!("rank {} did not send a challenge", p.rank)));
    };
    let mac = control::mac(token, &format!("peer|{nonce}|{my_rank}"));
    control::send(&mut s, &Control::PeerHello { rank: my_rank, mac })?;
    match control::recv(&mut s)? {
        Control::Accepted => Ok(s),
        Control::Refused { reason } => {
            Err(Error::Auth(format!("rank {} refused us: {reason}", p.rank)))
        }
        other => Err(Error::Protocol(format!("rank {} answered {other:?}", p.rank))),
    }
}

/// Longest a connection to a worker's peer port may take to prove it is a peer.
const HANDSHAKE: Duration = Duration::from_secs(5);

/// Most handshakes with connections to the peer port under way at once: each holds a
/// thread for at most `HANDSHAKE`; connections past that are closed unread.
const MAX_HANDSHAKES: usize = 64;

/// Accepts the TCP links of `expected` ranks. Every connection proves itself on a thread of
/// its own (at most [`HANDSHAKE`], reading at most a few KiB), so anything else that
/// connects — and closes, sends garbage, announces a huge frame or stays silent — is
/// logged and dropped without holding up the peers.
fn accept_peers(
    listener: &TcpListener,
    token: &str,
    mut expected: Vec<usize>,
    deadline: Instant,
) -> Result<Vec<(usize, TcpStream)>> {
    listener.set_nonblocking(true).map_err(|e| Error::io("configuring the peer listener", e))?;
    let (tx, rx) = std::sync::mpsc::channel::<(usize, TcpStream)>();
    let pending = Arc::new(AtomicUsize::new(0));
    let mut out = Vec::new();
    while !expected.is_empty() {
        while let Ok((rank, s)) = rx.try_recv() {
            if expected.contains(&rank) {
                expected.retain(|&r| r != rank);
                out.push((rank, s));
            } else {
                tracing::warn!("dropped a second link claiming rank {rank}");
            }
        }
        if expected.is_empty() {
            break;
        }
        match listener.accept() {
            Ok((s, from)) => {
                if pending.load(Ordering::Acquire) >= MAX_HANDSHAKES {
                    tracing::warn!(
                        "dropped a connection to the peer port from {from}: {MAX_HANDSHAKES} \
                         handshakes are under way"
                    );
                    continue;
                }
                pending.fetch_add(1, Ordering::AcqRel);
                let (token, expected, tx, pending) =
                    (token.to_string(), expected.clone(), tx.clone(), pending.clone());
                std::thread::spawn(move || {
                    match peer_handshake(s, &token, &expected, deadline) {
                        Ok((rank, s)) => {
                            let _ = tx.send((rank, s));
                        }
                        Err(e) => {
                            tracing::warn!("dropped a connection to the peer port from {from}: {e}")
                        }
                    }
                    pending.fetch_sub(1, Ordering::AcqRel);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    return Err(Error::Timeout(format!(
                        "timed out waiting for ranks {expected:?} to connect"
                    )));
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            // A connection reset before it was accepted, and the like: not ours to fail on.
            Err(e) => {
                tracing::warn!("accepting a peer connection failed: {e}");
                std::thread::sleep(Duration::from_millis(2));
            }
        }
    }
    Ok(out)
}

/// Challenges one connection to the peer port: it must answer as one of `expected` with
/// the job token's proof.
fn peer_handshake(
    mut s: TcpStream,
    token: &str,
    expected: &[usize],
    deadline: Instant,
) -> Result<(usize, TcpStream)> {
    s.set_nonblocking(false).map_err(|e| Error::io("configuring a peer socket", e))?;
    set_deadline(&s, deadline.min(Instant::now() + HANDSHAKE))?;
    let nonce = control::nonce();
    control::send(&mut s, &Control::Challenge { nonce: nonce.clone() })?;
    match control::recv_handshake(&mut s)? {
        Control::PeerHello { rank, mac }
            if expected.contains(&rank)
                && control::verify(token, &format!("peer|{nonce}|{rank}"), &mac) =>
        {
            control::send(&mut s, &Control::Accepted)?;
            set_deadline(&s, deadline)?;
            Ok((rank, s))
        }
        _ => {
            let _ = control::send(
                &mut s,
                &Control::Refused { reason: "bad job token or unexpected rank".into() },
            );
            Err(Error::Auth("bad job token or unexpected rank".into()))
        }
    }
}

/// A panic on any thread of this worker aborts the job (after the usual panic message),
/// so the other workers' calls fail at once with its message instead of waiting for this
/// worker until they time out.
fn abort_on_panic(abort: &std::sync::Arc<heddle_comm::JobAbort>, rank: usize) {
    let abort = abort.clone();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        abort.raise(heddle_comm::AbortCause::new(rank, "Panic", info.to_string()));
    }));
}

/// Tells the master every `interval` that this worker is alive, from a thread of its own
/// (so a worker busy computing, or waiting in Python, still beats; a stopped one does not).
/// Ends when the master connection fails.
fn send_heartbeats(to_master: std::sync::Arc<std::sync::Mutex<TcpStream>>, interval: Duration) {
    let spawned = std::thread::Builder::new().name("heddle-heartbeat".into()).spawn(move || loop {
        std::thread::sleep(interval);
        let mut stream = to_master.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if control::send(&mut stream, &Control::Heartbeat).is_err() {
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
fn watch_master(mut ms: TcpStream, env: &WorkerEnv, abort: std::sync::Arc<heddle_comm::JobAbort>) {
    let (rank, timeout) = (env.rank, env.heartbeat_timeout);
    let _ = ms.set_read_timeout(Some(timeout));
    let spawned =
        std::thread::Builder::new().name("heddle-master-watch".into()).spawn(move || loop {
            match control::recv(&mut ms) {
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// Foreign clients on a worker's peer port — one that closes at once, one that sends
    /// garbage, one that stays silent, one with a wrong token — are dropped, and the real
    /// peers still connect (with the old serial handshake the silent one held every peer
    /// up until the deadline).
    #[test]
    fn foreign_clients_do_not_stop_or_stall_the_peers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let deadline = Instant::now() + Duration::from_secs(20);
        let acceptor =
            std::thread::spawn(move || accept_peers(&listener, "token", vec![1, 2], deadline));
        drop(TcpStream::connect(&addr).unwrap());
        TcpStream::connect(&addr).unwrap().write_all(b"GET / HTTP/1.0\r\n\r\n garbage").unwrap();
        let _silent = TcpStream::connect(&addr).unwrap();
        // A frame header announcing 1 GiB: refused from its header, nothing allocated.
        let mut huge = heddle_wire::Header::new(heddle_wire::Kind::Control);
        (huge.msg_len, huge.frag_len) = (1 << 30, 1 << 30);
        let mut big = TcpStream::connect(&addr).unwrap();
        let mut bytes = [0u8; heddle_wire::HEADER_LEN];
        huge.encode(&mut bytes);
        big.write_all(&bytes).unwrap();
        // The worker listening (rank 0) as its peers see it.
        let rank0 = PeerInfo {
            rank: 0,
            host: "h".into(),
            pid: 0,
            tcp_addr: addr.clone(),
            shm_path: None,
            tcp_only: true,
        };
        assert!(matches!(connect_peer(&rank0, 1, "wrong token", deadline), Err(Error::Auth(_))));
        connect_peer(&rank0, 2, "token", deadline).expect("rank 2 connects");
        connect_peer(&rank0, 1, "token", deadline).expect("rank 1 connects");
        let mut ranks: Vec<usize> = acceptor
            .join()
            .unwrap()
            .expect("both peers accepted")
            .into_iter()
            .map(|(r, _)| r)
            .collect();
        ranks.sort_unstable();
        assert_eq!(ranks, [1, 2]);
    }
}
