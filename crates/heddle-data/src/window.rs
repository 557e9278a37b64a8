//! Windows over keyed streams: tumbling and sliding windows by count or by time,
//! session windows; processing time (the clock of the worker) or event time (a
//! timestamp in each record) with watermarks and allowed lateness.
//!
//! Event time: the stage before the shuffle tracks the largest timestamp its source
//! instance has seen and sends every window instance a watermark (that timestamp minus
//! the allowed out-of-orderness) whenever it advances, in order with the records; a
//! window instance's watermark is the least over its inputs. A window fires when the
//! watermark passes its end, and stays open for late records for `allowed_lateness` more
//! (each late record re-emits the window's updated result); records later than that are
//! dropped and counted.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use heddle_task::{Compute, Context, Record, Result};

use crate::tasks::Table;
use crate::window_stamp::Element;
use serde::{Deserialize, Serialize};

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The shape of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKind {
    /// Every `n` records of a key.
    TumblingCount(u64),
    /// The last `size` records of a key, every `slide` records.
    SlidingCount {
        /// Records in a window.
        size: u64,
        /// Records between two windows.
        slide: u64,
    },
    /// Consecutive spans of `size` ms.
    Tumbling(u64),
    /// Spans of `size` ms starting every `slide` ms.
    Sliding {
        /// Length in ms.
        size: u64,
        /// Step in ms.
        slide: u64,
    },
    /// Records of a key closer than `gap` ms to each other.
    Session {
        /// Inactivity that ends a session, in ms.
        gap: u64,
    },
}

/// Which clock time windows follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Time {
    /// The worker's clock when the record reaches the window.
    Processing,
    /// Each record's own timestamp, with watermarks.
    Event {
        /// How far out of order timestamps may arrive, in ms (the watermark trails the
        /// largest timestamp seen by this much).
        out_of_orderness: u64,
        /// How long after the watermark passes a window's end late records still update
        /// it, in ms.
        allowed_lateness: u64,
    },
}

/// A window specification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Its shape.
    pub kind: WindowKind,
    /// Its clock (ignored by count windows).
    pub time: Time,
}

impl Window {
    /// Every `n` records of a key.
    pub fn tumbling_count(n: u64) -> Window {
        Window { kind: WindowKind::TumblingCount(n.max(1)), time: Time::Processing }
    }

    /// The last `size` records of a key, every `slide` records.
    pub fn sliding_count(size: u64, slide: u64) -> Window {
        Window {
            kind: WindowKind::SlidingCount { size: size.max(1), slide: slide.max(1) },
            time: Time::Processing,
        }
    }

    /// Consecutive spans of `size`.
    pub fn tumbling(size: Duration) -> Window {
        Window { kind: WindowKind::Tumbling(ms(size)), time: Time::Processing }
    }

    /// Spans of `size` starting every `slide`.
    pub fn sliding(size: Duration, slide: Duration) -> Window {
        Window {
            kind: WindowKind::Sliding { size: ms(size), slide: ms(slide) },
            time: Time::Processing,
        }
    }

    /// Sessions of records closer than `gap` to each other.
    pub fn session(gap: Duration) -> Window {
        Window { kind: WindowKind::Session { gap: ms(gap) }, time: Time::Processing }
    }

    /// Follows event time (the timestamp the stream's `event_time` function gives).
    pub fn event_time(mut self, out_of_orderness: Duration, allowed_lateness: Duration) -> Window {
        self.time = Time::Event {
            out_of_orderness: out_of_orderness.as_millis() as u64,
            allowed_lateness: allowed_lateness.as_millis() as u64,
        };
        self
    }
}

fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// One result of a window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Windowed<K, V> {
    /// The key.
    pub key: K,
    /// Window start (ms; for count windows, the index of its first record).
    pub start: u64,
    /// Window end, exclusive (ms; for count windows, one past its last record).
    pub end: u64,
    /// The reduced value.
    pub value: V,
    /// Records in the window.
    pub records: u64,
    /// A late record changed a window that had fired already.
    pub update: bool,
}

/// One open time window of a key.
pub(crate) struct Open<V> {
    pub(crate) value: V,
    pub(crate) records: u64,
    pub(crate) fired: bool,
}

