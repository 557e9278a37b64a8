//! The shared-memory transport (`spec/bridge.md` §3.1): a private file holding two
//! single-producer single-consumer byte rings, one per direction, that carry the same frame
//! stream as a pipe. Publishing is a release store of the write position, consuming an
//! acquire load of it; a side with nothing to do spins, then sleeps in growing steps on a
//! pidfd of its peer, so a peer's exit wakes it at once — or, where the peer rings the
//! optional doorbell (M4: both sides of an isolated task's rings, which are this code),
//! on a futex of the position it waits on, so that a publication wakes it at once.

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
/// Set by a consumer about to sleep on the futex of `write`, by a producer on that of `read`.
const READER_SLEEPS: usize = 192;
const WRITER_SLEEPS: usize = 256;
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

    /// Publishes position `value` in `word` and wakes a peer sleeping on it (M4).
    fn publish(&self, word: usize, value: u64, sleeps: usize) {
        self.word(word).store(value, Ordering::SeqCst);
        self.wake(word, sleeps);
    }

    /// Wakes a peer sleeping on `word`, if `sleeps` says one does.
    fn wake(&self, word: usize, sleeps: usize) {
        if self.flag(sleeps).load(Ordering::SeqCst) != 0 {
            let w = self.word(word).as_ptr() as *const u32;
            // SAFETY: FUTEX_WAKE on the low half of a word of the mapping.
            unsafe { libc::syscall(libc::SYS_futex, w, libc::FUTEX_WAKE, 1) };
        }
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
pub(crate) struct Backoff {
    /// When the wait began: the first look, so that a read or write that finds its ring
    /// ready reads no clock.
    start: Option<Instant>,
    sleep: Duration,
    spins: u32,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff { start: None, sleep: Duration::from_micros(5), spins: 0 }
    }

    /// A back-off that sleeps from its first step, never spinning: for a thread that
    /// only drains a ring while nobody waits on it.
    pub(crate) fn sleeping() -> Backoff {
        let start = Instant::now().checked_sub(SPIN).unwrap_or_else(Instant::now);
        Backoff { start: Some(start), sleep: Duration::from_micros(5), spins: 0 }
    }

    /// Sleeps on the futex of the low half of the position `word` while it still holds
    /// `seen`, having said so in `sleeps` (a peer that rings the doorbell wakes it at once;
    /// one that does not, when the step is up); then looks at `pidfd`. Returns `true` when
    /// the peer has exited.
    fn sleep_on(&mut self, word: &AtomicU64, seen: u64, sleeps: &AtomicU32, pidfd: i32) -> bool {
        if self.spent() < SPIN {
            return self.wait(pidfd);
        }
        sleeps.store(1, Ordering::SeqCst);
        if word.load(Ordering::SeqCst) == seen {
            let step = libc::timespec { tv_sec: 0, tv_nsec: self.sleep.as_nanos() as libc::c_long };
            // SAFETY: FUTEX_WAIT on the 4-byte-aligned low half of a word of the mapping
            // (little-endian), which outlives the call; it returns at once when the word
            // no longer holds `seen`.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    word.as_ptr() as *const u32,
                    libc::FUTEX_WAIT,
                    seen as u32,
                    &step as *const libc::timespec,
                )
            };
            self.sleep = (self.sleep * 2).min(MAX_SLEEP);
        }
        sleeps.store(0, Ordering::Relaxed);
        let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) > 0 }
    }

    /// Returns `true` when the peer has exited.
    fn spent(&mut self) -> Duration {
        self.start.get_or_insert_with(Instant::now).elapsed()
    }

    fn wait(&mut self, pidfd: i32) -> bool {
        if self.spent() < SPIN {
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
pub struct ShmReader {
    file: Arc<ShmFile>,
    ring: usize,
    peer: Arc<PidFd>,
    deadline: Arc<Deadline>,
}

/// The producing end of one ring.
#[derive(Debug)]
pub struct ShmWriter {
    file: Arc<ShmFile>,
    ring: usize,
    peer: Arc<PidFd>,
    /// The consumer's position when last looked at: it only grows, so the room it shows
    /// is never more than there is, and the consumer's cache line is fetched only when
    /// that room runs out (one transfer between cores fewer per write).
    tail_seen: u64,
}

/// Two rings between this process and a child it is about to fork, in a shared mapping
/// whose file is removed as soon as it is mapped: both processes keep the mapping across
/// the fork, and nothing is left behind however either of them ends. An isolated task's
/// process talks to its worker through them.
#[derive(Debug)]
pub struct ForkRings(Arc<ShmFile>);

impl ForkRings {
    /// Rings of `capacity` bytes (rounded up to a power of two, at least 4 KiB) each way,
    /// in memory (`/dev/shm`) where the machine has it.
    ///
    /// # Errors
    /// The file cannot be made, sized or mapped.
    pub fn new(capacity: usize) -> Result<ForkRings> {
        let root = if Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let dir = heddle_comm::scratch::ScratchDir::create(&root).map_err(|e| {
            Error::io(format!("making a private directory in {}", root.display()), e)
        })?;
        let path = dir.path().join("fork.shm");
        let file = ShmFile::create(&path, capacity)?;
        std::fs::remove_file(&path)
            .map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        Ok(ForkRings(file))
    }

    /// The parent's ends once the child `pid` runs: it writes ring 0 and reads ring 1;
    /// a read ends (0 bytes) when the child has exited, a write fails.
    pub fn parent(&self, child: u32) -> (ShmReader, ShmWriter) {
        host_halves(&self.0, Arc::new(PidFd(pidfd(child))), Arc::default())
    }

    /// The child's ends: it reads ring 0 and writes ring 1; a read ends when the parent
    /// has dropped its writer (or exited).
    pub fn child(&self, parent: u32) -> (ShmReader, ShmWriter) {
        let (file, peer) = (&self.0, Arc::new(PidFd(pidfd(parent))));
        (
            ShmReader {
                file: file.clone(),
                ring: file.ring(0),
                peer: peer.clone(),
                deadline: Arc::default(),
            },
            ShmWriter { file: file.clone(), ring: file.ring(1), peer, tail_seen: 0 },
        )
    }
}

/// The host's halves: it writes ring 0 and reads ring 1.
pub(crate) fn host_halves(
    file: &Arc<ShmFile>,
    peer: Arc<PidFd>,
    deadline: Arc<Deadline>,
) -> (ShmReader, ShmWriter) {
    (
        ShmReader { file: file.clone(), ring: file.ring(1), peer: peer.clone(), deadline },
        ShmWriter { file: file.clone(), ring: file.ring(0), peer, tail_seen: 0 },
    )
}

/// Says without blocking whether the consuming end of a ring would find something: bytes,
/// the ring's close, or the peer's exit; and waits for that one back-off step at a time.
/// Any thread may look; one at a time reads (see `reader.rs`).
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    file: Arc<ShmFile>,
    ring: usize,
    peer: Arc<PidFd>,
}

impl Probe {
    /// Whether bytes are published or the ring is closed.
    pub(crate) fn ready(&self) -> bool {
        let f = &self.file;
        f.word(self.ring + WRITE).load(Ordering::Acquire)
            != f.word(self.ring + READ).load(Ordering::Relaxed)
            || f.flag(self.ring + CLOSED).load(Ordering::Acquire) != 0
    }

    /// Whether `other` looks at the same ring.
    pub(crate) fn same(&self, other: &Probe) -> bool {
        Arc::ptr_eq(&self.file, &other.file) && self.ring == other.ring
    }

    /// One step of `backoff` while nothing is published; `true` when the peer has
    /// exited (a read then returns what is left and the end).
    pub(crate) fn wait(&self, backoff: &mut Backoff) -> bool {
        let f = &self.file;
        let w = f.word(self.ring + WRITE);
        let seen = w.load(Ordering::Acquire);
        backoff.sleep_on(w, seen, f.flag(self.ring + READER_SLEEPS), self.peer.0)
    }
}

impl ShmReader {
    /// What tells, without reading, whether a read would find something.
    pub(crate) fn probe(&self) -> Probe {
        Probe { file: self.file.clone(), ring: self.ring, peer: self.peer.clone() }
    }

    /// Makes a read that waits past `at` fail (`TimedOut`); `None`: reads wait as long as
    /// the peer lives.
    pub fn deadline(&self, at: Option<Instant>) {
        self.deadline.set(at);
    }
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
                f.publish(self.ring + READ, tail + n as u64, self.ring + WRITER_SLEEPS);
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
            if backoff.sleep_on(w, head, f.flag(self.ring + READER_SLEEPS), self.peer.0) {
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
            if f.capacity - ((head - self.tail_seen) as usize) < buf.len() {
                self.tail_seen = r.load(Ordering::Acquire);
            }
            let tail = self.tail_seen;
            let free = f.capacity - (head - tail) as usize;
            if free > 0 {
                let at = head as usize & (f.capacity - 1);
                let n = free.min(buf.len()).min(f.capacity - at);
                // SAFETY: bytes [head, head+n) are free (the consumer released them).
                unsafe {
                    std::ptr::copy_nonoverlapping(buf.as_ptr(), f.data(self.ring).add(at), n)
                };
                f.publish(self.ring + WRITE, head + n as u64, self.ring + READER_SLEEPS);
                return Ok(n);
            }
            if backoff.sleep_on(r, tail, f.flag(self.ring + WRITER_SLEEPS), self.peer.0) {
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
        self.file.flag(self.ring + CLOSED).store(1, Ordering::SeqCst);
        self.file.wake(self.ring + WRITE, self.ring + READER_SLEEPS);
    }
}

#[cfg(test)]
mod tests;
