//! Partitioned writes: one part file per partition (`part-00000`, ...) in a directory,
//! written where the partition is, and committed only when every part is written
//! ([`crate::output`]).

use std::collections::HashMap;
use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use heddle_task::{Edge, Record, StopHandle};
use serde::Serialize;

use crate::dataset::DataSet;
use crate::error::io;
use crate::output::{Commit, Output};
use crate::stream::Stream;
use crate::tasks::SinkTask;
use crate::txn_sink::{TxnSink, WriteFn};
use crate::Locked;
use crate::Result;

/// A part file being written.
pub type PartWriter = BufWriter<File>;

/// Each worker's open part files of one write: the `each` and `end` of its sink tasks.
struct Parts {
    commit: Arc<Commit>,
    open: Mutex<HashMap<u32, PartWriter>>,
    written: Mutex<Vec<u32>>,
}

impl Parts {
    fn new(commit: Arc<Commit>) -> Arc<Parts> {
        Arc::new(Parts { commit, open: Mutex::default(), written: Mutex::default() })
    }

    /// Runs `f` on partition `i`'s part, creating it first if needed.
    fn with(
        &self,
        i: u32,
        f: &mut dyn FnMut(&mut PartWriter) -> std::io::Result<()>,
    ) -> Result<()> {
        // The path is made only to create the part or to name it in an error, not per record.
        let path = || self.commit.temp_path(i, "");
        let mut open = self.open.locked();
        let out = match open.entry(i) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                v.insert(BufWriter::new(crate::output::create_part(&path())?))
            }
        };
        f(out).map_err(|e| io(&path(), e))
    }

    /// The sink's `each` (write a record) and `end` (close a partition's part, even an
    /// empty one).
    #[allow(clippy::type_complexity)]
    fn sink<T: 'static>(
        self: &Arc<Parts>,
        write: impl Fn(&mut PartWriter, T) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> (
        Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync>,
        Arc<dyn Fn(u32) -> Result<()> + Send + Sync>,
    ) {
        let parts = self.clone();
        let each = Arc::new(move |i, x| {
            let mut x = Some(x);
            parts.with(i, &mut |out| write(out, x.take().expect("written once")))
        });
        let parts = self.clone();
        let end = Arc::new(move |i| {
            parts.with(i, &mut |out| out.flush())?;
            parts.open.locked().remove(&i);
            parts.written.locked().push(i);
            Ok(())
        });
        (each, end)
    }

    /// Commits (collective) once this worker's run ended with `ran`.
    fn finish(&self, comm: &heddle_comm::Communicator, ran: Result<()>) -> Result<()> {
        self.open.locked().clear();
        let mine = ran.map(|()| std::mem::take(&mut *self.written.locked()));
        // Every part is closed and moved into place on every worker before any worker goes
        // on (and, say, lists the directory).
        self.commit.finish(comm, mine, "")
    }
}

impl<T: Record> DataSet<T> {
    /// Writes partition i with `write(out, record)` into `part-{i:05}` of `out`.
    pub(crate) fn write_parts(
        &self,
        out: Output,
        write: impl Fn(&mut PartWriter, T) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        let comm = self.session.comm();
        let parts = Parts::new(Arc::new(Commit::begin(comm, &out)?));
        let (each, end) = parts.sink(write);
        let ran = self.run_into(Edge::direct(), self.parallelism(), move |_| SinkTask {
            each: each.clone(),
            end: end.clone(),
        });
        parts.finish(comm, ran)
    }

    /// Writes each record's `Display` as a line, one part file per partition, into a
    /// directory (a path, or an [`Output`] with a [`crate::WriteMode`]); the parts appear,
    /// followed by `_SUCCESS`, only once every worker has written its own.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-wtext-{}", std::process::id()));
    /// s.range(0, 3).map(|x| format!("line {x}")).write_text(&dir)?;
    /// assert_eq!(std::fs::read_to_string(dir.join("part-00000"))?, "line 0\nline 1\nline 2\n");
    /// assert!(dir.join("_SUCCESS").exists());
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A directory that already holds files (unless the mode says overwrite or append); a
    /// file that cannot be written; or as any action.
    pub fn write_text(&self, out: impl Into<Output>) -> Result<()>
    where
        T: Display,
    {
        self.write_parts(out.into(), |out, x| writeln!(out, "{x}"))
    }

