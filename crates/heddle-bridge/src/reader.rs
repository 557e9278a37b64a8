//! The channel from the filter and who reads it. A reader thread reads every frame the
//! filter sends, so the filter never blocks on a full channel, and hands records, credits
//! and control messages to the bridge through one locked state and a condition variable.
//! On shared memory a thread waiting for the filter reads the ring itself instead
//! (leader/follower): the filter's result reaches the waiter with no hop through the
//! reader thread, which keeps off the ring meanwhile — three threads spinning on two
//! cores cost a round trip a few microseconds more than the raw ring.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::control::FilterMsg;
use crate::diagnostics::Meter;
use crate::framing::{FrameReader, Incoming};
use crate::shm::{Backoff, Probe};
use crate::{Error, Record};

/// The frames of a channel's reading half.
pub(crate) type Frames = FrameReader<Box<dyn Read + Send>>;

/// The reading half of the current channel.
pub(crate) struct Reader {
    pub(crate) frames: Frames,
    /// Looks at it without reading: shared memory only, where waiters read it themselves.
    pub(crate) probe: Option<Probe>,
}

/// How the reader thread ended.
#[derive(Debug)]
pub(crate) enum End {
    /// The filter closed its channel between frames.
    Closed,
    /// A bad frame or message.
    Failed(Error),
}

/// What the reader thread shares with the bridge.
pub(crate) struct State {
    /// DATA records the host may still send.
    pub(crate) credits: u64,
    /// Results not yet taken.
    pub(crate) results: VecDeque<Record>,
    /// Control messages not yet taken, in order.
    pub(crate) controls: VecDeque<FilterMsg>,
    /// The filter's last frame on the old channel arrived: the switch's epoch, the old
    /// channel's reading half (kept if it was the pipe) and the next record number.
    pub(crate) switch_ack: Option<(u32, Box<dyn Read + Send>, u64)>,
    /// Set once the thread has stopped.
    pub(crate) ended: Option<End>,
    /// Measurements.
    pub(crate) meter: Meter,
    /// When a waiter last saw that the filter had sent something (the reader does not
    /// read the clock per message: a waiter that reads it anyway notes it).
    pub(crate) last_heard: Instant,
    /// The generation `last_heard` was noted at.
    pub(crate) heard: u64,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("credits", &self.credits)
            .field("results", &self.results.len())
            .finish()
    }
}

/// The state and its condition variable, and the channel. A waiter first spins on
/// `generation` for a few microseconds (a round trip often completes meanwhile, and waking
/// a sleeping thread on another core costs tens of microseconds here), then sleeps; the
/// reader notifies only when someone sleeps. On shared memory it reads the ring instead.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    generation: AtomicU64,
    sleepers: AtomicU32,
    /// The channel's reading half: `None` between the filter's last frame on an old
    /// channel and the new one, and after the end.
    reader: Mutex<Option<Reader>>,
    /// Waiters reading the ring themselves now: the reader thread keeps off it.
    polling: AtomicU32,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("probe", &self.probe.is_some()).finish_non_exhaustive()
    }
}

/// How long a waiter spins before it sleeps.
const SPIN: Duration = Duration::from_micros(40);
/// How long the reader thread sleeps while a waiter reads the ring.
const HANDED_OVER: Duration = Duration::from_micros(200);

impl Shared {
    pub(crate) fn new(credits: u64) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(State {
                credits,
                results: VecDeque::new(),
                controls: VecDeque::new(),
                switch_ack: None,
                ended: None,
                meter: Meter::new(),
                last_heard: Instant::now(),
                heard: 0,
            }),
            changed: Condvar::new(),
            generation: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
            reader: Mutex::new(None),
            polling: AtomicU32::new(0),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn reader(&self) -> MutexGuard<'_, Option<Reader>> {
        self.reader.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Notes `now` as when the filter was last heard from if anything arrived since the
    /// last note.
    pub(crate) fn note_heard(&self, g: &mut State, now: Instant) {
        let generation = self.generation.load(Ordering::Acquire);
        if generation != g.heard {
            (g.heard, g.last_heard) = (generation, now);
        }
    }

