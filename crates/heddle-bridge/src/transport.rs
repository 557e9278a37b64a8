//! Transports (`spec/bridge.md` §3): the host's side of making a channel — anonymous
//! pipes, named pipes, TCP on loopback and Unix domain sockets — each file private to this
//! user, inside the bridge's own scratch directory.

use std::ffi::CString;
use std::fs::File;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How a bridge's channel is carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// The filter's standard input and output.
    Pipe,
    /// Two named pipes in a private directory.
    Fifo,
    /// A TCP connection on loopback.
    Tcp,
    /// A Unix domain stream socket in a private directory.
    Unix,
    /// Two byte rings in a private shared-memory file.
    Shm,
}

impl Transport {
    /// Every transport.
    pub const ALL: [Transport; 5] =
        [Transport::Pipe, Transport::Fifo, Transport::Tcp, Transport::Unix, Transport::Shm];

    /// The name used in `HEDDLE_BRIDGE` and CHANGE_BRIDGE_TYPE.
    pub fn name(self) -> &'static str {
        match self {
            Transport::Pipe => "pipe",
            Transport::Fifo => "fifo",
            Transport::Tcp => "tcp",
            Transport::Unix => "unix",
            Transport::Shm => "shm",
        }
    }
}

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Transport {
    type Err = Error;
    fn from_str(s: &str) -> Result<Transport> {
        Transport::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            Error::Config(format!(
                "unknown bridge transport `{s}`; use pipe, fifo, tcp, unix or shm"
            ))
        })
    }
}

/// The two halves of a channel, and the descriptor the host polls before its first read.
pub(crate) struct Channel {
    pub(crate) read: Box<dyn Read + Send>,
    pub(crate) write: Box<dyn Write + Send>,
    pub(crate) read_fd: RawFd,
    /// Looks at the reading half without reading (shared memory only).
    pub(crate) probe: Option<crate::shm::Probe>,
}

impl std::fmt::Debug for Channel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Channel(fd {})", self.read_fd)
    }
}

/// A channel being set up: what the filter is told, and how the host completes it.
#[derive(Debug)]
pub(crate) enum Endpoint {
    Pipe,
    Fifo {
        dir: PathBuf,
        from_filter: File,
    },
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
    Shm(
        std::sync::Arc<crate::shm::ShmFile>,
        std::sync::Arc<crate::shm::Deadline>,
        Option<heddle_comm::scratch::ScratchDir>,
    ),
}

