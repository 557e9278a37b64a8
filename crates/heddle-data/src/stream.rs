//! `Stream<T>`: an unbounded data set. Records flow as they come (streaming dataflow
//! operations); record-wise steps are those of [`DataSet`]; keyed windows aggregate them;
//! sinks consume them. [`Stream::run`] runs until every source ends or a stop handle is
//! stopped.

use std::hash::Hash;
use std::io::{Read, Write};
use std::marker::PhantomData;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use heddle_dataflow::Options;
use heddle_task::{Edge, Plan, Record, RoundRobin, StopHandle, Strategy};

use crate::dataset::DataSet;
use crate::session::{Build, Session};
use crate::tasks::{MakePull, PullSource, Pulled, SinkTask};
use crate::window::{element_partition, Stamp, Window, WindowTask, Windowed};
use crate::Locked;
use crate::{Error, Result};

/// How often a window checks the clock (processing time).
const TICK: Duration = Duration::from_millis(1);

/// An unbounded, lazily described stream of `T`.
pub struct Stream<T> {
    pub(crate) data: DataSet<T>,
    late: Arc<AtomicU64>,
}

impl<T> Clone for Stream<T> {
    fn clone(&self) -> Self {
        Stream { data: self.data.clone(), late: self.late.clone() }
    }
}

impl<T> std::fmt::Debug for Stream<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:?})", self.data)
    }
}

impl<T: Record> Stream<T> {
    pub(crate) fn wrap<U>(&self, data: DataSet<U>) -> Stream<U> {
        Stream { data, late: self.late.clone() }
    }

    /// The session the stream belongs to.
    pub fn session(&self) -> &crate::Session {
        self.data.session()
    }

    /// Each record through `f`.
    pub fn map<U: Record>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Stream<U> {
        self.wrap(self.data.map(f))
    }

    /// Each record to any number of records.
    pub fn flat_map<U: Record, I: IntoIterator<Item = U>>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> Stream<U> {
        self.wrap(self.data.flat_map(f))
    }

    /// The records for which `keep` holds.
    pub fn filter(&self, keep: impl Fn(&T) -> bool + Send + Sync + 'static) -> Stream<T> {
        self.wrap(self.data.filter(keep))
    }

    /// `(f(record), record)` for each record.
    pub fn key_by<K: Record>(&self, f: impl Fn(&T) -> K + Send + Sync + 'static) -> Stream<(K, T)> {
        self.wrap(self.data.key_by(f))
    }

    /// The records of both streams.
    pub fn union(&self, other: &Stream<T>) -> Stream<T> {
        self.wrap(self.data.union(&other.data))
    }

    /// Records dropped because they came later than their window's allowed lateness, on
    /// this worker so far.
    pub fn late_records(&self) -> u64 {
        self.late.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs the stream into `sink` until every source ends or `stop` is stopped
    /// (collective: every worker runs it).
    pub(crate) fn run_sink(
        &self,
        each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync>,
        end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync>,
        stop: Option<StopHandle>,
    ) -> Result<()> {
        let session = &self.data.session;
        let mut b = Build::default();
        let v = self.data.vertex(&mut b)?;
        let sink = b.graph.compute("sink", self.data.parallelism(), move |_| SinkTask {
            each: each.clone(),
            end: end.clone(),
        });
        b.graph.connect(&v, &sink, Edge::direct());
        let plan = Plan::new(&b.graph, &session.0.workers, &RoundRobin)?;
        let opts = Options { mode: heddle_dataflow::Mode::Streaming, ..session.0.opts.clone() };
        let mut job = session.job(&b, &plan, opts)?;
        if let Some(stop) = stop {
            job = job.stop_with(stop);
        }
        job.run()?;
        Ok(())
    }

    /// Calls `f(partition, record)` for each record as it arrives, until every source
    /// ends or `stop` is stopped.
    ///
    /// # Errors
    /// The first error of `f`, a task or communication failure.
    pub fn run(
        &self,
        f: impl Fn(u32, T) -> Result<()> + Send + Sync + 'static,
        stop: Option<StopHandle>,
    ) -> Result<()> {
        self.run_sink(Arc::new(f), Arc::new(|_| Ok(())), stop)
    }

    /// Sends each record's `Display` as a line to a TCP server at `addr` (one connection
    /// per partition).
    ///
    /// # Errors
    /// As [`Stream::run`]; a connection that fails.
    pub fn write_socket(&self, addr: &str, stop: Option<StopHandle>) -> Result<()>
    where
        T: std::fmt::Display,
    {
        let addr = addr.to_string();
        let conns: Arc<Mutex<std::collections::HashMap<u32, TcpStream>>> = Arc::default();
        let io = |a: &str, e: std::io::Error| Error::Io { path: format!("tcp://{a}"), source: e };
        let (c2, a2) = (conns.clone(), addr.clone());
        let end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync> = Arc::new(move |i| {
            if let Some(mut s) = c2.locked().remove(&i) {
                s.flush().map_err(|e| io(&a2, e))?;
            }
            Ok(())
        });
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |i, x| {
            let mut conns = conns.locked();
            if let std::collections::hash_map::Entry::Vacant(e) = conns.entry(i) {
                e.insert(TcpStream::connect(&addr).map_err(|e| io(&addr, e))?);
            }
            let s = conns.get_mut(&i).expect("inserted above");
            writeln!(s, "{x}").map_err(|e| io(&addr, e))
        });
        self.run_sink(each, end, stop)
    }
}