    /// Waits for a change, at most `limit` from `start` (the caller's reading of the
    /// clock): on shared memory by reading the ring, else spinning briefly without the
    /// lock, then sleeping.
    pub(crate) fn wait<'a>(
        &'a self,
        g: MutexGuard<'a, State>,
        start: Instant,
        limit: Duration,
    ) -> MutexGuard<'a, State> {
        let seen = self.generation.load(Ordering::Acquire);
        drop(g);
        let probe = match self.reader.try_lock() {
            Ok(r) => r.as_ref().and_then(|r| r.probe.clone()),
            Err(_) => None,
        };
        if let Some(probe) = probe {
            return self.read_while_waiting(&probe, seen, start, limit);
        }
        let mut spins = 0u32;
        while start.elapsed() < SPIN.min(limit) {
            if self.generation.load(Ordering::Acquire) != seen {
                return self.lock();
            }
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let g = self.lock();
        if self.generation.load(Ordering::Acquire) != seen {
            return g;
        }
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let g = self.changed.wait_timeout(g, limit).unwrap_or_else(PoisonError::into_inner).0;
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        g
    }

    /// Waits for a change by reading the ring behind `probe` itself; returns early when
    /// the channel is no longer that ring (a switch), for the caller to look again.
    fn read_while_waiting(
        &self,
        probe: &Probe,
        seen: u64,
        start: Instant,
        limit: Duration,
    ) -> MutexGuard<'_, State> {
        self.polling.fetch_add(1, Ordering::SeqCst);
        // Spin first, looking at the clock and yielding the core only now and then (a
        // look costs a few nanoseconds, a clock read 20, a yield a system call); then
        // sleep in growing steps.
        let mut backoff = Backoff::sleeping();
        let mut looks = 0u32;
        let mut spinning = true;
        while self.generation.load(Ordering::Acquire) == seen {
            looks = looks.wrapping_add(1);
            if looks.is_multiple_of(64) {
                let spent = start.elapsed();
                if spent >= limit {
                    break;
                }
                spinning = spent < SPIN;
                if spinning && looks.is_multiple_of(1024) {
                    std::thread::yield_now();
                }
            }
            if !probe.ready() {
                if spinning {
                    std::hint::spin_loop();
                    continue;
                }
                if !probe.wait(&mut backoff) && !probe.ready() {
                    continue;
                }
            }
            let Ok(mut r) = self.reader.try_lock() else {
                // The reader thread is in the middle of a message.
                std::hint::spin_loop();
                continue;
            };
            if !r.as_ref().is_some_and(|r| r.probe.as_ref().is_some_and(|p| p.same(probe))) {
                break;
            }
            self.read_some(&mut r);
            backoff = Backoff::sleeping();
        }
        self.polling.fetch_sub(1, Ordering::SeqCst);
        self.lock()
    }

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut g = self.lock();
        f(&mut g);
        self.generation.fetch_add(1, Ordering::Release);
        drop(g);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.changed.notify_all();
        }
    }

    /// Reads messages from the channel in `slot` and hands them over, until none is left
    /// half-read in its buffer (where a probe of the ring would not see it); at the
    /// filter's last frame of a switch the channel leaves `slot`; `false` once it has ended.
    fn read_some(&self, slot: &mut Option<Reader>) -> bool {
        while self.read_one(slot) {
            if !slot.as_ref().is_some_and(|r| r.frames.has_buffered()) {
                return true;
            }
        }
        false
    }

    /// Reads one message from the channel in `slot` and hands it over; `false` once the
    /// channel has ended.
    fn read_one(&self, slot: &mut Option<Reader>) -> bool {
        let Some(r) = slot.as_mut() else { return true };
        let end = |slot: &mut Option<Reader>, end: End| {
            *slot = None;
            self.update(|s| s.ended = Some(end));
            false
        };
        match r.frames.read_message() {
            Ok(Some(Incoming::Record(_, r))) => self.update(|s| {
                s.meter.received(r.payload.len());
                s.results.push_back(r);
            }),
            Ok(Some(Incoming::Credit(n))) => self.update(|s| {
                s.credits += u64::from(n);
                s.meter.granted(n);
            }),
            Ok(Some(Incoming::Control(json))) => match FilterMsg::from_json(&json) {
                Ok(FilterMsg::ChangeBridgeType { epoch, token: None }) => {
                    let Some(r) = slot.take() else { return true };
                    if r.frames.has_buffered() {
                        let e = Error::protocol(
                            "§6",
                            "the filter wrote after its last frame on the old channel",
                        );
                        return end(slot, End::Failed(e));
                    }
                    let seq = r.frames.next_seq();
                    let old = r.frames.into_inner();
                    self.update(|s| s.switch_ack = Some((epoch, old, seq)));
                }
                Ok(m) => self.update(|s| s.controls.push_back(m)),
                Err(e) => return end(slot, End::Failed(e)),
            },
            Ok(None) => return end(slot, End::Closed),
            Err(e) => return end(slot, End::Failed(e)),
        }
        true
    }
}

/// Reads the channel until the filter closes it or breaks the protocol; at a switch it
/// waits for the next channel's reader on `next`. On shared memory it reads only while no
/// waiter does, and sleeps (never spins) between looks.
pub(crate) fn run(shared: &Shared, first: Reader, next: &Receiver<Reader>) {
    // Short sleeps (shared-memory back-off) should last what they ask, not 50 µs more.
    // SAFETY: prctl on the calling thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    *shared.reader() = Some(first);
    let mut backoff = Backoff::sleeping();
    loop {
        if shared.polling.load(Ordering::SeqCst) > 0 {
            // A waiter reads the ring; blocking on the channel's lock here would cost its
            // unlock a wake-up of this thread, in the middle of its round trip.
            std::thread::sleep(HANDED_OVER);
            continue;
        }
        let mut slot = match shared.reader.try_lock() {
            Ok(slot) => slot,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => {
                std::thread::yield_now();
                continue;
            }
        };
        let Some(probe) = slot.as_ref().map(|r| r.probe.clone()) else {
            drop(slot);
            if shared.lock().ended.is_some() {
                return;
            }
            match next.recv() {
                Ok(r) => *shared.reader() = Some(r),
                Err(_) => return,
            }
            continue;
        };
        let Some(probe) = probe else {
            // A pipe or socket: a blocking read, holding the channel.
            if !shared.read_some(&mut slot) {
                return;
            }
            continue;
        };
        if shared.polling.load(Ordering::SeqCst) == 0 && probe.ready() {
            if !shared.read_some(&mut slot) {
                return;
            }
            backoff = Backoff::sleeping();
            continue;
        }
        drop(slot);
        if shared.polling.load(Ordering::SeqCst) == 0 && probe.wait(&mut backoff) {
            // The filter exited: what it published, then the end.
            let mut slot = shared.reader();
            if slot.as_ref().and_then(|r| r.probe.as_ref()).is_some_and(|p| p.same(&probe))
                && !shared.read_some(&mut slot)
            {
                return;
            }
        }
    }
}
