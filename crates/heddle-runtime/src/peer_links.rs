//! The TCP links between workers: each rank connects to the ranks below it and accepts the
//! ranks above. Every link proves the job token when it opens; under TLS it is mutual TLS
//! against the job CA as well, and the certificate a peer presents must be the very one
//! the master signed for the rank it claims; under `mac` every frame is sealed after.

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_comm::transport::LinkStream;

use crate::bootstrap::{connect_retrying, set_deadline};
use crate::control::{self, Control, PeerInfo};
use crate::secure::tls::PeerTls;
use crate::secure::{self, LinkMode, Opening, Security};
use crate::{Error, Result};

/// What a worker needs to open and check its peer links.
#[derive(Debug)]
pub(crate) struct LinkSecurity {
    /// This worker's rank.
    pub(crate) rank: usize,
    pub(crate) token: String,
    pub(crate) security: Security,
    /// This worker's TLS, when the master certified it.
    pub(crate) tls: Option<PeerTls>,
    /// Per rank: the fingerprint of the certificate the master signed for it.
    pub(crate) certs: Vec<Option<String>>,
}

impl LinkSecurity {
    fn tls(&self, rank: usize) -> Result<&PeerTls> {
        self.tls.as_ref().ok_or_else(|| {
            Error::Auth(format!(
                "the link with rank {rank} needs TLS, but the job master gave this worker no \
                 certificate: set {} the same for the master and every worker",
                Security::VAR
            ))
        })
    }

    /// The link label both ends derive `mac` keys from: the accepting end's challenge and
    /// the connecting end's nonce, both fresh for this connection.
    fn label(challenge: &str, nonce: &str, low: usize, high: usize) -> String {
        format!("peer|{challenge}|{nonce}|{high}|{low}")
    }

    /// What a connecting `rank` proves with the token.
    fn hello_proof(challenge: &str, nonce: &str, rank: usize) -> String {
        format!("peer|{challenge}|{nonce}|{rank}")
    }
}

