//! The host's reader thread: it reads every frame the filter sends, so the filter never
//! blocks on a full channel, and hands records, credits and control messages to the
//! bridge through one locked state and a condition variable.

use std::collections::VecDeque;
use std::io::Read;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::control::FilterMsg;
use crate::diagnostics::Meter;
use crate::framing::{FrameReader, Incoming};
use crate::{Error, Record};

/// The reader side of a channel as the thread holds it.
pub(crate) type Reader = FrameReader<Box<dyn Read + Send>>;

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
    /// When the filter last sent anything.
    pub(crate) last_heard: Instant,
}

impl std::fmt::Debug for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("State")
            .field("credits", &self.credits)
            .field("results", &self.results.len())
            .finish()
    }
}

/// The state and its condition variable. A waiter first spins on `generation` for a few
/// microseconds (a round trip often completes meanwhile, and waking a sleeping thread on
/// another core costs tens of microseconds here), then sleeps; the reader notifies only
/// when someone sleeps.
#[derive(Debug)]
pub(crate) struct Shared {
    state: Mutex<State>,
    changed: Condvar,
    generation: AtomicU64,
    sleepers: AtomicU32,
}

/// How long a waiter spins before it sleeps.
const SPIN: Duration = Duration::from_micros(40);

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
            }),
            changed: Condvar::new(),
            generation: AtomicU64::new(0),
            sleepers: AtomicU32::new(0),
        })
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Waits for a change, at most `limit`: spins briefly without the lock, then sleeps.
    pub(crate) fn wait<'a>(
        &'a self,
        g: MutexGuard<'a, State>,
        limit: Duration,
    ) -> MutexGuard<'a, State> {
        let seen = self.generation.load(Ordering::Acquire);
        drop(g);
        let start = Instant::now();
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

    fn update(&self, f: impl FnOnce(&mut State)) {
        let mut g = self.lock();
        g.last_heard = Instant::now();
        f(&mut g);
        self.generation.fetch_add(1, Ordering::Release);
        drop(g);
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            self.changed.notify_all();
        }
    }
}

/// Reads `reader` until the filter closes it or breaks the protocol; at a switch it waits
/// for the next channel's reader on `next`.
pub(crate) fn run(shared: &Shared, mut reader: Reader, next: &Receiver<Reader>) {
    // Short sleeps (shared-memory back-off) should last what they ask, not 50 µs more.
    // SAFETY: prctl on the calling thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    loop {
        let item = reader.read_message();
        match item {
            Ok(Some(Incoming::Record(_, r))) => shared.update(|s| {
                s.meter.received(r.payload.len());
                s.results.push_back(r);
            }),
            Ok(Some(Incoming::Credit(n))) => shared.update(|s| {
                s.credits += u64::from(n);
                s.meter.granted(n);
            }),
            Ok(Some(Incoming::Control(json))) => match FilterMsg::from_json(&json) {
                Ok(FilterMsg::ChangeBridgeType { epoch, token: None }) => {
                    let seq = reader.next_seq();
                    if reader.has_buffered() {
                        let e = Error::protocol(
                            "§6",
                            "the filter wrote after its last frame on the old channel",
                        );
                        return shared.update(|s| s.ended = Some(End::Failed(e)));
                    }
                    let old = reader.into_inner();
                    shared.update(|s| s.switch_ack = Some((epoch, old, seq)));
                    match next.recv() {
                        Ok(r) => reader = r,
                        Err(_) => return,
                    }
                }
                Ok(m) => shared.update(|s| s.controls.push_back(m)),
                Err(e) => return shared.update(|s| s.ended = Some(End::Failed(e))),
            },
            Ok(None) => return shared.update(|s| s.ended = Some(End::Closed)),
            Err(e) => return shared.update(|s| s.ended = Some(End::Failed(e))),
        }
    }
}
