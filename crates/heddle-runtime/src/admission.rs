//! How the job master admits connections before the job starts: each proves it knows the
//! job token (an HMAC of a fresh nonce), then either registers a worker of a rank, or — for
//! `heddle worker` — claims ranks to start.

use std::net::TcpListener;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::control::{self, Control};
use crate::master::{Joined, MasterConfig};

/// Accepts connections until `stop`, each admitted on a thread of its own; registrations
/// go to `tx`. Once the job has `started`, connections are refused.
pub(crate) fn accept_loop(
    listener: TcpListener,
    config: &MasterConfig,
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
                std::thread::spawn(move || match admit(stream, &config, &claimed) {
                    Ok(Some(j)) => {
                        let _ = tx.send(j);
                    }
                    Ok(None) => {}
                    Err(reason) => tracing::warn!("refused registration from {from}: {reason}"),
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

/// Challenges one connection and checks its registration (`Some`), or answers its claim
/// of ranks (`None`).
fn admit(
    mut stream: TcpStream,
    config: &MasterConfig,
    claimed: &Mutex<usize>,
) -> std::result::Result<Option<Joined>, String> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let nonce = control::nonce();
    control::send(&mut stream, &Control::Challenge { nonce: nonce.clone() })
        .map_err(|e| e.to_string())?;
    let msg = control::recv_handshake(&mut stream).map_err(|e| e.to_string())?;
    if let Control::Claim { count, mac } = msg {
        return claim(stream, config, claimed, &nonce, count, &mac).map(|()| None);
    }
    let Control::Register { peer, world_size, mac } = msg else {
        return Err(format!("expected a registration, got {msg:?}"));
    };
    let problem = if !control::verify(&config.token, &format!("register|{nonce}"), &mac) {
        Some("bad job token (HEDDLE_JOB_TOKEN does not match this job)".to_string())
    } else if world_size != config.world_size {
        Some(format!("world size {world_size} differs from the job's {}", config.world_size))
    } else if peer.rank >= config.world_size {
        Some(format!("rank {} is outside the world of {}", peer.rank, config.world_size))
    } else {
        None
    };
    if let Some(reason) = problem {
        let _ = control::send(&mut stream, &Control::Refused { reason: reason.clone() });
        return Err(format!("rank {}: {reason}", peer.rank));
    }
    let _ = stream.set_read_timeout(None);
    Ok(Some(Joined { stream, peer }))
}

/// Gives `count` ranks not given before to a `heddle worker` that proved it knows the
/// token, or refuses when the world has no room left.
fn claim(
    mut stream: TcpStream,
    config: &MasterConfig,
    claimed: &Mutex<usize>,
    nonce: &str,
    count: usize,
    mac: &str,
) -> std::result::Result<(), String> {
    let answer = if !control::verify(&config.token, &format!("claim|{nonce}|{count}"), mac) {
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
    let _ = control::send(&mut stream, &msg);
    answer.map(|_| ())
}
