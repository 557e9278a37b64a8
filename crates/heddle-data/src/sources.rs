//! Where data sets come from: number ranges, collections, seeded generators, and files
//! (text lines, CSV, JSON lines) split across partitions by byte ranges.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use heddle_task::{Record, Vertex};
use serde::de::DeserializeOwned;

use crate::dataset::DataSet;
use crate::error::io;
use crate::input_files::{planned_files, Planned};
use crate::lines::{open, Lines, Position};
use crate::session::Session;
use crate::tasks::{IterSource, MakeIter, PartitionBytes};
use crate::text_blocks::MAX_LINE_BYTES;
use crate::Locked;
use crate::{Error, Result};

/// A data set whose partition `i` of `p` is what `make(i, p)` yields.
pub(crate) fn from_iter_fn<T: Record>(
    session: &Session,
    name: &str,
    make: MakeIter<T>,
) -> DataSet<T> {
    from_files_iter_fn(session, name, make, None)
}

/// As [`from_iter_fn`], for a source whose partition `i` of `p` reads `bytes(i, p)` bytes
/// of files (its progress counts them).
pub(crate) fn from_files_iter_fn<T: Record>(
    session: &Session,
    name: &str,
    make: MakeIter<T>,
    bytes: Option<PartitionBytes>,
) -> DataSet<T> {
    let p = session.partitions();
    DataSet::new(session, name, move |b, vname| {
        let (m, bytes) = (make.clone(), bytes.clone());
        let v: Vertex<(), T> = b.graph.source(vname, p, move |i| IterSource {
            emitted: 0,
            make: m.clone(),
            bytes: bytes.clone(),
            index: i,
            parallelism: p,
            iter: None,
        });
        Ok(v)
    })
}

/// The bytes partition `i` of `p` of `files` reads (a share of their total).
pub(crate) fn file_shares(files: &[Planned]) -> PartitionBytes {
    let total: u64 = files.iter().map(|f| f.len).sum();
    Arc::new(move |i, p| {
        let r = share(total, i, p);
        r.end - r.start
    })
}

/// A data set whose partition `i` of `p` holds `make(i, p)`.
pub(crate) fn from_partitions<T: Record>(
    session: &Session,
    name: &str,
    make: impl Fn(u32, u32) -> Vec<T> + Send + Sync + 'static,
) -> DataSet<T> {
    from_iter_fn(session, name, Arc::new(move |i, p| Box::new(make(i, p).into_iter().map(Ok))))
}

pub(crate) fn share(n: u64, i: u32, p: u32) -> std::ops::Range<u64> {
    n * u64::from(i) / u64::from(p)..n * (u64::from(i) + 1) / u64::from(p)
}

/// How to treat a malformed row of a CSV or JSON-lines file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnMalformed {
    /// Fail with an error naming the file and line (the default).
    #[default]
    Fail,
    /// Skip it and count it ([`Session::skipped_rows`]).
    Skip,
}

impl Session {
    /// The numbers `start..end`, split evenly.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// assert_eq!(s.range(3, 7).collect()?, Some(vec![3, 4, 5, 6]));
    /// assert_eq!(s.range(7, 3).count()?, 0); // empty
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn range(&self, start: u64, end: u64) -> DataSet<u64> {
        let n = end.saturating_sub(start);
        from_iter_fn(
            self,
            "range",
            Arc::new(move |i, p| Box::new(share(n, i, p).map(move |x| Ok(start + x)))),
        )
    }