impl Endpoint {
    /// Prepares channel number `epoch` of `t` inside the private directory `dir`.
    pub(crate) fn prepare(t: Transport, dir: &Path, epoch: u32) -> Result<Endpoint> {
        Ok(match t {
            Transport::Pipe => Endpoint::Pipe,
            Transport::Fifo => {
                let sub = dir.join(format!("fifo-{epoch}"));
                heddle_comm::private::create_dir(&sub)
                    .map_err(|e| Error::io(format!("creating {}", sub.display()), e))?;
                for name in ["to-filter", "from-filter"] {
                    mkfifo(&sub.join(name))?;
                }
                let from_filter = open_fifo(&sub.join("from-filter"), libc::O_RDONLY)?;
                Endpoint::Fifo { dir: sub, from_filter }
            }
            Transport::Tcp => {
                let l = TcpListener::bind("127.0.0.1:0")
                    .map_err(|e| Error::io("listening on 127.0.0.1 for a bridge", e))?;
                l.set_nonblocking(true)
                    .map_err(|e| Error::io("setting up a bridge listener", e))?;
                Endpoint::Tcp(l)
            }
            Transport::Unix => {
                let path = dir.join(format!("bridge-{epoch}.sock"));
                let l = UnixListener::bind(&path)
                    .map_err(|e| Error::io(format!("listening on {}", path.display()), e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| Error::io(format!("protecting {}", path.display()), e))?;
                l.set_nonblocking(true)
                    .map_err(|e| Error::io("setting up a bridge listener", e))?;
                Endpoint::Unix(l, path)
            }
            Transport::Shm => {
                // Memory-backed where the machine has it (/dev/shm): a file in /tmp may live on
                // a disk, whose page cache would be written back while the rings run.
                let shm_dir = Path::new("/dev/shm")
                    .is_dir()
                    .then(|| heddle_comm::scratch::ScratchDir::create(Path::new("/dev/shm")).ok())
                    .flatten();
                let at = shm_dir.as_ref().map_or(dir, |d| d.path());
                let path = at.join(format!("bridge-{epoch}.shm"));
                let file = crate::shm::ShmFile::create(&path, crate::shm::SHM_DEFAULT_CAPACITY)?;
                Endpoint::Shm(file, std::sync::Arc::default(), shm_dir)
            }
        })
    }

    /// The transport.
    pub(crate) fn transport(&self) -> Transport {
        match self {
            Endpoint::Pipe => Transport::Pipe,
            Endpoint::Fifo { .. } => Transport::Fifo,
            Endpoint::Tcp(_) => Transport::Tcp,
            Endpoint::Unix(..) => Transport::Unix,
            Endpoint::Shm(..) => Transport::Shm,
        }
    }

    /// The address of §3's table (`""` for a pipe).
    pub(crate) fn address(&self) -> String {
        match self {
            Endpoint::Pipe => String::new(),
            Endpoint::Fifo { dir, .. } => dir.display().to_string(),
            Endpoint::Tcp(l) => l.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            Endpoint::Unix(_, p) => p.display().to_string(),
            Endpoint::Shm(f, ..) => f.path().display().to_string(),
        }
    }

    /// Clears the deadline of the first message (shm), once it arrived.
    pub(crate) fn handshake_done(&self) {
        if let Endpoint::Shm(_, first, _) = self {
            first.set(None);
        }
    }

    /// Bytes of shared memory it holds.
    pub(crate) fn shm_bytes(&self) -> usize {
        if let Endpoint::Shm(f, ..) = self {
            f.bytes()
        } else {
            0
        }
    }

    /// The value of `HEDDLE_BRIDGE`.
    pub(crate) fn env_value(&self) -> String {
        match self {
            Endpoint::Pipe => "pipe".into(),
            e => format!("{}:{}", e.transport(), e.address()),
        }
    }

    /// Waits for the filter's side of a FIFO or socket channel until `deadline`, calling
    /// `alive` between tries (it fails when the filter has exited). Pipes are not accepted
    /// here: the host already holds them.
    pub(crate) fn accept(
        &mut self,
        deadline: Instant,
        limit: Duration,
        pid: u32,
        alive: &mut dyn FnMut() -> Result<()>,
    ) -> Result<Channel> {
        let timeout = || Error::Timeout { what: "connection from the filter".into(), limit };
        loop {
            alive()?;
            let got: Option<Channel> = match self {
                Endpoint::Pipe => {
                    return Err(Error::Config("a pipe channel is not accepted".into()))
                }
                Endpoint::Shm(file, first, _) => {
                    // The rings are ready: the filter's first frame arrives on them.
                    first.set(Some(deadline));
                    let peer = std::sync::Arc::new(crate::shm::PidFd(crate::shm::pidfd(pid)));
                    let (r, w) = crate::shm::host_halves(file, peer, first.clone());
                    let probe = Some(r.probe());
                    Some(Channel { read: Box::new(r), write: Box::new(w), read_fd: -1, probe })
                }
                Endpoint::Fifo { dir, from_filter } => {
                    match open_fifo(&dir.join("to-filter"), libc::O_WRONLY) {
                        Ok(to) => {
                            set_blocking(to.as_raw_fd())?;
                            let from = from_filter
                                .try_clone()
                                .map_err(|e| Error::io("opening the filter's FIFO", e))?;
                            wait_readable(from.as_raw_fd(), deadline, limit, alive)?;
                            set_blocking(from.as_raw_fd())?;
                            let read_fd = from.as_raw_fd();
                            Some(Channel {
                                read: Box::new(from),
                                write: Box::new(to),
                                read_fd,
                                probe: None,
                            })
                        }
                        Err(Error::Io { source, .. })
                            if source.raw_os_error() == Some(libc::ENXIO) =>
                        {
                            None
                        }
                        Err(e) => return Err(e),
                    }
                }
                Endpoint::Tcp(l) => match l.accept() {
                    Ok((s, _)) => Some(split_tcp(s)?),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
                    Err(e) => return Err(Error::io("accepting the filter's connection", e)),
                },
                Endpoint::Unix(l, _) => match l.accept() {
                    Ok((s, _)) => Some(split_unix(s)?),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
                    Err(e) => return Err(Error::io("accepting the filter's connection", e)),
                },
            };
            if let Some(c) = got {
                return Ok(c);
            }
            if Instant::now() >= deadline {
                return Err(timeout());
            }
            std::thread::sleep(Duration::from_micros(500));
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        match self {
            Endpoint::Fifo { dir, .. } => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Endpoint::Unix(_, p) => {
                let _ = std::fs::remove_file(p);
            }
            Endpoint::Shm(f, _, dir) => {
                let _ = std::fs::remove_file(f.path());
                // The /dev/shm directory goes with the file (its drop removes it).
                drop(dir.take());
            }
            _ => {}
        }
    }
}

fn split_tcp(s: TcpStream) -> Result<Channel> {
    let e = |e| Error::io("setting up the filter's TCP connection", e);
    s.set_nonblocking(false).map_err(e)?;
    s.set_nodelay(true).map_err(e)?;
    let r = s.try_clone().map_err(e)?;
    let read_fd = r.as_raw_fd();
    Ok(Channel { read: Box::new(r), write: Box::new(s), read_fd, probe: None })
}

fn split_unix(s: UnixStream) -> Result<Channel> {
    let e = |e| Error::io("setting up the filter's Unix socket", e);
    s.set_nonblocking(false).map_err(e)?;
    let r = s.try_clone().map_err(e)?;
    let read_fd = r.as_raw_fd();
    Ok(Channel { read: Box::new(r), write: Box::new(s), read_fd, probe: None })
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_encoded_bytes())
        .map_err(|_| Error::Config(format!("a path with a NUL byte: {}", p.display())))
}

fn mkfifo(p: &Path) -> Result<()> {
    let c = cpath(p)?;
    // SAFETY: a valid NUL-terminated path; mkfifo creates a new node or fails.
    if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
        return Err(Error::io(
            format!("creating the FIFO {}", p.display()),
            std::io::Error::last_os_error(),
        ));
    }
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| Error::io(format!("protecting {}", p.display()), e))
}