impl<K: Record + Hash + Eq + Ord, V: Record> Stream<(K, V)> {
    /// Keyed windows: the values of each key in each window combined with `reduce`
    /// (associative); `event_time` gives a value's timestamp in ms (used with
    /// [`Window::event_time`]). Results come as windows fire; with event time, late
    /// records within the allowed lateness re-emit their window (`update`), later ones are
    /// dropped and counted ([`Stream::late_records`]).
    pub fn window(
        &self,
        window: Window,
        event_time: impl Fn(&V) -> u64 + Send + Sync + 'static,
        reduce: impl Fn(V, V) -> V + Send + Sync + 'static,
    ) -> Stream<Windowed<K, V>> {
        let p = self.data.parallelism();
        let event = match window.time {
            crate::window::Time::Event { out_of_orderness, .. } => Some(out_of_orderness),
            crate::window::Time::Processing => None,
        };
        let time: Arc<dyn Fn(&V) -> u64 + Send + Sync> = Arc::new(event_time);
        let stamped = self.data.then("stamp", Edge::direct, move |_| Stamp {
            time: time.clone(),
            event,
            targets: p,
            max_seen: 0,
            last_mark: 0,
            _kv: PhantomData,
        });
        // Windows also run on a timer, to fire processing-time windows.
        let timed = Strategy::on_data().every(TICK);
        let reduce: Arc<dyn Fn(V, V) -> V + Send + Sync> = Arc::new(reduce);
        let late = self.late.clone();
        let windows = stamped.then_with(
            "window",
            move || Edge::partition(move |e| element_partition(e, p as usize)),
            move |_| WindowTask {
                window,
                reduce: reduce.clone(),
                sources: p,
                marks: Default::default(),
                open: Default::default(),
                counts: Default::default(),
                sessions: Default::default(),
                late: late.clone(),
            },
            timed,
        );
        self.wrap(windows)
    }
}

impl Session {
    pub(crate) fn stream_of<T: Record>(&self, name: &str, make: MakePull<T>) -> Stream<T> {
        let p = self.partitions();
        let data = DataSet::new(self, name, move |b, vname| {
            let m = make.clone();
            Ok(b.graph.source(vname, p, move |i| PullSource {
                make: m.clone(),
                index: i,
                parallelism: p,
                pull: None,
            }))
        });
        Stream { data, late: Arc::default() }
    }

    /// A finite stream of `records` (the same vector on every worker), split evenly in
    /// order: a replay, handy for tests and backfills.
    pub fn stream_from_vec<T: Record>(&self, records: Vec<T>) -> Stream<T> {
        Stream { data: self.from_vec(records), late: Arc::default() }
    }

