//! The shared-memory transport (`spec/bridge.md` §3.1): a private file holding two
//! single-producer single-consumer byte rings, one per direction, that carry the same frame
//! stream as a pipe. Publishing is a release store of the write position, consuming an
//! acquire load of it; a side with nothing to do spins, then sleeps in growing steps on a
//! pidfd of its peer, so a peer's exit wakes it at once.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memmap2::MmapMut;

use crate::{Error, Result};

/// The file's magic bytes.
pub(crate) const SHM_MAGIC: &[u8; 8] = b"HDBRSHM1";
/// Bytes of the file header and of each ring's control block.
pub(crate) const SHM_BLOCK: usize = 4096;
/// Default data bytes of each ring.
pub(crate) const SHM_DEFAULT_CAPACITY: usize = 4 << 20;
const WRITE: usize = 0;
const READ: usize = 64;
const CLOSED: usize = 128;
/// How long a side spins before it starts to sleep.
const SPIN: Duration = Duration::from_micros(50);
/// The longest sleep between looks at the ring.
const MAX_SLEEP: Duration = Duration::from_millis(1);

/// The mapped file, shared by both halves.
#[derive(Debug)]
pub(crate) struct ShmFile {
    map: MmapMut,
    capacity: usize,
    path: PathBuf,
}

impl ShmFile {
    /// Creates `path` (0600, new) with rings of `capacity` bytes (a power of two).
    pub(crate) fn create(path: &Path, capacity: usize) -> Result<Arc<ShmFile>> {
        let capacity = capacity.next_power_of_two().max(SHM_BLOCK);
        let len = SHM_BLOCK + 2 * (SHM_BLOCK + capacity);
        let file = heddle_comm::private::create_file(path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        file.set_len(len as u64).map_err(|e| Error::io(format!("sizing {}", path.display()), e))?;
        // SAFETY: a new private file of ours; only this bridge's two processes map it.
        let mut map = unsafe { MmapMut::map_mut(&file) }
            .map_err(|e| Error::io(format!("mapping {}", path.display()), e))?;
        map[..8].copy_from_slice(SHM_MAGIC);
        map[8..16].copy_from_slice(&(capacity as u64).to_le_bytes());
        Ok(Arc::new(ShmFile { map, capacity, path: path.to_owned() }))
    }

    fn ring(&self, k: usize) -> usize {
        SHM_BLOCK + k * (SHM_BLOCK + self.capacity)
    }

    fn word(&self, at: usize) -> &AtomicU64 {
        // SAFETY: `at` is 8-aligned inside the mapping (page-aligned base), which lives as
        // long as `self`; the peer accesses it only atomically too.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU64) }
    }

    fn flag(&self, at: usize) -> &AtomicU32 {
        // SAFETY: as `word`, 4-aligned.
        unsafe { &*(self.map.as_ptr().add(at) as *const AtomicU32) }
    }

    fn data(&self, ring: usize) -> *mut u8 {
        // The mapping is writable; both sides touch disjoint ranges as the positions say.
        (self.map.as_ptr() as *mut u8).wrapping_add(ring + SHM_BLOCK)
    }

    /// Bytes of shared memory.
    pub(crate) fn bytes(&self) -> usize {
        self.map.len()
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Waits with a spin, then growing sleeps on `pidfd` (readable when the peer exits).
struct Backoff {
    start: Instant,
    sleep: Duration,
    spins: u32,
}

impl Backoff {
    fn new() -> Backoff {
        Backoff { start: Instant::now(), sleep: Duration::from_micros(5), spins: 0 }
    }

    /// Returns `true` when the peer has exited.
    fn wait(&mut self, pidfd: i32) -> bool {
        if self.start.elapsed() < SPIN {
            // Yield now and then: on a machine with fewer free cores than spinners, the
            // peer may be waiting for this very core.
            self.spins += 1;
            if self.spins.is_multiple_of(16) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            return false;
        }
        let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
        let ms = i32::try_from(self.sleep.as_millis()).unwrap_or(1);
        if ms == 0 {
            std::thread::sleep(self.sleep);
            // SAFETY: one valid pollfd, no wait.
            let n = unsafe { libc::poll(&mut p, 1, 0) };
            self.sleep = (self.sleep * 2).min(MAX_SLEEP);
            return n > 0;
        }
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n > 0
    }
}

/// The host's pidfd of the filter process, or -1 (then only the ring's flag ends a read).
pub(crate) fn pidfd(pid: u32) -> i32 {
    // SAFETY: pidfd_open(2) with a pid of our child; the fd is closed by `PidFd`'s drop.
    unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0) as i32 }
}

/// An owned pidfd.
#[derive(Debug)]
pub(crate) struct PidFd(pub(crate) i32);

impl Drop for PidFd {
    fn drop(&mut self) {
        if self.0 >= 0 {
            // SAFETY: our own descriptor, closed once.
            unsafe { libc::close(self.0) };
        }
    }
}

/// A time after which a waiting read fails (`0`: none), shared with the bridge, which
/// sets it while it waits for the filter's first message.
#[derive(Debug, Default)]
pub(crate) struct Deadline(AtomicU64);

impl Deadline {
    fn base() -> Instant {
        static BASE: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        *BASE.get_or_init(Instant::now)
    }

