//! Partitioned writes: one part file per partition (`part-00000`, ...) in a directory,
//! written where the partition is, and committed only when every part is written
//! ([`crate::output`]).

use std::collections::HashMap;
use std::fmt::Display;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::sync::{Arc, Mutex};

use heddle_task::{Edge, Record};
use serde::Serialize;

use crate::Locked;
use crate::dataset::DataSet;
use crate::output::{Commit, Output};
use crate::tasks::SinkTask;
use crate::error::io;
use crate::Result;


type Writer = BufWriter<File>;

impl<T: Record> DataSet<T> {
    /// Writes partition i with `write(out, record)` into `part-{i:05}` of `out`.
    fn write_parts(&self, out: Output, write: impl Fn(&mut Writer, T) -> std::io::Result<()> + Send + Sync + 'static) -> Result<()> {
        let comm = self.session.comm();
        let commit = Arc::new(Commit::begin(comm, &out)?);
        let open: Arc<Mutex<HashMap<u32, Writer>>> = Arc::default();
        let written: Arc<Mutex<Vec<u32>>> = Arc::default();
        let c = commit.clone();
        let path_of = Arc::new(move |i: u32| c.temp_path(i, ""));
        let get = {
            let (open, path_of) = (open.clone(), path_of.clone());
            move |i: u32, f: &mut dyn FnMut(&mut Writer) -> std::io::Result<()>| -> Result<()> {
                let path = path_of(i);
                let mut open = open.locked();
                let out = match open.entry(i) {
                    std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                    std::collections::hash_map::Entry::Vacant(v) => v.insert(BufWriter::new(crate::output::create_part(&path)?)),
                };
                f(out).map_err(|e| io(&path, e))
            }
        };
        let get = Arc::new(get);
        let g = get.clone();
        let each: Arc<dyn Fn(u32, T) -> Result<()> + Send + Sync> = Arc::new(move |i, x| {
            let mut x = Some(x);
            g(i, &mut |out| write(out, x.take().expect("written once")))
        });
        let done = written.clone();
        let end: Arc<dyn Fn(u32) -> Result<()> + Send + Sync> = Arc::new(move |i| {
            get(i, &mut |out| out.flush())?;
            open.locked().remove(&i);
            done.locked().push(i);
            Ok(())
        });
        let ran = self.run_into(Edge::direct(), self.parallelism(), move |_| SinkTask { each: each.clone(), end: end.clone() });
        let mine = ran.map(|()| std::mem::take(&mut *written.locked()));
        // Every part is closed and moved into place on every worker before any worker goes
        // on (and, say, lists the directory).
        commit.finish(comm, mine, "")
    }

    /// Writes each record's `Display` as a line, one part file per partition, into a
    /// directory (a path, or an [`Output`] with a [`crate::WriteMode`]); the parts appear,
    /// followed by `_SUCCESS`, only once every worker has written its own.
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