/// After the shuffle: keeps each key's windows and emits their results.
pub(crate) struct WindowTask<K, V> {
    pub(crate) window: Window,
    pub(crate) reduce: Arc<dyn Fn(V, V) -> V + Send + Sync>,
    pub(crate) sources: u32,
    /// Watermark per upstream instance (event time).
    pub(crate) marks: HashMap<u32, u64>,
    /// Time windows by (end, start), each with its keys.
    pub(crate) open: BTreeMap<(u64, u64), Table<K, Open<V>>>,
    /// Count windows: the records of each key so far (sliding keeps the last `size`).
    pub(crate) counts: HashMap<K, (u64, VecDeque<V>)>,
    /// Sessions of each key: (start, last record time) -> value.
    pub(crate) sessions: HashMap<K, Vec<(u64, u64, V, u64)>>,
    pub(crate) late: Arc<AtomicU64>,
}

impl<K: Clone + Ord + Hash + Send + 'static, V: Clone + Send + 'static> WindowTask<K, V> {
    fn watermark(&self) -> u64 {
        match self.window.time {
            Time::Processing => now_ms(),
            Time::Event { .. } => {
                if self.marks.len() < self.sources as usize {
                    0
                } else {
                    self.marks.values().copied().min().unwrap_or(0)
                }
            }
        }
    }

    fn lateness(&self) -> u64 {
        match self.window.time {
            Time::Event { allowed_lateness, .. } => allowed_lateness,
            Time::Processing => 0,
        }
    }

