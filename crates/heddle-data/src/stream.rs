//! `Stream<T>`: an unbounded data set. Records flow as they come (streaming dataflow
//! operations); record-wise steps are those of [`DataSet`]; keyed windows aggregate them;
//! sinks consume them. [`Stream::run`] runs until every source ends or a stop handle is
//! stopped.

use std::hash::Hash;
use std::io::Write;
use std::marker::PhantomData;
use std::net::TcpStream;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use heddle_task::{Compute, Edge, Plan, Record, RoundRobin, StopHandle, Strategy};

use crate::dataset::DataSet;
use crate::session::Build;
use crate::tasks::SinkTask;
use crate::window::{Window, WindowTask, Windowed};
use crate::window_stamp::{element_partition, Stamp};
use crate::Locked;
use crate::{Error, Result};

/// How often a window checks the clock (processing time).
const TICK: Duration = Duration::from_millis(1);

/// An unbounded, lazily described stream of `T`.
pub struct Stream<T> {
    pub(crate) data: DataSet<T>,
    pub(crate) late: Arc<AtomicU64>,
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
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let events = s.stream_from_vec(vec![1u32, 2]);
    /// assert_eq!(events.session().rank(), 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn session(&self) -> &crate::Session {
        self.data.session()
    }

    /// Each record through `f`.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let tens = s.stream_from_vec(vec![1u32, 2, 3]).map(|x| x * 10);
    /// tens.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![10, 20, 30]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn map<U: Record>(&self, f: impl Fn(T) -> U + Send + Sync + 'static) -> Stream<U> {
        self.wrap(self.data.map(f))
    }

    /// The same records, the stage that makes them declaring what each of its partitions
    /// asks for ([`DataSet::resources`]).
    pub fn resources(&self, resources: heddle_task::Resources) -> Stream<T> {
        Stream { data: self.data.resources(resources), late: self.late.clone() }
    }

    /// Each record to any number of records.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lines = s.stream_from_vec(vec!["a b".to_string(), "c".to_string()]);
    /// let words = lines.flat_map(|l| l.split(' ').map(String::from).collect::<Vec<_>>());
    /// words.run(move |_, w| Ok(tx.send(w).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["a", "b", "c"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn flat_map<U: Record, I: IntoIterator<Item = U>>(
        &self,
        f: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> Stream<U> {
        self.wrap(self.data.flat_map(f))
    }

    /// The records for which `keep` holds.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let odd = s.stream_generate(None, Some(6), |i| i).filter(|x| x % 2 == 1);
    /// odd.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![1, 3, 5]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn filter(&self, keep: impl Fn(&T) -> bool + Send + Sync + 'static) -> Stream<T> {
        self.wrap(self.data.filter(keep))
    }

    /// `(f(record), record)` for each record.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let keyed = s.stream_from_vec(vec![12u32, 7]).key_by(|x| x % 2 == 0);
    /// keyed.run(move |_, kx| Ok(tx.send(kx).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![(true, 12), (false, 7)]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn key_by<K: Record>(&self, f: impl Fn(&T) -> K + Send + Sync + 'static) -> Stream<(K, T)> {
        self.wrap(self.data.key_by(f))
    }

    /// The records of both streams.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let both = s.stream_from_vec(vec![1u32, 2]).union(&s.stream_from_vec(vec![8, 9]));
    /// both.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// let mut all: Vec<u32> = rx.try_iter().collect();
    /// all.sort();
    /// assert_eq!(all, vec![1, 2, 8, 9]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn union(&self, other: &Stream<T>) -> Stream<T> {
        self.wrap(self.data.union(&other.data))
    }

    /// Records dropped because they came later than their window's allowed lateness, on
    /// this worker so far.
    ///
    /// ```
    /// use heddle_data::Window;
    /// use std::time::Duration;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// // (key, event time in ms): 3 arrives after 100 closed its window [0, 10)
    /// let events = s.stream_from_vec(vec![('k', 5u64), ('k', 100), ('k', 3)]);
    /// let ten_ms = Window::tumbling(Duration::from_millis(10));
    /// let w = ten_ms.event_time(Duration::ZERO, Duration::ZERO); // no lateness allowed
    /// let windows = events.window(w, |t| *t, |a, b| a.max(b));
    /// windows.run(|_, _| Ok(()), None)?;
    /// assert_eq!(windows.late_records(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
        self.run_into(move |_| SinkTask { each: each.clone(), end: end.clone() }, stop)
    }

    /// Runs the stream into sink tasks `sink` makes (collective), with the session's
    /// checkpoints if it takes them.
    pub(crate) fn run_into<C: Compute<In = T, Out = ()>>(
        &self,
        sink: impl Fn(u32) -> C + Send + Sync + 'static,
        stop: Option<StopHandle>,
    ) -> Result<()> {
        let session = &self.data.session;
        let mut b = Build::default();
        let v = self.data.vertex(&mut b)?;
        let sink = b.graph.compute("sink", self.data.parallelism(), sink);
        b.graph.connect(&v, &sink, Edge::direct());
        let plan = Plan::new(&b.graph, &session.0.workers, &RoundRobin)?;
        let mut job = session.job(&b, &plan, session.0.stream_opts.clone())?;
        if let Some(stop) = stop {
            job = job.stop_with(stop);
        }
        if let Some(c) = &session.0.checkpoints {
            let n = session.0.checkpointed_runs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut c = c.clone();
            if n > 0 {
                c.dir = c.dir.join(format!("stream-{}", n + 1));
            }
            job = job.checkpoint(c);
        }
        job.run()?;
        Ok(())
    }

    /// Calls `f(partition, record)` for each record as it arrives, until every source
    /// ends or `stop` is stopped.
    ///
    /// ```
    /// use std::sync::{atomic::AtomicU64, atomic::Ordering::Relaxed, Arc};
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (stop, seen) = (heddle_task::StopHandle::default(), Arc::new(AtomicU64::new(0)));
    /// let (st, n) = (stop.clone(), seen.clone());
    /// let each = move |_, _| {
    ///     if n.fetch_add(1, Relaxed) == 99 {
    ///         st.stop(); // after 100 records
    ///     }
    ///     Ok(())
    /// };
    /// s.stream_generate(None, None, |i| i).run(each, Some(stop))?; // endless until stopped
    /// assert!(seen.load(Relaxed) >= 100);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    /// ```
    /// use std::io::BufRead;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let server = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = server.local_addr()?.to_string();
    /// let reader = std::thread::spawn(move || {
    ///     let (conn, _) = server.accept().expect("a connection");
    ///     std::io::BufReader::new(conn).lines().collect::<Result<Vec<_>, _>>().expect("lines")
    /// });
    /// s.stream_from_vec(vec![1u32, 2]).write_socket(&addr, None)?;
    /// assert_eq!(reader.join().expect("the reader"), vec!["1", "2"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
    ///
    /// ```
    /// use heddle_data::Window;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let pairs = s.stream_from_vec(vec![('a', 1), ('a', 2), ('b', 5), ('a', 3), ('a', 4)]);
    /// // Every 2 values of a key, summed (count windows need no timestamps).
    /// let sums = pairs.window(Window::tumbling_count(2), |_| 0, |x, y| x + y);
    /// sums.run(move |_, w| Ok(tx.send((w.key, w.value)).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![('a', 3), ('a', 7)]); // 'b': one value
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
        // Processing-time windows also run on a timer, to fire when the clock says; event
        // time moves only with the data (its watermarks), so those wait without waking.
        let timed = match event {
            None => Strategy::on_data().every(TICK),
            Some(_) => Strategy::on_data(),
        };
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
