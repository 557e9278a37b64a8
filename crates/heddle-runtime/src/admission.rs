//! How the job master admits connections before the job starts: each proves it knows the
//! job token (an HMAC of a fresh nonce), then either registers a worker of a rank, or — for
//! `heddle worker` — claims ranks to start.

use std::net::TcpListener;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use heddle_comm::transport::LinkStream;

use crate::channel::Channel;
use crate::control::{self, Control};
use crate::master::{Credentials, Joined, MasterConfig};
use crate::secure;

/// The longest a connection to the master may take to prove itself.
const ADMISSION: Duration = Duration::from_secs(10);

/// Accepts connections until `stop`, each admitted on a thread of its own; registrations
/// go to `tx`. Once the job has `started`, connections are refused.
pub(crate) fn accept_loop(
    listener: TcpListener,
    config: &MasterConfig,
    credentials: Option<Arc<Credentials>>,
    stop: &AtomicBool,
    started: &AtomicBool,
    tx: mpsc::Sender<Joined>,
) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    // Ranks handed to `heddle worker` claims so far.
    let claimed = Arc::new(Mutex::new(0usize));
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, from)) => {
                if started.load(Ordering::SeqCst) {
                    tracing::warn!("refused a connection from {from}: the job has already started");
                    let mut s = stream;
                    let _ = control::send(
                        &mut s,
                        &Control::Refused { reason: "the job has already started".into() },
                    );
                    continue;
                }
                let (config, tx, claimed) = (config.clone(), tx.clone(), claimed.clone());
                let credentials = credentials.clone();
                std::thread::spawn(move || {
                    match admit(stream, &config, credentials.as_deref(), &claimed) {
                        Ok(Some(j)) => {
                            let _ = tx.send(j);
                        }
                        Ok(None) => {}
                        Err(reason) => tracing::warn!("refused registration from {from}: {reason}"),
                    }
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Opens one connection (TLS when links use it), challenges it and checks its
/// registration (`Some`), or answers its claim of ranks (`None`).
fn admit(
    stream: TcpStream,
    config: &MasterConfig,
    credentials: Option<&Credentials>,
    claimed: &Mutex<usize>,
) -> std::result::Result<Option<Joined>, String> {
    let _ = stream.set_nonblocking(false);
    let deadline = Instant::now() + ADMISSION;
    let tls = credentials.map(|c| (&c.tls, c.fingerprint.as_str()));
    let mut opening = secure::open_at_master(stream, config.security, tls, deadline)
        .map_err(|e| e.to_string())?;
    let fingerprint = opening.fingerprint.clone();
    let nonce = control::nonce();
    control::send(&mut opening.stream, &Control::Challenge { nonce: nonce.clone() })
        .map_err(|e| e.to_string())?;
    let msg = control::recv_handshake(&mut opening.stream).map_err(|e| e.to_string())?;
    if let Control::Claim { count, mac } = msg {
        let proof = format!("claim|{nonce}|{fingerprint}|{count}");
        return claim(&mut opening.stream, config, claimed, &proof, count, &mac).map(|()| None);
    }
    let Control::Register { mut peer, world_size, csr, nonce: worker_nonce, mac } = msg else {
        return Err(format!("expected a registration, got {msg:?}"));
    };
    let rank = peer.rank;
    let message = control::register_proof(
        &nonce,
        &fingerprint,
        rank,
        world_size,
        csr.as_deref().unwrap_or_default(),
    );
    let problem = if !control::verify(&config.token, &message, &mac) {
        Some("bad job token (HEDDLE_JOB_TOKEN does not match this job)".to_string())
    } else if world_size != config.world_size {
        Some(format!("world size {world_size} differs from the job's {}", config.world_size))
    } else if rank >= config.world_size {
        Some(format!("rank {rank} is outside the world of {}", config.world_size))
    } else {
        None
    };
    let cert = match (&problem, csr, credentials) {
        (None, Some(csr), Some(c)) => {
            let der = hex::decode(&csr)
                .map_err(|e| format!("rank {rank}: its certificate request is not hex: {e}"))
                .and_then(|der| c.ca.sign_worker(&der, rank).map_err(|e| e.to_string()));
            match der {
                Ok(der) => {
                    peer.cert = Some(secure::fingerprint(&der));
                    Some(hex::encode(der))
                }
                Err(reason) => {
                    let _ = control::send(
                        &mut opening.stream,
                        &Control::Refused { reason: reason.clone() },
                    );
                    return Err(reason);
                }
            }
        }
        _ => {
            peer.cert = None;
            None
        }
    };
    if let Some(reason) = problem {
        let _ = control::send(&mut opening.stream, &Control::Refused { reason: reason.clone() });
        return Err(format!("rank {rank}: {reason}"));
    }
    control::send(&mut opening.stream, &Control::Accepted).map_err(|e| e.to_string())?;
    let proof = control::mac(&config.token, &control::table_proof(&worker_nonce, &fingerprint));
    let label = format!("master|{nonce}|{worker_nonce}");
    let stream: Box<dyn LinkStream> =
        opening.finish(&config.token, &label, false, format!("rank {rank}"));
    let channel = Channel::new(stream).map_err(|e| e.to_string())?;
    Ok(Some(Joined { channel, peer, cert, proof }))
}

/// Gives `count` ranks not given before to a `heddle worker` that proved it knows the
/// token, or refuses when the world has no room left.
fn claim(
    stream: &mut Box<dyn LinkStream>,
    config: &MasterConfig,
    claimed: &Mutex<usize>,
    proof: &str,
    count: usize,
    mac: &str,
) -> std::result::Result<(), String> {
    let answer = if !control::verify(&config.token, proof, mac) {
        Err("bad job token (the token file does not match this job)".to_string())
    } else {
        let mut next = claimed.lock().unwrap_or_else(PoisonError::into_inner);
        if count == 0 || *next + count > config.world_size {
            Err(format!(
                "{count} more workers do not fit: {} of the job's {} ranks are taken",
                *next, config.world_size
            ))
        } else {
            *next += count;
            Ok((*next - count..*next).collect::<Vec<usize>>())
        }
    };
    let msg = match &answer {
        Ok(ranks) => Control::Ranks {
            ranks: ranks.clone(),
            world_size: config.world_size,
            heartbeat_ms: config.heartbeat.as_millis() as u64,
            heartbeat_timeout_ms: config.heartbeat_timeout.as_millis() as u64,
        },
        Err(reason) => Control::Refused { reason: reason.clone() },
    };
    let _ = control::send(stream, &msg);
    answer.map(|_| ())
}
