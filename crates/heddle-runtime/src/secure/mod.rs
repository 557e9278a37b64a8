//! Secure links: what protects each TCP connection of a job (`HEDDLE_SECURITY`).
//!
//! - unset: TLS 1.3 between hosts, plaintext on loopback (shared memory never leaves the
//!   host);
//! - `tls`: TLS 1.3 on every TCP connection, loopback too;
//! - `mac`: every frame sealed with an HMAC-SHA256 tag (authenticated, not encrypted);
//! - `none`: plaintext (connections still prove the job token when they open).
//!
//! Every worker and the master must use the same setting. The job master creates the
//! job's certificate authority ([`ca::JobCa`]); see [`tls`] for how the token binds it.

pub(crate) mod ca;
pub(crate) mod mac_stream;
pub(crate) mod tls;

use std::net::{IpAddr, TcpStream};
use std::time::Instant;

use heddle_comm::transport::LinkStream;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The `HEDDLE_SECURITY` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Security {
    /// TLS between hosts, plaintext on loopback (the default).
    #[default]
    Auto,
    /// TLS on every TCP connection.
    Tls,
    /// A MAC (AES-256-GMAC) per record on every TCP connection.
    Mac,
    /// Plaintext.
    None,
}

impl Security {
    /// The environment variable.
    pub const VAR: &'static str = "HEDDLE_SECURITY";

    /// Parses a value of `HEDDLE_SECURITY` (empty: the default).
    ///
    /// ```
    /// use heddle_runtime::Security;
    /// assert_eq!(Security::parse("mac")?, Security::Mac);
    /// assert!(Security::parse("ssl").unwrap_err().to_string().contains("tls, mac or none"));
    /// # Ok::<(), heddle_runtime::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Env`] naming the variable and the values it takes.
    pub fn parse(value: &str) -> Result<Security> {
        match value.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Security::Auto),
            "tls" => Ok(Security::Tls),
            "mac" => Ok(Security::Mac),
            "none" => Ok(Security::None),
            other => Err(Error::Env(format!(
                "{}={other:?} is not a security mode: use tls, mac or none (unset or auto: TLS \
                 between hosts, plaintext on loopback)",
                Self::VAR
            ))),
        }
    }

    /// The value of `HEDDLE_SECURITY` that means this setting.
    pub fn as_str(self) -> &'static str {
        match self {
            Security::Auto => "auto",
            Security::Tls => "tls",
            Security::Mac => "mac",
            Security::None => "none",
        }
    }

    /// How a connection between `local` and `peer` is protected.
    pub(crate) fn for_link(self, local: IpAddr, peer: IpAddr) -> LinkMode {
        match self {
            Security::Auto if local.is_loopback() && peer.is_loopback() => LinkMode::Plain,
            Security::Auto | Security::Tls => LinkMode::Tls,
            Security::Mac => LinkMode::Mac,
            Security::None => LinkMode::Plain,
        }
    }

    /// How the connection `sock` is protected.
    ///
    /// # Errors
    /// [`Error::Io`] if the socket's addresses cannot be read.
    pub(crate) fn for_socket(self, sock: &TcpStream) -> Result<LinkMode> {
        let local = sock.local_addr().map_err(|e| Error::io("reading a local address", e))?;
        let peer = sock.peer_addr().map_err(|e| Error::io("reading a peer address", e))?;
        Ok(self.for_link(local.ip(), peer.ip()))
    }

    /// Whether workers need certificates (some link may use TLS).
    pub(crate) fn uses_tls(self) -> bool {
        matches!(self, Security::Auto | Security::Tls)
    }
}

/// How one connection is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LinkMode {
    /// TLS 1.3.
    Tls,
    /// MAC-sealed records (AES-256-GMAC).
    Mac,
    /// Plaintext.
    Plain,
}

/// SHA-256 of a certificate, hex: how the token proofs and the peer table name it.
pub(crate) fn fingerprint(der: &[u8]) -> String {
    hex::encode(Sha256::digest(der))
}

/// A key for one direction of one link: HMAC-SHA256 of `label` under the job token.
pub(crate) fn link_key(token: &str, label: &str) -> [u8; 32] {
    let mut m = Hmac::<Sha256>::new_from_slice(token.as_bytes()).expect("HMAC takes any key");
    m.update(label.as_bytes());
    m.finalize().into_bytes().into()
}

/// Seals `sock` in `mac` mode for one side of a link named `label`: `first` is the side
/// that opened it (its key sends "|a", the other's "|b").
pub(crate) fn seal(
    sock: TcpStream,
    token: &str,
    label: &str,
    first: bool,
    peer: String,
) -> Box<dyn LinkStream> {
    let (a, b) = (link_key(token, &format!("{label}|a")), link_key(token, &format!("{label}|b")));
    let (send, recv) = if first { (a, b) } else { (b, a) };
    Box::new(mac_stream::MacStream::new(sock, &send, &recv, peer))
}