fn open_fifo(p: &Path, mode: libc::c_int) -> Result<File> {
    let c = cpath(p)?;
    // SAFETY: a valid path; the fd returned is owned by the File made from it.
    let fd = unsafe {
        libc::open(c.as_ptr(), mode | libc::O_NONBLOCK | libc::O_CLOEXEC | libc::O_NOFOLLOW)
    };
    if fd < 0 {
        return Err(Error::io(
            format!("opening the FIFO {}", p.display()),
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh descriptor nobody else owns.
    Ok(unsafe { File::from_raw_fd(fd) })
}

fn set_blocking(fd: RawFd) -> Result<()> {
    // SAFETY: fcntl on a descriptor we own.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(Error::io("configuring a FIFO", std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Waits until `fd` has bytes to read (or its writer left), checking `alive` every 20 ms.
pub(crate) fn wait_readable(
    fd: RawFd,
    deadline: Instant,
    limit: Duration,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    loop {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, 20) };
        if n > 0 {
            return Ok(());
        }
        alive()?;
        if Instant::now() >= deadline {
            return Err(Error::Timeout { what: "first frame from the filter".into(), limit });
        }
    }
}

/// Reads the frames of the first message of a new channel straight from `fd`, never
/// blocking past `deadline` (a filter that writes half a frame and stops cannot hang the
/// host); at most `cap` payload bytes.
pub(crate) fn read_first_message(
    fd: RawFd,
    deadline: Instant,
    limit: Duration,
    cap: usize,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    loop {
        let at = bytes.len();
        read_exact_until(fd, &mut bytes, heddle_wire::HEADER_LEN, deadline, limit, alive)?;
        let h = heddle_wire::Header::decode(&bytes[at..], &heddle_wire::Limits::default())
            .map_err(|source| Error::Wire { peer: "filter", source })?;
        let body = usize::from(h.key_len) + h.frag_len as usize;
        if bytes.len() + body > cap {
            return Err(Error::protocol("§4.1", format!("a first message above {cap} bytes")));
        }
        read_exact_until(fd, &mut bytes, body, deadline, limit, alive)?;
        if h.flags.is_last() {
            return Ok(bytes);
        }
    }
}

fn read_exact_until(
    fd: RawFd,
    out: &mut Vec<u8>,
    n: usize,
    deadline: Instant,
    limit: Duration,
    alive: &mut dyn FnMut() -> Result<()>,
) -> Result<()> {
    let end = out.len() + n;
    out.resize(end, 0);
    let mut at = end - n;
    while at < end {
        wait_readable(fd, deadline, limit, alive)?;
        // SAFETY: reading into the initialised tail of `out`.
        let got = unsafe { libc::read(fd, out[at..].as_mut_ptr().cast(), end - at) };
        match got {
            0 => {
                return Err(Error::protocol(
                    "§7",
                    "the filter closed its channel inside its first message",
                ))
            }
            n if n < 0 => {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted
                    && e.kind() != std::io::ErrorKind::WouldBlock
                {
                    return Err(Error::io("reading the filter's first message", e));
                }
            }
            n => at += n as usize,
        }
    }
    Ok(())
}