    /// The records of `records` (the same vector on every worker), split evenly in order.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let s = s.with_partitions(2)?;
    /// let pairs = s.from_vec(vec![("one".to_string(), 1), ("two".to_string(), 2)]);
    /// assert_eq!(pairs.map(|(_, n)| n).collect()?, Some(vec![1, 2]));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_vec<T: Record>(&self, records: Vec<T>) -> DataSet<T> {
        // Behind a lock only because records need not be `Sync`.
        let records = Arc::new(Mutex::new(records));
        from_partitions(self, "from_vec", move |i, p| {
            let records = records.locked();
            let r = share(records.len() as u64, i, p);
            records[r.start as usize..r.end as usize].to_vec()
        })
    }

    /// `f(0) .. f(n - 1)`, each partition making its own share (seeded generators).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let tens = s.generate(4, |i| format!("item {}", i * 10));
    /// assert_eq!(tens.collect()?.unwrap()[3], "item 30");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn generate<T: Record>(
        &self,
        n: u64,
        f: impl Fn(u64) -> T + Send + Sync + 'static,
    ) -> DataSet<T> {
        let f = Arc::new(f);
        from_iter_fn(
            self,
            "generate",
            Arc::new(move |i, p| {
                let f = f.clone();
                Box::new(share(n, i, p).map(move |x| Ok(f(x))))
            }),
        )
    }

    /// The lines of a text file, of every file in a directory, or of the files a glob
    /// (`*` and `?` in the last path component) names; split by byte ranges (a line
    /// belongs to the range its first byte lies in). Lines must be UTF-8.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-text-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.txt"), "one\ntwo\n")?;
    /// std::fs::write(dir.join("b.txt"), "three\n")?;
    /// let lines = s.text_file(&dir)?.collect()?; // every file of the directory, by name
    /// assert_eq!(lines, Some(vec!["one".into(), "two".into(), "three".into()]));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A path that names no readable file.
    pub fn text_file(&self, path: impl AsRef<Path>) -> Result<DataSet<String>> {
        let files = Arc::new(planned_files(path.as_ref())?);
        let bytes = Some(file_shares(&files));
        Ok(from_files_iter_fn(
            self,
            "text_file",
            Arc::new(move |i, p| Box::new(Lines::new(files.clone(), i, p))),
            bytes,
        ))
    }

    /// Rows of CSV files (as [`Session::text_file`] finds them) deserialized into `T`
    /// (by header names when `headers`, else by position); blank lines are skipped.
    /// Quoted fields must not span lines. Every row must have as many fields as the header
    /// (or, without one, as the first file's first line): a row with too few or too many is
    /// malformed — with [`OnMalformed::Fail`] an [`Error::Parse`] naming its file and line
    /// and both counts, with [`OnMalformed::Skip`] skipped and counted
    /// ([`Session::skipped_rows`]).
    ///
    /// ```
    /// use heddle_data::OnMalformed;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-read-csv-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("people.csv"), "id,name\n1,ann\nx,bad\n2,bob\n")?;
    /// let rows = s.read_csv::<(u32, String)>(&dir, true, OnMalformed::Skip)?.collect()?;
    /// assert_eq!(rows, Some(vec![(1, "ann".into()), (2, "bob".into())]));
    /// assert_eq!(s.skipped_rows()?, 1); // "x,bad"
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Session::text_file`]; a file whose header cannot be read.
    pub fn read_csv<T: Record + DeserializeOwned>(
        &self,
        path: impl AsRef<Path>,
        headers: bool,
        on_malformed: OnMalformed,
    ) -> Result<DataSet<T>> {
        let files = Arc::new(planned_files(path.as_ref())?);
        let bytes = Some(file_shares(&files));
        // The first line of the first file: the header, or the row that sets the width.
        let first = match files.first() {
            Some(Planned { path: f, .. }) => Some((f.display().to_string(), first_record(f)?)),
            None => None,
        };
        let width = first.as_ref().map(|(f, r)| {
            (r.len(), if headers { format!("the header of {f}") } else { format!("line 1 of {f}") })
        });
        let header = Arc::new(if headers { first.map(|(_, r)| r) } else { None });
        let skipped = self.0.skipped.clone();
        Ok(from_files_iter_fn(
            self,
            "read_csv",
            Arc::new(move |i, p| {
                let (header, width) = (header.clone(), width.clone());
                let skipped = skipped.clone();
                let rows = Lines::new(files.clone(), i, p).into_numbered().filter_map(move |r| {
                    let (line, at) = match r {
                        Ok(x) => x,
                        Err(e) => return Some(Err(e)),
                    };
                    if header.is_some() && at.line == Some(1) {
                        return None; // each file's header
                    }
                    if line.trim_end_matches('\r').is_empty() {
                        return None; // blank lines separate nothing (as Spark and pandas read them)
                    }
                    let parsed = csv_record(&line).and_then(|rec| match &width {
                        Some((n, from)) if rec.len() != *n => {
                            Err(format!("expected {n} fields (as {from} has), found {}", rec.len()))
                        }
                        _ => rec
                            .deserialize::<T>(header.as_ref().as_ref())
                            .map_err(|e| e.to_string()),
                    });
                    malformed(parsed, &at, on_malformed, &skipped)
                });
                Box::new(rows)
            }),
            bytes,
        ))
    }

    /// The header [`Session::read_csv`] reads when `headers` is set: the fields of the
    /// first line of the first file `path` names (as [`Session::text_file`] finds them),
    /// parsed as the rows are — for a caller that keys rows by name itself.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-csv-head-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("a.csv"), "id,\"full, name\"\n1,ann\n")?;
    /// assert_eq!(s.csv_header(&dir)?, ["id", "full, name"]);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Session::text_file`]; a first line that is not UTF-8, not CSV or longer than
    /// [`MAX_LINE_BYTES`] ([`Error::Parse`] at line 1).
    pub fn csv_header(&self, path: impl AsRef<Path>) -> Result<Vec<String>> {
        let files = planned_files(path.as_ref())?;
        Ok(match files.first() {
            Some(Planned { path: f, .. }) => first_record(f)?.iter().map(str::to_owned).collect(),
            None => Vec::new(),
        })
    }

    /// Records of JSON-lines files (one JSON value per line; blank lines ignored).
    ///
    /// ```
    /// use heddle_data::OnMalformed;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-jsonl-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("in.jsonl"), "[1, \"a\"]\n\n[2, \"b\"]\n")?;
    /// let rows = s.read_json_lines::<(u32, String)>(&dir, OnMalformed::Fail)?.collect()?;
    /// assert_eq!(rows, Some(vec![(1, "a".into()), (2, "b".into())]));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Session::text_file`].
    pub fn read_json_lines<T: Record + DeserializeOwned>(
        &self,
        path: impl AsRef<Path>,
        on_malformed: OnMalformed,
    ) -> Result<DataSet<T>> {
        let files = Arc::new(planned_files(path.as_ref())?);
        let bytes = Some(file_shares(&files));
        let skipped = self.0.skipped.clone();
        Ok(from_files_iter_fn(
            self,
            "read_json_lines",
            Arc::new(move |i, p| {
                let skipped = skipped.clone();
                let rows = Lines::new(files.clone(), i, p).into_numbered().filter_map(move |r| {
                    let (line, at) = match r {
                        Ok(x) => x,
                        Err(e) => return Some(Err(e)),
                    };
                    if line.trim().is_empty() {
                        return None;
                    }
                    malformed(
                        serde_json::from_str::<T>(&line).map_err(|e| e.to_string()),
                        &at,
                        on_malformed,
                        &skipped,
                    )
                });
                Box::new(rows)
            }),
            bytes,
        ))
    }
}

