//! TLS 1.3 (rustls, aws-lc) on job connections. Peer links use mutual TLS against the job
//! CA: each side presents the certificate the master signed for its rank. A worker meets
//! the master before it has the CA, so it accepts the master's certificate unverified and
//! instead binds the job token to it: its registration proof covers the certificate's
//! fingerprint, and the master's answer proves the master knows the token too — a
//! man in the middle holds neither the token nor the master's key.

use std::io::{self, ErrorKind, IoSlice, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Instant;

use heddle_comm::transport::LinkStream;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, Connection, DigitallySignedStruct, RootCertStore, ServerConfig,
    ServerConnection, SignatureScheme,
};

use super::ca::{rank_name, MASTER_NAME};
use crate::{Error, Result};

/// Most sealed bytes a link holds before its writes answer `WouldBlock`.
const SEALED_LIMIT: usize = 4 << 20;

/// aws-lc's provider with TLS 1.3's AES-128-GCM suite first (as Go and BoringSSL order
/// them): 16 GB/s a core here against AES-256's 14, and the bulk of a link's cost.
fn provider() -> Arc<CryptoProvider> {
    use rustls::crypto::aws_lc_rs::cipher_suite;
    let mut p = rustls::crypto::aws_lc_rs::default_provider();
    p.cipher_suites = vec![
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    Arc::new(p)
}

fn tls_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Auth(format!("{what}: {e}"))
}

fn client_builder() -> Result<rustls::ConfigBuilder<ClientConfig, rustls::WantsVerifier>> {
    ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls_error("configuring TLS", e))
}

fn server_builder() -> Result<rustls::ConfigBuilder<ServerConfig, rustls::WantsVerifier>> {
    ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| tls_error("configuring TLS", e))
}

/// One-off connections: no session tickets, no resumption.
fn one_off_server(mut config: ServerConfig) -> Arc<ServerConfig> {
    config.send_tls13_tickets = 0;
    Arc::new(config)
}

fn one_off_client(mut config: ClientConfig) -> Arc<ClientConfig> {
    config.resumption = Resumption::disabled();
    Arc::new(config)
}

/// A worker's TLS for its peer links: its certified key, trusting the job CA only.
#[derive(Debug, Clone)]
pub(crate) struct PeerTls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl PeerTls {
    /// From the job CA's certificate and this worker's certificate and key.
    ///
    /// # Errors
    /// [`Error::Auth`] if the certificates are unusable.
    pub(crate) fn new(
        ca: CertificateDer<'static>,
        cert: CertificateDer<'static>,
        key: PrivateKeyDer<'static>,
    ) -> Result<PeerTls> {
        let mut roots = RootCertStore::empty();
        roots.add(ca).map_err(|e| tls_error("the job CA certificate is unusable", e))?;
        let roots = Arc::new(roots);
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            .build()
            .map_err(|e| tls_error("configuring peer verification", e))?;
        let server = server_builder()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(vec![cert.clone()], key.clone_key())
            .map_err(|e| tls_error("this worker's certificate is unusable", e))?;
        let client = client_builder()?
            .with_root_certificates(roots)
            .with_client_auth_cert(vec![cert], key)
            .map_err(|e| tls_error("this worker's certificate is unusable", e))?;
        Ok(PeerTls { client: one_off_client(client), server: one_off_server(server) })
    }

    /// Opens TLS to the worker of `rank` (its certificate must name that rank).
    ///
    /// # Errors
    /// [`Error::Auth`] if the handshake fails.
    pub(crate) fn connect(
        &self,
        sock: TcpStream,
        rank: usize,
        deadline: Instant,
    ) -> Result<TlsStream> {
        let name =
            ServerName::try_from(rank_name(rank)).map_err(|e| tls_error("naming a peer", e))?;
        let conn = ClientConnection::new(self.client.clone(), name)
            .map_err(|e| tls_error("starting TLS", e))?;
        TlsStream::handshake(conn.into(), sock, deadline)
            .map_err(|e| tls_error(&format!("TLS with rank {rank} failed"), e))
    }

    /// Accepts TLS from a peer, which must present a certificate of this job's CA.
    ///
    /// # Errors
    /// [`Error::Auth`] if the handshake fails (a foreign certificate, say).
    pub(crate) fn accept(&self, sock: TcpStream, deadline: Instant) -> Result<TlsStream> {
        let conn =
            ServerConnection::new(self.server.clone()).map_err(|e| tls_error("starting TLS", e))?;
        TlsStream::handshake(conn.into(), sock, deadline)
            .map_err(|e| tls_error("TLS handshake failed", e))
    }
}

/// The master's TLS for its control port.
///
/// # Errors
/// [`Error::Auth`] if the certificate is unusable.
pub(crate) fn master_server(
    cert: CertificateDer<'static>,
    key: PrivateKeyDer<'static>,
) -> Result<Arc<ServerConfig>> {
    let config = server_builder()?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)
        .map_err(|e| tls_error("the master certificate is unusable", e))?;
    Ok(one_off_server(config))
}

/// Opens TLS to the job master, accepting its certificate for now (the token proofs bind
/// it); returns the stream and the certificate.
///
/// # Errors
/// [`Error::Auth`] if the handshake fails.
pub(crate) fn connect_master(
    sock: TcpStream,
    deadline: Instant,
) -> Result<(TlsStream, CertificateDer<'static>)> {
    let config = client_builder()?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(BoundLater(provider())))
        .with_no_client_auth();
    let name = ServerName::try_from(MASTER_NAME).map_err(|e| tls_error("naming the master", e))?;
    let conn = ClientConnection::new(one_off_client(config), name)
        .map_err(|e| tls_error("starting TLS", e))?;
    let stream = TlsStream::handshake(conn.into(), sock, deadline).map_err(|e| {
        tls_error(
            "TLS with the job master failed (HEDDLE_SECURITY must be the same for the master \
             and every worker)",
            e,
        )
    })?;
    let cert = stream
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .cloned()
        .ok_or_else(|| Error::Auth("the job master presented no certificate".into()))?;
    Ok((stream, cert))
}

