//! Control messages between workers and the job master (and between workers while they
//! connect): JSON payloads in wire frames of kind `Control`, plus HMAC proofs of the job
//! token so the token itself never crosses the network.

use std::io::{Read, Write};

use heddle_comm::AbortCause;
use heddle_wire::{Codec, Frame, Header, Kind, Limits};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::{Error, Result};

/// A worker's entry in the peer table.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PeerInfo {
    /// World rank.
    pub rank: usize,
    /// Host identity; equal ids may use shared memory.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// Address of its TCP listener.
    pub tcp_addr: String,
    /// Its shared-memory segment, if it made one.
    pub shm_path: Option<String>,
    /// Whether it insists on TCP for every peer.
    pub tcp_only: bool,
    /// SHA-256 (hex) of the certificate the master signed for it, when links use TLS:
    /// a peer connecting as this rank must present exactly that certificate.
    #[serde(default)]
    pub cert: Option<String>,
}

/// Every control message.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Control {
    /// Sent by whoever accepts a connection: prove you know the token.
    Challenge {
        /// Random hex nonce.
        nonce: String,
    },
    /// A worker joins the job.
    Register {
        /// This worker's entry.
        peer: PeerInfo,
        /// World size the worker was told.
        world_size: usize,
        /// The worker's certificate signing request (DER, hex), when links use TLS.
        csr: Option<String>,
        /// A fresh nonce of the worker's, for the master's proof in [`Control::Table`].
        nonce: String,
        /// HMAC-SHA256 under the token of [`register_proof`]'s message, hex.
        mac: String,
    },
    /// A worker connects to another worker.
    PeerHello {
        /// Connecting rank.
        rank: usize,
        /// A fresh nonce of the connecting worker's: `mac` links key each connection from
        /// both ends' nonces, so neither end alone can make it repeat an earlier one's keys.
        nonce: String,
        /// HMAC-SHA256(token, "peer|" + challenge + "|" + nonce + "|" + rank), hex.
        mac: String,
    },
    /// The proof was accepted.
    Accepted,
    /// The registration was refused.
    Refused {
        /// Why.
        reason: String,
    },
    /// Everyone registered: the full table, in rank order.
    Table {
        /// One entry per rank.
        peers: Vec<PeerInfo>,
        /// The job CA's certificate (DER, hex), when links use TLS.
        ca: Option<String>,
        /// The recipient's certificate, signed by the job CA (DER, hex).
        cert: Option<String>,
        /// HMAC-SHA256 under the token of [`table_proof`]'s message, hex: the master
        /// knows the token too.
        proof: String,
    },
    /// A worker has connected to all its peers.
    Ready,
    /// Everyone is connected: start.
    Go,
    /// The job cannot start.
    Abort {
        /// Why.
        reason: String,
    },
    /// A running worker failed: the job must stop (worker to master).
    Failed {
        /// Who failed, where and how.
        cause: AbortCause,
    },
    /// A worker failed: every blocking call must now fail (master to the other workers).
    Aborted {
        /// Who failed, where and how.
        cause: AbortCause,
    },
    /// The sender is alive (both ways, every heartbeat interval, once the job runs).
    Heartbeat,
    /// A worker is alive, and what it has done so far (worker to master, every heartbeat
    /// interval, instead of [`Control::Heartbeat`]).
    Metrics {
        /// Its counters ([`heddle_comm::metrics::snapshot`]).
        snapshot: Box<heddle_comm::metrics::Snapshot>,
    },
    /// `heddle worker` asks for ranks to start (worker to master, instead of `Register`).
    Claim {
        /// How many ranks.
        count: usize,
        /// HMAC-SHA256(token, "claim|" + nonce + "|" + master fingerprint + "|" + count),
        /// hex.
        mac: String,
    },
    /// The ranks given to a claim, and what their workers must be told.
    Ranks {
        /// The ranks, in order.
        ranks: Vec<usize>,
        /// The job's world size.
        world_size: usize,
        /// The master's heartbeat interval, milliseconds.
        heartbeat_ms: u64,
        /// The master's heartbeat timeout, milliseconds.
        heartbeat_timeout_ms: u64,
    },
}

/// The largest control message: a peer table of thousands of ranks.
pub(crate) const CONTROL_LIMIT: Limits =
    Limits { max_frame_payload: 4 << 20, max_message: 4 << 20 };