    /// Writes each record as one line of JSON.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-wjson-{}", std::process::id()));
    /// s.from_vec(vec![(1u32, "a".to_string()), (2, "b".to_string())]).write_json_lines(&dir)?;
    /// assert_eq!(std::fs::read_to_string(dir.join("part-00000"))?, "[1,\"a\"]\n[2,\"b\"]\n");
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::write_text`].
    pub fn write_json_lines(&self, out: impl Into<Output>) -> Result<()> {
        self.write_parts(out.into(), |out, x| {
            serde_json::to_writer(&mut *out, &x).map_err(std::io::Error::other)?;
            out.write_all(b"\n")
        })
    }

    /// Writes each record as a CSV row (no header).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-wcsv-{}", std::process::id()));
    /// s.from_vec(vec![(1u32, "a b".to_string()), (2, "c,d".to_string())]).write_csv(&dir)?;
    /// assert_eq!(std::fs::read_to_string(dir.join("part-00000"))?, "1,a b\n2,\"c,d\"\n");
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`DataSet::write_text`].
    pub fn write_csv(&self, out: impl Into<Output>) -> Result<()>
    where
        T: Serialize,
    {
        self.write_parts(out.into(), |out, x| {
            let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
            w.serialize(&x).map_err(std::io::Error::other)?;
            out.write_all(&w.into_inner().map_err(|e| std::io::Error::other(e.to_string()))?)
        })
    }
}

impl<T: Record> Stream<T> {
    /// Writes partition i of the stream with `write(out, record)` into `part-{i:05}` of
    /// `out` until every source ends or `stop` is stopped; the parts appear, followed by
    /// `_SUCCESS`, only then (as a file sink commits its in-progress files). A run that
    /// fails leaves the directory as it was.
    ///
    /// ```
    /// use std::io::Write;
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-wparts-{}", std::process::id()));
    /// let events = s.stream_from_vec(vec![1u32, 2]);
    /// events.write_parts(&dir, None, |out, x| writeln!(out, "event={x}"))?;
    /// assert_eq!(std::fs::read_to_string(dir.join("part-00000"))?, "event=1\nevent=2\n");
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A directory that already holds files (unless the mode says overwrite or append); a
    /// file that cannot be written; or as [`Stream::run`].
    pub fn write_parts(
        &self,
        out: impl Into<Output>,
        stop: Option<StopHandle>,
        write: impl Fn(&mut PartWriter, T) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> Result<()> {
        let comm = self.data.session.comm();
        let out = out.into();
        if self.data.session.0.checkpoints.is_some() {
            // Checkpointed: a two-phase sink, committing at each checkpoint.
            let dir = out.dir().to_path_buf();
            crate::txn_sink::prepare_output(&dir)?;
            comm.barrier()?;
            let write: WriteFn<T> = Arc::new(write);
            let (attempt, veto) = (comm.attempt(), out.veto.clone());
            return self
                .run_into(move |_| TxnSink::new(&dir, write.clone(), attempt, veto.clone()), stop);
        }
        let parts = Parts::new(Arc::new(Commit::begin(comm, &out)?));
        let (each, end) = parts.sink(write);
        let ran = self.run_sink(each, end, stop);
        parts.finish(comm, ran)
    }

    /// Writes each record's `Display` as a line, one part file per partition, as
    /// [`Stream::write_parts`] does.
    ///
    /// ```
    /// use heddle_data::{Output, Session, WriteMode};
    /// let s = Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-stream-{}", std::process::id()));
    /// s.stream_from_vec((0..5).collect::<Vec<u32>>()).write_lines(&dir, None)?;
    /// assert!(dir.join("_SUCCESS").exists());
    /// assert!(s.stream_from_vec(vec![1u32]).write_lines(&dir, None).is_err()); // not empty
    /// let overwrite = Output::new(&dir).mode(WriteMode::Overwrite);
    /// s.stream_from_vec(vec![7u32]).write_lines(overwrite, None)?;
    /// assert_eq!(std::fs::read_to_string(dir.join("part-00000"))?, "7\n");
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`Stream::write_parts`].
    pub fn write_lines(&self, out: impl Into<Output>, stop: Option<StopHandle>) -> Result<()>
    where
        T: Display,
    {
        self.write_parts(out, stop, |out, x| writeln!(out, "{x}"))
    }
}