    fn add(&mut self, ctx: &mut Context<'_, Windowed<K, V>>, k: K, v: V, t: u64) {
        // In processing time a record arrives "now": its windows are open by definition.
        // Reading the clock a second time could land one millisecond later, on its
        // window's end, and drop the record as late.
        let wm = match self.window.time {
            Time::Processing => t,
            Time::Event { .. } => self.watermark(),
        };
        let late = self.lateness();
        match self.window.kind {
            WindowKind::TumblingCount(n) => {
                let (seen, held) = self.counts.entry(k.clone()).or_default();
                held.push_back(v);
                *seen += 1;
                if held.len() as u64 == n {
                    let value =
                        held.drain(..).reduce(|a, b| (self.reduce)(a, b)).expect("n >= 1 records");
                    ctx.emit(Windowed {
                        key: k,
                        start: *seen - n,
                        end: *seen,
                        value,
                        records: n,
                        update: false,
                    });
                }
            }
            WindowKind::SlidingCount { size, slide } => {
                let (seen, held) = self.counts.entry(k.clone()).or_default();
                held.push_back(v);
                *seen += 1;
                if held.len() as u64 > size {
                    held.pop_front();
                }
                if *seen % slide == 0 {
                    let value = held
                        .iter()
                        .cloned()
                        .reduce(|a, b| (self.reduce)(a, b))
                        .expect("a record was just added");
                    ctx.emit(Windowed {
                        key: k,
                        start: *seen - held.len() as u64,
                        end: *seen,
                        value,
                        records: held.len() as u64,
                        update: false,
                    });
                }
            }
            WindowKind::Tumbling(size) => {
                self.add_timed(ctx, k, v, t, &[t - t % size], size, wm, late)
            }
            WindowKind::Sliding { size, slide } => {
                let last = t - t % slide;
                let starts: Vec<u64> = (0..)
                    .map(|i| i * slide)
                    .take_while(|d| *d < size && *d <= last)
                    .map(|d| last - d)
                    .filter(|s| s + size > t)
                    .collect();
                self.add_timed(ctx, k, v, t, &starts, size, wm, late);
            }
            WindowKind::Session { gap } => {
                if t + gap + late <= wm && wm != 0 {
                    self.late.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                let sessions = self.sessions.entry(k).or_default();
                // Merge with every session this record touches.
                let mut merged = (t, t, v, 1u64);
                let mut keep = Vec::new();
                for s in sessions.drain(..) {
                    if t + gap > s.0 && s.1 + gap > t {
                        merged = (
                            merged.0.min(s.0),
                            merged.1.max(s.1),
                            (self.reduce)(s.2, merged.2),
                            merged.3 + s.3,
                        );
                    } else {
                        keep.push(s);
                    }
                }
                keep.push(merged);
                *sessions = keep;
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn add_timed(
        &mut self,
        ctx: &mut Context<'_, Windowed<K, V>>,
        k: K,
        v: V,
        t: u64,
        starts: &[u64],
        size: u64,
        wm: u64,
        late: u64,
    ) {
        let _ = t;
        for &start in starts {
            let end = start + size;
            if end + late <= wm && wm != 0 {
                self.late.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                continue;
            }
            let keys = self.open.entry((end, start)).or_default();
            match keys.get_mut(&k) {
                Some(w) => {
                    w.value = (self.reduce)(w.value.clone(), v.clone());
                    w.records += 1;
                    if w.fired {
                        ctx.emit(Windowed {
                            key: k.clone(),
                            start,
                            end,
                            value: w.value.clone(),
                            records: w.records,
                            update: true,
                        });
                    }
                }
                None => {
                    let fired = end <= wm && wm != 0;
                    if fired {
                        ctx.emit(Windowed {
                            key: k.clone(),
                            start,
                            end,
                            value: v.clone(),
                            records: 1,
                            update: true,
                        });
                    }
                    keys.insert(k.clone(), Open { value: v.clone(), records: 1, fired });
                }
            }
        }
    }

    /// Fires windows the watermark passed; forgets those past their lateness.
    fn advance(&mut self, ctx: &mut Context<'_, Windowed<K, V>>) {
        let (wm, late) = (self.watermark(), self.lateness());
        if wm == 0 {
            return;
        }
        let mut forget = Vec::new();
        // Ordered by end: stop at the first window the watermark has not passed.
        for (&(end, start), keys) in self.open.iter_mut() {
            if end > wm {
                break;
            }
            let done = end.saturating_add(late) <= wm;
            for (k, w) in keys.iter_mut() {
                if !w.fired {
                    w.fired = true;
                    ctx.emit(Windowed {
                        key: k.clone(),
                        start,
                        end,
                        value: w.value.clone(),
                        records: w.records,
                        update: false,
                    });
                }
            }
            if done {
                forget.push((end, start));
            }
        }
        for span in forget {
            self.open.remove(&span);
        }
        if let WindowKind::Session { gap } = self.window.kind {
            for (k, sessions) in &mut self.sessions {
                sessions.retain(|s| {
                    let end = s.1 + gap;
                    if end <= wm {
                        ctx.emit(Windowed {
                            key: k.clone(),
                            start: s.0,
                            end,
                            value: s.2.clone(),
                            records: s.3,
                            update: false,
                        });
                        false
                    } else {
                        true
                    }
                });
            }
            self.sessions.retain(|_, s| !s.is_empty());
        }
    }
}

impl<K: Record + Ord + Hash + Eq, V: Record> Compute for WindowTask<K, V> {
    type In = Element<K, V>;
    type Out = Windowed<K, V>;

    fn snapshot(&mut self, _: &mut Context<'_, Self::Out>, _: u64) -> Result<Option<Vec<u8>>> {
        self.save().map(Some)
    }

    fn restore(&mut self, ctx: &mut Context<'_, Self::Out>, state: &[u8]) -> Result<()> {
        self.load(state).map_err(|e| heddle_task::Error::Graph(format!("{}: {e}", ctx.info())))
    }

    fn execute(&mut self, ctx: &mut Context<'_, Windowed<K, V>>, e: Element<K, V>) -> Result<()> {
        match e {
            Element::Record(k, v, t) => {
                let t = if self.window.time == Time::Processing { now_ms() } else { t };
                self.add(ctx, k, v, t);
            }
            Element::Mark { time, from, .. } => {
                let m = self.marks.entry(from).or_insert(0);
                if time > *m {
                    *m = time;
                    self.advance(ctx);
                }
            }
        }
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Context<'_, Windowed<K, V>>) -> Result<()> {
        if self.window.time == Time::Processing {
            self.advance(ctx);
        }
        Ok(())
    }

    fn end_of_input(&mut self, ctx: &mut Context<'_, Windowed<K, V>>) -> Result<()> {
        // Everything is in: fire what is still open (processing time too).
        for (k, (_, held)) in std::mem::take(&mut self.counts) {
            let _ = (k, held); // partial count windows never fire
        }
        self.marks = (0..self.sources).map(|s| (s, u64::MAX)).collect();
        let time = self.window.time;
        self.window.time = Time::Event { out_of_orderness: 0, allowed_lateness: 0 };
        self.advance(ctx);
        self.window.time = time;
        Ok(())
    }
}
