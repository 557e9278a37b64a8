//! Where streams come from: a replayed vector, a generator, a TCP socket, a growing file
//! (Redis Streams: `redis_io`).

use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use heddle_task::Record;

use crate::dataset::DataSet;
use crate::session::Session;
use crate::stream::Stream;
use crate::tasks::{MakePull, PullSource, Pulled};
use crate::{Error, Result};

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
                    pull_line(pending, |buf| s.read(buf), &io)
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
