//! Where streams come from: a replayed vector, a generator, the files of a directory, a
//! growing file, a TCP socket (Redis Streams: `redis_io`). All but the socket replay: a
//! checkpoint keeps each partition's position.

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heddle_task::Record;

use crate::dataset::DataSet;
use crate::pull::{MakePull, PullSource, Pulled};
use crate::pullers::{pull_line, Follow, Generate, Pace, TextFiles};
use crate::session::Session;
use crate::stream::Stream;
use crate::{Error, Result};

impl Session {
    pub(crate) fn stream_of<T: Record>(&self, name: &'static str, make: MakePull<T>) -> Stream<T> {
        let p = self.partitions();
        let warned: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let data = DataSet::new(self, name, move |b, vname| {
            let (m, warned) = (make.clone(), Arc::clone(&warned));
            Ok(b.graph.source(vname, p, move |i| PullSource {
                name,
                make: m.clone(),
                index: i,
                parallelism: p,
                pull: None,
                ended: false,
                warned: warned.clone(),
            }))
        });
        Stream { data, late: Arc::default() }
    }

    /// A finite stream of `records` (the same vector on every worker), split evenly in
    /// order: a replay, handy for tests and backfills.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let replay = s.stream_from_vec(vec!['x', 'y', 'z']);
    /// replay.run(move |_, c| Ok(tx.send(c).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<String>(), "xyz");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_from_vec<T: Record>(&self, records: Vec<T>) -> Stream<T> {
        Stream { data: self.from_vec(records), late: Arc::default() }
    }

    /// `f(0), f(1), ...` split over the partitions (partition i makes the sequence numbers
    /// congruent to i), at most `rate` records per second per partition if given, until
    /// `limit` records in all if given (else until stopped).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let squares = s.stream_generate(Some(10_000), Some(4), |i| i * i); // 4 records, paced
    /// squares.run(move |_, x| Ok(tx.send(x).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec![0, 1, 4, 9]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn stream_generate<T: Record>(
        &self,
        rate: Option<u64>,
        limit: Option<u64>,
        f: impl Fn(u64) -> T + Send + Sync + 'static,
    ) -> Stream<T> {
        let f: Arc<dyn Fn(u64) -> T + Send + Sync> = Arc::new(f);
        self.stream_of(
            "stream_generate",
            Arc::new(move |i, p| {
                Box::new(Generate {
                    f: f.clone(),
                    seq: u64::from(i),
                    step: u64::from(p),
                    limit,
                    pace: Pace::new(rate.map(|r| r as f64)),
                })
            }),
        )
    }

    /// Lines read from a TCP server at `addr` (partition 0 connects; the stream ends
    /// when the server closes the connection).
    ///
    /// ```
    /// use std::io::Write;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let server = std::net::TcpListener::bind("127.0.0.1:0")?;
    /// let addr = server.local_addr()?.to_string();
    /// std::thread::spawn(move || server.accept()?.0.write_all(b"hello\nworld\n"));
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// s.socket_text(&addr).run(move |_, l| Ok(tx.send(l).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["hello", "world"]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
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
                    Ok(match pull_line(pending, |buf| s.read(buf), &io, true)? {
                        Pulled::Item((line, _)) => Pulled::Item(line),
                        Pulled::Pending => Pulled::Pending,
                        Pulled::Later(at) => Pulled::Later(at),
                        Pulled::End => Pulled::End,
                    })
                })
            }),
        )
    }

    /// The lines of a file as it grows (partition 0 follows it from its start, like
    /// `tail -f`, waiting for it to appear), until the run is stopped, or until a line
    /// equal to `end_marker` arrives if one is given (the marker is not emitted).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-follow-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("log.txt"), "a\nb\nEND\nnever read\n")?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let lines = s.follow_file(dir.join("log.txt"), Some("END"));
    /// lines.run(move |_, l| Ok(tx.send(l).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["a", "b"]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn follow_file(&self, path: impl AsRef<Path>, end_marker: Option<&str>) -> Stream<String> {
        let path: PathBuf = path.as_ref().to_path_buf();
        let end_marker = end_marker.map(str::to_string);
        self.stream_of(
            "follow_file",
            Arc::new(move |i, _| {
                Box::new(Follow {
                    path: path.clone(),
                    end_marker: end_marker.clone(),
                    file: None,
                    pending: Vec::new(),
                    offset: 0,
                    ended: i != 0,
                })
            }),
        )
    }

    /// The lines of every file of `path` (a file, a directory's files but hidden ones, or
    /// a glob: as [`Session::text_file`]), as a stream that ends after the last line:
    /// partition `i` of `p` reads files `i`, `i + p`, ... in name order, at most `rate`
    /// lines per second over all partitions if given. With checkpoints it replays from
    /// the byte offset of each partition's last checkpoint.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-stext-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.txt"), "1 x\r\n2 y")?; // CRLF, no final newline
    /// std::fs::write(dir.join("b.txt"), "3 x\n")?;
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// s.stream_text(&dir, None)?.run(move |_, l| Ok(tx.send(l).expect("receiver open")), None)?;
    /// assert_eq!(rx.try_iter().collect::<Vec<_>>(), vec!["1 x", "2 y", "3 x"]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `path` names no readable file; [`Error::Io`] for
    /// a directory that cannot be listed.
    pub fn stream_text(&self, path: impl AsRef<Path>, rate: Option<f64>) -> Result<Stream<String>> {
        let files: Vec<PathBuf> =
            crate::list_files(path.as_ref())?.into_iter().map(|(f, _)| f).collect();
        let per_partition = rate.map(|r| r / f64::from(self.partitions().max(1)));
        Ok(self.stream_of(
            "stream_text",
            Arc::new(move |i, p| {
                let mine = files.iter().skip(i as usize).step_by(p.max(1) as usize).cloned();
                Box::new(TextFiles {
                    files: mine.collect(),
                    file: 0,
                    offset: 0,
                    reader: None,
                    line: Vec::new(),
                    pace: Pace::new(per_partition),
                })
            }),
        ))
    }
}