/// Connects to the lower rank `p` and proves this worker is `my_rank` of the job.
///
/// # Errors
/// [`Error::Auth`] if TLS fails or the peer refuses; [`Error::Timeout`] if it cannot be
/// reached by `deadline`.
pub(crate) fn connect_peer(
    p: &PeerInfo,
    my_rank: usize,
    sec: &LinkSecurity,
    deadline: Instant,
) -> Result<Box<dyn LinkStream>> {
    let sock = connect_retrying(&p.tcp_addr, deadline)?;
    set_deadline(&sock, deadline)?;
    let mode = sec.security.for_socket(&sock)?;
    let bare = sock.try_clone().map_err(|e| Error::io("cloning a socket", e))?;
    let stream: Box<dyn LinkStream> = match mode {
        LinkMode::Tls => Box::new(sec.tls(p.rank)?.connect(sock, p.rank, deadline)?),
        LinkMode::Mac | LinkMode::Plain => Box::new(sock),
    };
    let mut opening = Opening { stream, sock: bare, mode, fingerprint: String::new() };
    let refused = |e: Error| match mode {
        // TLS 1.3 tells a client its certificate was refused on its first read.
        LinkMode::Tls => Error::Auth(format!("rank {} refused this worker's TLS: {e}", p.rank)),
        _ => e,
    };
    let Control::Challenge { nonce: challenge } =
        control::recv(&mut opening.stream).map_err(refused)?
    else {
        return Err(Error::Protocol(format!("rank {} did not send a challenge", p.rank)));
    };
    let nonce = control::nonce();
    let proof = LinkSecurity::hello_proof(&challenge, &nonce, my_rank);
    let mac = control::mac(&sec.token, &proof);
    let hello = Control::PeerHello { rank: my_rank, nonce: nonce.clone(), mac };
    control::send(&mut opening.stream, &hello)?;
    match control::recv(&mut opening.stream).map_err(refused)? {
        Control::Accepted => {
            let label = LinkSecurity::label(&challenge, &nonce, p.rank, my_rank);
            Ok(opening.finish(&sec.token, &label, true, format!("rank {}", p.rank)))
        }
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

/// A peer link accepted: its rank and stream.
pub(crate) type Accepted = (usize, Box<dyn LinkStream>);

/// Accepts the TCP links of `expected` ranks. Every connection proves itself on a thread of
/// its own (at most [`HANDSHAKE`], reading at most a few KiB), so anything else that
/// connects — and closes, sends garbage, announces a huge frame, stays silent or presents
/// a foreign certificate — is logged and dropped without holding up the peers.
pub(crate) fn accept_peers(
    listener: &TcpListener,
    sec: &Arc<LinkSecurity>,
    mut expected: Vec<usize>,
    deadline: Instant,
) -> Result<Vec<Accepted>> {
    listener.set_nonblocking(true).map_err(|e| Error::io("configuring the peer listener", e))?;
    let (tx, rx) = std::sync::mpsc::channel::<Accepted>();
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
                let (sec, expected, tx, pending) =
                    (sec.clone(), expected.clone(), tx.clone(), pending.clone());
                std::thread::spawn(move || {
                    match peer_handshake(s, &sec, &expected, deadline) {
                        Ok(accepted) => {
                            let _ = tx.send(accepted);
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
/// the job token's proof (and, under TLS, that rank's certificate).
fn peer_handshake(
    s: TcpStream,
    sec: &LinkSecurity,
    expected: &[usize],
    deadline: Instant,
) -> Result<Accepted> {
    s.set_nonblocking(false).map_err(|e| Error::io("configuring a peer socket", e))?;
    let opening_deadline = deadline.min(Instant::now() + HANDSHAKE);
    set_deadline(&s, opening_deadline)?;
    let mode = sec.security.for_socket(&s)?;
    let bare = s.try_clone().map_err(|e| Error::io("cloning a socket", e))?;
    let (stream, presented): (Box<dyn LinkStream>, Option<String>) = match mode {
        LinkMode::Tls => {
            let tls = sec.tls(sec.rank)?.accept(s, opening_deadline)?;
            let presented = tls.peer_certificate().map(|c| secure::fingerprint(c));
            (Box::new(tls), presented)
        }
        LinkMode::Mac | LinkMode::Plain => (Box::new(s), None),
    };
    let mut opening = Opening { stream, sock: bare, mode, fingerprint: String::new() };
    let challenge = control::nonce();
    control::send(&mut opening.stream, &Control::Challenge { nonce: challenge.clone() })?;
    let (reason, rank) = match control::recv_handshake(&mut opening.stream)? {
        Control::PeerHello { rank, nonce, mac }
            if expected.contains(&rank)
                && control::verify(
                    &sec.token,
                    &LinkSecurity::hello_proof(&challenge, &nonce, rank),
                    &mac,
                ) =>
        {
            let own = sec.certs.get(rank).cloned().flatten();
            if mode != LinkMode::Tls || (presented.is_some() && presented == own) {
                control::send(&mut opening.stream, &Control::Accepted)?;
                set_deadline(&opening.sock, deadline)?;
                let label = LinkSecurity::label(&challenge, &nonce, sec.rank, rank);
                let stream = opening.finish(&sec.token, &label, false, format!("rank {rank}"));
                return Ok((rank, stream));
            }
            let reason =
                format!("its certificate is not the one the master signed for rank {rank}");
            (reason, Some(rank))
        }
        _ => ("bad job token or unexpected rank".to_string(), None),
    };
    let _ = control::send(&mut opening.stream, &Control::Refused { reason: reason.clone() });
    Err(Error::Auth(match rank {
        Some(r) => format!("a connection claiming rank {r}: {reason}"),
        None => reason,
    }))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::secure::ca::{JobCa, WorkerKey};

    fn rank0(addr: &str) -> PeerInfo {
        PeerInfo {
            rank: 0,
            host: "h".into(),
            pid: 0,
            tcp_addr: addr.into(),
            shm_path: None,
            tcp_only: true,
            cert: None,
        }
    }

    fn plain(rank: usize, token: &str, security: Security) -> LinkSecurity {
        LinkSecurity { rank, token: token.into(), security, tls: None, certs: vec![None; 3] }
    }

    fn listen() -> (TcpListener, String) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        (listener, addr)
    }

    /// Ranks `ranks` certified by `ca`: their link security, sharing the fingerprints.
    fn certified(ca: &JobCa, token: &str, ranks: &[usize]) -> Vec<LinkSecurity> {
        let issued: Vec<(WorkerKey, rustls::pki_types::CertificateDer<'static>)> = ranks
            .iter()
            .map(|&r| {
                let key = WorkerKey::new().unwrap();
                let cert = ca.sign_worker(&key.request().unwrap(), r).unwrap();
                (key, cert)
            })
            .collect();
        let mut certs = vec![None; 3];
        for (&r, (_, cert)) in ranks.iter().zip(&issued) {
            certs[r] = Some(secure::fingerprint(cert));
        }
        ranks
            .iter()
            .zip(issued)
            .map(|(&rank, (key, cert))| LinkSecurity {
                rank,
                token: token.into(),
                security: Security::Tls,
                tls: Some(PeerTls::new(ca.cert().clone(), cert, key.private()).unwrap()),
                certs: certs.clone(),
            })
            .collect()
    }

    fn exchange(a: &mut dyn LinkStream, b: &mut dyn LinkStream) {
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        a.write_all(&payload).unwrap();
        a.flush().unwrap();
        let mut got = vec![0u8; payload.len()];
        b.read_exact(&mut got).unwrap();
        assert_eq!(got, payload);
    }

    /// Foreign clients on a worker's peer port — one that closes at once, one that sends
    /// garbage, one that stays silent, one with a wrong token — are dropped, and the real
    /// peers still connect (with the old serial handshake the silent one held every peer
    /// up until the deadline).
    #[test]
    fn foreign_clients_do_not_stop_or_stall_the_peers() {
        let (listener, addr) = listen();
        let deadline = Instant::now() + Duration::from_secs(20);
        let sec = Arc::new(plain(0, "token", Security::None));
        let acceptor =
            std::thread::spawn(move || accept_peers(&listener, &sec, vec![1, 2], deadline));
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
        let wrong = plain(1, "wrong token", Security::None);
        assert!(matches!(connect_peer(&rank0(&addr), 1, &wrong, deadline), Err(Error::Auth(_))));
        connect_peer(&rank0(&addr), 2, &plain(2, "token", Security::None), deadline)
            .expect("rank 2 connects");
        connect_peer(&rank0(&addr), 1, &plain(1, "token", Security::None), deadline)
            .expect("rank 1 connects");
        let mut ranks: Vec<usize> =
            acceptor.join().unwrap().expect("both accepted").into_iter().map(|(r, _)| r).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, [1, 2]);
    }

    /// Under TLS a peer with the right token but a foreign CA's certificate, and one
    /// presenting another rank's certificate, are refused; the real peers connect over
    /// mutual TLS and bytes cross intact.
    #[test]
    fn tls_refuses_foreign_and_borrowed_certificates() {
        let (listener, addr) = listen();
        let deadline = Instant::now() + Duration::from_secs(20);
        let ca = JobCa::new().unwrap();
        let mut job = certified(&ca, "token", &[0, 1, 2]).into_iter();
        let (me, one, two) =
            (Arc::new(job.next().unwrap()), job.next().unwrap(), job.next().unwrap());
        let acceptor =
            std::thread::spawn(move || accept_peers(&listener, &me, vec![1, 2], deadline));

        let foreign = certified(&JobCa::new().unwrap(), "token", &[1]).pop().unwrap();
        let err = connect_peer(&rank0(&addr), 1, &foreign, deadline).unwrap_err();
        assert!(matches!(err, Error::Auth(_)), "{err}");
        // Rank 2's certificate (of this job's CA) claiming rank 1.
        let borrowed = LinkSecurity { rank: 1, ..certified(&ca, "token", &[2]).pop().unwrap() };
        let err = connect_peer(&rank0(&addr), 1, &borrowed, deadline).unwrap_err();
        assert!(err.to_string().contains("not the one the master signed"), "{err}");

        let mut s2 = connect_peer(&rank0(&addr), 2, &two, deadline).expect("rank 2 connects");
        let mut s1 = connect_peer(&rank0(&addr), 1, &one, deadline).expect("rank 1 connects");
        let mut accepted = acceptor.join().unwrap().expect("both accepted");
        accepted.sort_by_key(|(r, _)| *r);
        assert_eq!(accepted.iter().map(|(r, _)| *r).collect::<Vec<_>>(), [1, 2]);
        exchange(&mut *s1, &mut *accepted[0].1);
        exchange(&mut *accepted[1].1, &mut *s2);
    }

    /// Under `mac` the link seals every write; a peer with a wrong token never gets in.
    #[test]
    fn mac_links_carry_bytes_and_refuse_a_wrong_token() {
        let (listener, addr) = listen();
        let deadline = Instant::now() + Duration::from_secs(20);
        let me = Arc::new(plain(0, "token", Security::Mac));
        let acceptor = std::thread::spawn(move || accept_peers(&listener, &me, vec![1], deadline));
        let wrong = plain(1, "other", Security::Mac);
        assert!(connect_peer(&rank0(&addr), 1, &wrong, deadline).is_err());
        let mut s1 = connect_peer(&rank0(&addr), 1, &plain(1, "token", Security::Mac), deadline)
            .expect("rank 1 connects");
        let mut accepted = acceptor.join().unwrap().expect("accepted");
        exchange(&mut *s1, &mut *accepted[0].1);
        exchange(&mut *accepted[0].1, &mut *s1);
    }
}
