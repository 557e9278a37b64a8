//! A worker's doorbell: lets a worker with nothing to do sleep in the kernel until a
//! same-host peer writes into one of its rings or frees room in one of the peer's, instead
//! of waking every few milliseconds to look.
//!
//! Two words on their own cache lines of the worker's segment: how many of its threads are
//! asleep, and a counter they sleep on (a futex, shared between processes). A peer that
//! publishes a frame or frees a buffer rings the bell of the ring's other end only when
//! someone sleeps there — a fence and a load on the fast path. A sleeper counts itself in,
//! then looks at its rings once more before it sleeps on the counter's value read before
//! that look, so a frame published meanwhile either is seen or changes the counter:
//! no wake-up is lost.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::region::Region;

/// Bytes a doorbell takes (two cache lines).
pub(crate) const DOORBELL_BYTES: usize = 128;

/// One worker's doorbell, as the worker or a same-host peer maps it.
#[derive(Debug, Clone)]
pub(crate) struct Doorbell {
    region: Arc<Region>,
    offset: usize,
}

impl Doorbell {
    /// The doorbell at `offset` (64-aligned) of `region`.
    ///
    /// # Panics
    /// If it is misaligned or past the region.
    pub(crate) fn new(region: Arc<Region>, offset: usize) -> Doorbell {
        assert!(offset.is_multiple_of(64) && offset + DOORBELL_BYTES <= region.len());
        Doorbell { region, offset }
    }

    /// A doorbell on the heap (a world inside one process, and tests).
    pub(crate) fn heap() -> Doorbell {
        Doorbell::new(Arc::new(Region::heap(DOORBELL_BYTES)), 0)
    }

    fn sleepers(&self) -> &AtomicU32 {
        // SAFETY: 64-aligned, inside the region (checked in `new`), lives with the region.
        unsafe { &*(self.region.at(self.offset) as *const AtomicU32) }
    }

    fn counter(&self) -> &AtomicU32 {
        // SAFETY: as above, one cache line further.
        unsafe { &*(self.region.at(self.offset + 64) as *const AtomicU32) }
    }

    /// Wakes the owner's sleeping threads, if any; call after publishing.
    pub(crate) fn ring(&self) {
        fence(Ordering::SeqCst);
        if self.sleepers().load(Ordering::Relaxed) > 0 {
            self.counter().fetch_add(1, Ordering::SeqCst);
            // SAFETY: a futex wake on a 4-byte aligned word of a live mapping; shared
            // (not PRIVATE) because the sleeper may be another process.
            unsafe {
                libc::syscall(libc::SYS_futex, self.counter().as_ptr(), libc::FUTEX_WAKE, i32::MAX)
            };
        }
    }

    /// Sleeps up to `limit` unless `ready` (checked after counting in) finds work, or a
    /// peer rings meanwhile. Returns whether it slept.
    pub(crate) fn park(&self, limit: Duration, ready: impl FnOnce() -> bool) -> bool {
        let seen = self.counter().load(Ordering::SeqCst);
        self.sleepers().fetch_add(1, Ordering::SeqCst);
        fence(Ordering::SeqCst);
        let sleep = !ready();
        if sleep {
            let ts = libc::timespec {
                tv_sec: limit.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(limit.subsec_nanos() as i32),
            };
            // SAFETY: waits while the word still holds `seen`, at most `ts` (relative);
            // returns early on a wake, a signal, or a changed value.
            unsafe {
                libc::syscall(
                    libc::SYS_futex,
                    self.counter().as_ptr(),
                    libc::FUTEX_WAIT,
                    seen,
                    &ts as *const libc::timespec,
                )
            };
        }
        self.sleepers().fetch_sub(1, Ordering::SeqCst);
        sleep
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_ring_wakes_a_sleeper_and_ready_work_skips_the_sleep() {
        let bell = Doorbell::heap();
        let other = bell.clone();
        let started = Instant::now();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            other.ring();
        });
        assert!(bell.park(Duration::from_secs(10), || false));
        let woke = started.elapsed();
        waker.join().unwrap();
        assert!(woke < Duration::from_secs(5), "slept {woke:?} despite the ring");
        assert!(!bell.park(Duration::from_secs(10), || true));
        let t = Instant::now();
        assert!(bell.park(Duration::from_millis(20), || false));
        assert!(t.elapsed() >= Duration::from_millis(15), "woke early: {:?}", t.elapsed());
    }
}