    /// `f(0), f(1), ...` split over the partitions (partition i makes the sequence numbers
    /// congruent to i), at most `rate` records per second per partition if given, until
    /// `limit` records in all if given (else until stopped).
    pub fn stream_generate<T: Record>(
        &self,
        rate: Option<u64>,
        limit: Option<u64>,
        f: impl Fn(u64) -> T + Send + Sync + 'static,
    ) -> Stream<T> {
        let f = Arc::new(f);
        self.stream_of(
            "stream_generate",
            Arc::new(move |i, p| {
                let f = f.clone();
                let start = Instant::now();
                let mut seq = u64::from(i);
                let mut made = 0u64;
                Box::new(move || {
                    if limit.is_some_and(|l| seq >= l) {
                        return Ok(Pulled::End);
                    }
                    if let Some(r) = rate {
                        if start.elapsed() < Duration::from_secs_f64(made as f64 / r as f64) {
                            return Ok(Pulled::Pending); // not due yet
                        }
                    }
                    let x = f(seq);
                    seq += u64::from(p);
                    made += 1;
                    Ok(Pulled::Item(x))
                })
            }),
        )
    }

    /// Lines read from a TCP server at `addr` (partition 0 connects; the stream ends
    /// when the server closes the connection).
    pub fn socket_text(&self, addr: &str) -> Stream<String> {
        let addr = addr.to_string();
        self.stream_of(
            "socket_text",
            Arc::new(move |i, _| {
                let addr = addr.clone();
                let mut conn: Option<(TcpStream, Vec<u8>)> = None;
                Box::new(move || {
                    if i != 0 {
                        return Ok(Pulled::End);
                    }
                    let io =
                        |e: std::io::Error| Error::Io { path: format!("tcp://{addr}"), source: e };
                    if conn.is_none() {
                        let s = TcpStream::connect(&addr).map_err(io)?;
                        s.set_nonblocking(true).map_err(io)?;
                        conn = Some((s, Vec::new()));
                    }
                    let (s, pending) = conn.as_mut().expect("connected above");
                    pull_line(pending, |buf| s.read(buf), &io)
                })
            }),
        )
    }

    /// The lines of a file as it grows (partition 0 follows it from its start, like
    /// `tail -f`, waiting for it to appear), until the run is stopped, or until a line
    /// equal to `end_marker` arrives if one is given (the marker is not emitted).
    pub fn follow_file(&self, path: impl AsRef<Path>, end_marker: Option<&str>) -> Stream<String> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let end_marker = end_marker.map(str::to_string);
        self.stream_of(
            "follow_file",
            Arc::new(move |i, _| {
                let (path, end_marker) = (path.clone(), end_marker.clone());
                let mut file: Option<std::fs::File> = None;
                let mut pending = Vec::new();
                let mut ended = i != 0;
                Box::new(move || {
                    if ended {
                        return Ok(Pulled::End);
                    }
                    let io = |e: std::io::Error| Error::Io {
                        path: path.display().to_string(),
                        source: e,
                    };
                    if file.is_none() {
                        match std::fs::File::open(&path) {
                            Ok(f) => file = Some(f),
                            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                                return Ok(Pulled::Pending)
                            }
                            Err(e) => return Err(io(e)),
                        }
                    }
                    let f = file.as_mut().expect("opened above");
                    match pull_line(&mut pending, |buf| f.read(buf), &io)? {
                        // A file at its current end is not finished: wait for more.
                        Pulled::End => Ok(Pulled::Pending),
                        Pulled::Item(line) if end_marker.as_deref() == Some(line.as_str()) => {
                            ended = true;
                            Ok(Pulled::End)
                        }
                        other => Ok(other),
                    }
                })
            }),
        )
    }
}

/// The next complete line from `pending` and whatever `read` has now: an item, pending
/// (no complete line yet, or the read would block), or the end (the reader is exhausted).
fn pull_line(
    pending: &mut Vec<u8>,
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
    io: &dyn Fn(std::io::Error) -> Error,
) -> Result<Pulled<String>> {
    loop {
        if let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            let text =
                String::from_utf8_lossy(&line[..line.len() - 1]).trim_end_matches('\r').to_string();
            return Ok(Pulled::Item(text));
        }
        let mut buf = [0u8; 64 << 10];
        match read(&mut buf) {
            Ok(0) => {
                if pending.is_empty() {
                    return Ok(Pulled::End);
                }
                // A last line without a newline.
                let text = String::from_utf8_lossy(pending).trim_end_matches('\r').to_string();
                pending.clear();
                return Ok(Pulled::Item(text));
            }
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(Pulled::Pending),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}