    /// Sets it (`None`: no deadline).
    pub(crate) fn set(&self, at: Option<Instant>) {
        let ns =
            at.map_or(0, |t| t.saturating_duration_since(Self::base()).as_nanos().max(1) as u64);
        self.0.store(ns, Ordering::Relaxed);
    }

    fn passed(&self) -> bool {
        let ns = self.0.load(Ordering::Relaxed);
        ns != 0 && Self::base().elapsed().as_nanos() as u64 >= ns
    }
}

/// The consuming end of one ring.
#[derive(Debug)]
pub(crate) struct ShmReader {
    file: Arc<ShmFile>,
    ring: usize,
    peer: Arc<PidFd>,
    deadline: Arc<Deadline>,
}

/// The producing end of one ring.
#[derive(Debug)]
pub(crate) struct ShmWriter {
    file: Arc<ShmFile>,
    ring: usize,
    peer: Arc<PidFd>,
}

/// The host's halves: it writes ring 0 and reads ring 1.
pub(crate) fn host_halves(
    file: &Arc<ShmFile>,
    peer: Arc<PidFd>,
    deadline: Arc<Deadline>,
) -> (ShmReader, ShmWriter) {
    (
        ShmReader { file: file.clone(), ring: file.ring(1), peer: peer.clone(), deadline },
        ShmWriter { file: file.clone(), ring: file.ring(0), peer },
    )
}

impl Read for ShmReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let f = &self.file;
        let (w, r) = (f.word(self.ring + WRITE), f.word(self.ring + READ));
        let mut backoff = Backoff::new();
        loop {
            let head = w.load(Ordering::Acquire);
            let tail = r.load(Ordering::Relaxed);
            if head != tail {
                let avail = (head - tail) as usize;
                let at = tail as usize & (f.capacity - 1);
                let n = avail.min(buf.len()).min(f.capacity - at);
                // SAFETY: bytes [tail, tail+n) were published by the producer's release
                // store of `write`, and it will not touch them until `read` passes them.
                unsafe {
                    std::ptr::copy_nonoverlapping(f.data(self.ring).add(at), buf.as_mut_ptr(), n)
                };
                r.store(tail + n as u64, Ordering::Release);
                return Ok(n);
            }
            // Closed, and nothing published before the close (the writer publishes its
            // last bytes, then sets the flag: look at the head again after the flag).
            if f.flag(self.ring + CLOSED).load(Ordering::Acquire) != 0
                && w.load(Ordering::Acquire) == r.load(Ordering::Relaxed)
            {
                return Ok(0);
            }
            if self.deadline.passed() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no frame from the filter in time",
                ));
            }
            if backoff.wait(self.peer.0) {
                // The peer exited: what it published is read above; then the stream ends.
                if w.load(Ordering::Acquire) == r.load(Ordering::Relaxed) {
                    return Ok(0);
                }
            }
        }
    }
}

impl Write for ShmWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let f = &self.file;
        let (w, r) = (f.word(self.ring + WRITE), f.word(self.ring + READ));
        let mut backoff = Backoff::new();
        loop {
            let head = w.load(Ordering::Relaxed);
            let tail = r.load(Ordering::Acquire);
            let free = f.capacity - (head - tail) as usize;
            if free > 0 {
                let at = head as usize & (f.capacity - 1);
                let n = free.min(buf.len()).min(f.capacity - at);
                // SAFETY: bytes [head, head+n) are free (the consumer released them).
                unsafe {
                    std::ptr::copy_nonoverlapping(buf.as_ptr(), f.data(self.ring).add(at), n)
                };
                w.store(head + n as u64, Ordering::Release);
                return Ok(n);
            }
            if backoff.wait(self.peer.0) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::BrokenPipe,
                    "the filter exited",
                ));
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for ShmWriter {
    fn drop(&mut self) {
        self.file.flag(self.ring + CLOSED).store(1, Ordering::Release);
    }
}