/// The message a worker's registration proof covers: the master's nonce, the
/// fingerprint of the master's certificate as the worker saw it (empty without TLS, so a
/// man in the middle cannot relay the proof), and what the worker asks for.
pub fn register_proof(
    nonce: &str,
    fingerprint: &str,
    rank: usize,
    size: usize,
    csr: &str,
) -> String {
    format!("register|{nonce}|{fingerprint}|{rank}|{size}|{csr}")
}

/// The message of the master's proof in [`Control::Table`]: the worker's nonce and the
/// master certificate's fingerprint.
pub fn table_proof(worker_nonce: &str, fingerprint: &str) -> String {
    format!("table|{worker_nonce}|{fingerprint}")
}

/// Writes one control message (blocking).
///
/// # Errors
/// [`Error::Io`] if the write fails.
pub fn send(stream: &mut (impl Write + ?Sized), msg: &Control) -> Result<()> {
    // One write: on a sealed stream, one record.
    let bytes = encode(msg)?;
    stream.write_all(&bytes).map_err(|e| Error::io("sending a control message", e))?;
    stream.flush().map_err(|e| Error::io("sending a control message", e))
}

/// One control message as a frame's bytes.
///
/// # Errors
/// [`Error::Protocol`] if it cannot be encoded.
pub(crate) fn encode(msg: &Control) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(msg)
        .map_err(|e| Error::Protocol(format!("cannot encode control message: {e}")))?;
    Ok(Frame::data(Header::new(Kind::Control), Codec::Json, json).encode_to_vec())
}

/// Reads one control message (respecting the stream's read timeout).
///
/// # Errors
/// [`Error::Io`] on a closed or timed-out stream; [`Error::Protocol`] on a malformed one.
pub fn recv(stream: &mut (impl Read + ?Sized)) -> Result<Control> {
    recv_within(stream, &CONTROL_LIMIT)
}

/// Largest handshake message: a hello with a rank and a MAC is about a hundred bytes.
const HANDSHAKE_LIMIT: Limits = Limits { max_frame_payload: 4 << 10, max_message: 4 << 10 };

/// Reads one handshake message from a connection not yet authenticated: anything larger
/// than a few KiB is refused before it is read.
///
/// # Errors
/// As [`recv`].
pub fn recv_handshake(stream: &mut (impl Read + ?Sized)) -> Result<Control> {
    recv_within(stream, &HANDSHAKE_LIMIT)
}

fn recv_within(stream: &mut (impl Read + ?Sized), limits: &Limits) -> Result<Control> {
    let mut stream = stream;
    let frame = Frame::read_from(&mut stream, limits)
        .map_err(|e| Error::io("reading a control message", e))?;
    parse(&frame.header, &frame.payload)
}

/// The control message in one frame.
///
/// # Errors
/// [`Error::Protocol`] if it is not a control frame or does not parse.
pub(crate) fn parse(header: &Header, payload: &[u8]) -> Result<Control> {
    if header.kind != Kind::Control {
        return Err(Error::Protocol(format!("expected a control frame, got {:?}", header.kind)));
    }
    serde_json::from_slice(payload)
        .map_err(|e| Error::Protocol(format!("malformed control message: {e}")))
}

/// A fresh random nonce, hex.
pub fn nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// HMAC-SHA256 of `message` under `token`, hex.
pub fn mac(token: &str, message: &str) -> String {
    let mut m =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
    m.update(message.as_bytes());
    hex::encode(m.finalize().into_bytes())
}

/// Checks `proof` against HMAC(token, message) in constant time.
pub fn verify(token: &str, message: &str, proof: &str) -> bool {
    let Ok(bytes) = hex::decode(proof) else { return false };
    let mut m =
        Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes keys of any length");
    m.update(message.as_bytes());
    m.verify_slice(&bytes).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_verifies_only_with_the_right_token() {
        let p = mac("secret", "register|abc");
        assert!(verify("secret", "register|abc", &p));
        assert!(!verify("other", "register|abc", &p));
        assert!(!verify("secret", "register|abd", &p));
        assert!(!verify("secret", "register|abc", "zz"));
    }

    #[test]
    fn control_roundtrip() {
        let msg = Control::Abort { reason: "x".into() };
        let json = serde_json::to_string(&msg).unwrap();
        assert_eq!(json, r#"{"type":"abort","reason":"x"}"#);
        let frame =
            Frame::data(Header::new(Kind::Control), Codec::Json, json.into_bytes()).encode_to_vec();
        assert_eq!(recv(&mut &frame[..]).unwrap(), msg);
    }
}