/// Accepts TLS on the master's control port.
///
/// # Errors
/// [`Error::Auth`] if the handshake fails.
pub(crate) fn accept_master(
    config: &Arc<ServerConfig>,
    sock: TcpStream,
    deadline: Instant,
) -> Result<TlsStream> {
    let conn = ServerConnection::new(config.clone()).map_err(|e| tls_error("starting TLS", e))?;
    TlsStream::handshake(conn.into(), sock, deadline).map_err(|e| {
        let e = match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => "no TLS hello in time".to_string(),
            _ => e.to_string(),
        };
        tls_error("TLS handshake failed (is HEDDLE_SECURITY the same for this worker?)", e)
    })
}

/// Accepts any server certificate whose handshake signature is sound: the master's
/// certificate is bound to the job token by the registration proofs instead.
#[derive(Debug)]
struct BoundLater(Arc<CryptoProvider>);

impl ServerCertVerifier for BoundLater {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// Bytes read from the socket at once. rustls reads at most 4 KiB per call by itself, a
/// system call each: a 1 MiB message took 256 of them, and a fifth of a TLS link's time.
const RECEIVE_CHUNK: usize = 256 << 10;

/// A TLS session on a socket, readable and writable like the socket: blocking while the
/// socket blocks (handshake, control messages), non-blocking once a link drives it.
pub(crate) struct TlsStream {
    conn: Connection,
    sock: TcpStream,
    /// Received, not yet handed to rustls: `received[taken..filled]`.
    received: Vec<u8>,
    taken: usize,
    filled: usize,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream").field("sock", &self.sock).finish_non_exhaustive()
    }
}

impl TlsStream {
    fn handshake(mut conn: Connection, mut sock: TcpStream, deadline: Instant) -> io::Result<Self> {
        sock.set_nonblocking(false)?;
        let left = deadline.saturating_duration_since(Instant::now());
        let left = left.max(std::time::Duration::from_millis(1));
        sock.set_read_timeout(Some(left))?;
        sock.set_write_timeout(Some(left))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut sock)?;
        }
        conn.set_buffer_limit(Some(SEALED_LIMIT));
        Ok(TlsStream { conn, sock, received: Vec::new(), taken: 0, filled: 0 })
    }

    /// Hands rustls the next received bytes — as many as it takes, a whole record when
    /// they are there, so that one `process_new_packets` opens it — reading a large chunk
    /// from the socket when none are left; `Ok(0)` at the end of the stream.
    fn read_tls(&mut self) -> io::Result<usize> {
        if self.taken == self.filled {
            if self.received.is_empty() {
                self.received = vec![0; RECEIVE_CHUNK];
            }
            self.filled = self.sock.read(&mut self.received)?;
            self.taken = 0;
            if self.filled == 0 {
                return Ok(0);
            }
        }
        let mut given = 0;
        while self.taken < self.filled {
            match self.conn.read_tls(&mut &self.received[self.taken..self.filled]) {
                Ok(0) => break,
                Ok(n) => (self.taken, given) = (self.taken + n, given + n),
                // rustls's buffer holds a whole record: open it first.
                Err(_) if given > 0 => break,
                Err(e) => return Err(e),
            }
        }
        Ok(given)
    }

    /// The certificate the other side presented, if any.
    pub(crate) fn peer_certificate(&self) -> Option<&CertificateDer<'static>> {
        self.conn.peer_certificates().and_then(|c| c.first())
    }
}

impl Read for TlsStream {
    /// Decrypts as much as is buffered, or else what one read of the socket brings, up to
    /// `buf`'s length; 0 at the end of the stream.
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        let mut eof = false;
        loop {
            if n == buf.len() {
                return Ok(n);
            }
            match self.conn.reader().read(&mut buf[n..]) {
                Ok(0) => return Ok(n),
                Ok(k) => {
                    n += k;
                    continue;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                // The peer closed without a close_notify: the same end of stream.
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(n),
                Err(e) => return Err(e),
            }
            // What was decrypted goes out before the socket is read again: a read that
            // would find nothing more costs a system call.
            if eof || (n > 0 && self.taken == self.filled) {
                return Ok(n);
            }
            match self.read_tls() {
                Ok(0) => eof = true,
                Ok(_) => {
                    self.conn
                        .process_new_packets()
                        .map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
                }
                Err(e)
                    if n > 0 && matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
                {
                    return Ok(n)
                }
                Err(e) => return Err(e),
            }
        }
    }
}

impl Write for TlsStream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_vectored(&[IoSlice::new(buf)])
    }

    /// Seals what rustls's buffer takes (all slices into the same records), then pushes
    /// what the socket takes; `WouldBlock` when the buffer is full.
    fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        if self.conn.wants_write() {
            LinkStream::push(self)?;
        }
        let n = self.conn.writer().write_vectored(bufs)?;
        if n == 0 && bufs.iter().any(|b| !b.is_empty()) {
            return Err(ErrorKind::WouldBlock.into());
        }
        match LinkStream::push(self) {
            Err(e) if e.kind() != ErrorKind::WouldBlock => Err(e),
            _ => Ok(n),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock)?;
        }
        Ok(())
    }
}

impl LinkStream for TlsStream {
    fn push(&mut self) -> io::Result<bool> {
        while self.conn.wants_write() {
            match self.conn.write_tls(&mut self.sock) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    fn socket(&self) -> &TcpStream {
        &self.sock
    }
}