/// The first line of `f` as a CSV record (the header, or the row that sets the width).
fn first_record(f: &Path) -> Result<csv::StringRecord> {
    // At most the line limit (and its newline), as the rows are read.
    let at_line_1 =
        |message: String| Error::Parse { path: f.display().to_string(), line: 1, message };
    let mut first = Vec::new();
    let n = BufReader::new(open(f)?)
        .take(MAX_LINE_BYTES + 1)
        .read_until(b'\n', &mut first)
        .map_err(|e| io(f, e))?;
    if n as u64 > MAX_LINE_BYTES && first.last() != Some(&b'\n') {
        return Err(at_line_1(format!(
            "the line is longer than the {MAX_LINE_BYTES}-byte line limit; split it into lines"
        )));
    }
    let first = String::from_utf8(first).map_err(|_| at_line_1("not UTF-8 text".into()))?;
    csv_record(first.trim_end_matches(['\n', '\r'])).map_err(at_line_1)
}

fn csv_record(line: &str) -> std::result::Result<csv::StringRecord, String> {
    let mut r = csv::ReaderBuilder::new().has_headers(false).from_reader(line.as_bytes());
    let mut rec = csv::StringRecord::new();
    match r.read_record(&mut rec) {
        Ok(true) => Ok(rec),
        Ok(false) => Ok(csv::StringRecord::new()),
        Err(e) => Err(e.to_string()),
    }
}

/// A row's fate: kept, skipped and counted, or an error naming its file and line.
fn malformed<T>(
    parsed: std::result::Result<T, String>,
    at: &Position,
    on: OnMalformed,
    skipped: &Arc<AtomicU64>,
) -> Option<Result<T>> {
    match parsed {
        Ok(x) => Some(Ok(x)),
        Err(_) if on == OnMalformed::Skip => {
            skipped.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            None
        }
        Err(message) => Some(Err(Error::Parse {
            path: at.file.display().to_string(),
            line: at.line_number(),
            message,
        })),
    }
}