/// A connection in the middle of its opening handshake, before control messages flow:
/// TLS already up, or the bare socket.
#[derive(Debug)]
pub(crate) struct Opening {
    /// The stream control messages travel on now (blocking).
    pub(crate) stream: Box<dyn LinkStream>,
    /// The bare socket (for `mac` mode, sealed once the token is proven).
    pub(crate) sock: TcpStream,
    /// How the connection is protected.
    pub(crate) mode: LinkMode,
    /// The master certificate's fingerprint (TLS to the master), else empty.
    pub(crate) fingerprint: String,
}

impl Opening {
    /// The stream for the rest of the connection: sealed in `mac` mode under the keys for
    /// `label`, else as it is.
    pub(crate) fn finish(
        self,
        token: &str,
        label: &str,
        first: bool,
        peer: String,
    ) -> Box<dyn LinkStream> {
        match self.mode {
            LinkMode::Mac => seal(self.sock, token, label, first, peer),
            LinkMode::Tls | LinkMode::Plain => self.stream,
        }
    }
}

impl Opening {
    /// Explains a failure to read the master's first message: a master under TLS waits
    /// for a TLS hello and then closes a plaintext connection.
    pub(crate) fn first_message_error(&self, e: Error) -> Error {
        match (self.mode, e) {
            (LinkMode::Mac | LinkMode::Plain, Error::Io { source, .. }) => Error::Auth(format!(
                "the job master closed the connection before its challenge ({source}): if it \
                 uses TLS, set {} (or --security) the same here",
                Security::VAR
            )),
            (_, e) => e,
        }
    }
}

/// Opens a worker's connection to the job master under `security`.
///
/// # Errors
/// [`Error::Auth`] if TLS fails; [`Error::Io`] on a socket error.
pub(crate) fn open_to_master(
    sock: TcpStream,
    security: Security,
    deadline: Instant,
) -> Result<Opening> {
    let mode = security.for_socket(&sock)?;
    let bare = sock.try_clone().map_err(|e| Error::io("cloning a socket", e))?;
    match mode {
        LinkMode::Tls => {
            let (stream, cert) = tls::connect_master(sock, deadline)?;
            Ok(Opening {
                stream: Box::new(stream),
                sock: bare,
                mode,
                fingerprint: fingerprint(&cert),
            })
        }
        LinkMode::Mac | LinkMode::Plain => {
            Ok(Opening { stream: Box::new(sock), sock: bare, mode, fingerprint: String::new() })
        }
    }
}

/// Opens a connection on the master's control port under `security`: TLS with the
/// master's certificate (`tls` and its fingerprint), or the bare socket.
///
/// # Errors
/// [`Error::Auth`] if TLS fails or is needed without credentials; [`Error::Io`] on a
/// socket error.
pub(crate) fn open_at_master(
    sock: TcpStream,
    security: Security,
    tls: Option<(&std::sync::Arc<rustls::ServerConfig>, &str)>,
    deadline: Instant,
) -> Result<Opening> {
    let mode = security.for_socket(&sock)?;
    let bare = sock.try_clone().map_err(|e| Error::io("cloning a socket", e))?;
    match (mode, tls) {
        (LinkMode::Tls, Some((config, fingerprint))) => Ok(Opening {
            stream: Box::new(tls::accept_master(config, sock, deadline)?),
            sock: bare,
            mode,
            fingerprint: fingerprint.to_string(),
        }),
        (LinkMode::Tls, None) => {
            Err(Error::Auth("TLS needs the job's certificate authority".into()))
        }
        (LinkMode::Mac | LinkMode::Plain, _) => {
            let left = deadline.saturating_duration_since(Instant::now());
            sock.set_read_timeout(Some(left.max(std::time::Duration::from_millis(1))))
                .map_err(|e| Error::io("setting a read timeout", e))?;
            Ok(Opening { stream: Box::new(sock), sock: bare, mode, fingerprint: String::new() })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_protects_links_between_hosts_only() {
        let (lo, other) = (IpAddr::from([127, 0, 0, 1]), IpAddr::from([10, 77, 0, 2]));
        assert_eq!(Security::Auto.for_link(lo, lo), LinkMode::Plain);
        assert_eq!(Security::Auto.for_link(other, other), LinkMode::Tls);
        assert_eq!(Security::Tls.for_link(lo, lo), LinkMode::Tls);
        assert_eq!(Security::Mac.for_link(other, other), LinkMode::Mac);
        assert_eq!(Security::None.for_link(other, other), LinkMode::Plain);
        assert_eq!(Security::parse(" TLS ").unwrap(), Security::Tls);
    }
}
