//! A worker's doorbell: lets a worker with nothing to do sleep in the kernel until a
//! same-host peer writes into one of its rings or frees room in one of the peer's, instead
//! of waking every few milliseconds to look.
//!
//! Two words on their own cache lines of the worker's segment: how many of its threads are
//! asleep, and a counter they sleep on (a futex, shared between processes). A peer that
//! publishes a frame or frees a buffer rings the bell of the ring's other end only when
//! someone sleeps there. A sleeper counts itself in, then looks at its rings once more
//! before it sleeps on the counter's value read before that look, so a frame published
//! meanwhile either is seen or changes the counter: no wake-up is lost.
//!
//! That needs a full barrier between a writer's publication and its look at the sleepers,
//! and between the sleeper's count and its look at the rings. A fence on every frame costs
//! a fifth of a ping-pong here, so the barrier is asymmetric, as in userspace RCU: writers
//! only keep the compiler from reordering, and a thread about to sleep (rare, after a quiet
//! spell) makes every running thread of the job's processes pass a barrier at once
//! (`membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)`, for which each process registers when it
//! maps a doorbell). Where the kernel offers no such barrier, both sides fence.

use std::sync::atomic::{compiler_fence, fence, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use super::region::Region;

/// Bytes a doorbell takes (two cache lines).
pub(crate) const DOORBELL_BYTES: usize = 128;

const MEMBARRIER_CMD_QUERY: libc::c_long = 0;
const MEMBARRIER_CMD_GLOBAL_EXPEDITED: libc::c_long = 1 << 1;
const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: libc::c_long = 1 << 2;

/// Whether this process takes part in expedited global barriers (registering it on first
/// use): then writers need no fence.
fn asymmetric() -> bool {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    *REGISTERED.get_or_init(|| {
        // SAFETY: membarrier(2) queries and registers; it touches no memory of ours.
        unsafe {
            let offered = libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
            offered >= 0
                && offered & MEMBARRIER_CMD_GLOBAL_EXPEDITED != 0
                && libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0)
                    == 0
        }
    })
}

/// The writer's side of the barrier.
fn light_barrier() {
    if asymmetric() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The sleeper's side: every running thread of every registered process passes a full
/// barrier before this returns.
fn heavy_barrier() {
    // SAFETY: membarrier(2) with a registered command; it touches no memory of ours.
    if !asymmetric()
        || unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0) } != 0
    {
        fence(Ordering::SeqCst);
    }
}

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
        asymmetric(); // register before this process writes to anyone
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

    /// Whether `other` is this doorbell (as mapped here).
    pub(crate) fn same(&self, other: &Doorbell) -> bool {
        Arc::ptr_eq(&self.region, &other.region) && self.offset == other.offset
    }

    /// Wakes the owner's sleeping threads, if any; call after publishing.
    pub(crate) fn ring(&self) {
        light_barrier();
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
        heavy_barrier();
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
