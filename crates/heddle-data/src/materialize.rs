//! Materialized stages: a data set computed once and written to a directory, so that a
//! multi-stage job restarted after a failure (`heddle run --restarts N`) reads the stages
//! it had finished instead of computing them again (Spark's reliable `checkpoint()`).
//!
//! The directory holds one part file per partition (each record: its length as 4 bytes
//! little-endian, then its bincode), `_SUCCESS` once every part is in place, and
//! `_STAGE`, written last by rank 0: the record type and the number of parts. A directory
//! with both is complete and is read back; anything else is computed and written again.

use std::fs::File;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use heddle_task::Record;
use serde::{Deserialize, Serialize};

use crate::dataset::DataSet;
use crate::error::io;
use crate::output::{Output, WriteMode, SUCCESS};
use crate::{Error, Result};

const STAGE: &str = "_STAGE";

/// What `_STAGE` says.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Stage {
    /// The record type (`std::any::type_name`).
    record: String,
    /// Part files: the data set's partitions when it was written.
    parts: u32,
}

impl<T: Record> DataSet<T> {
    /// The data set, computed now and written to `dir` — or read from `dir` if a complete
    /// copy of a data set of the same record type is there already (written by an earlier
    /// run or attempt of the job). Later actions start from the files, so a job restarted
    /// after a failure redoes only the stages after its last materialized one. `dir` must
    /// be seen by every worker (one host, or a shared directory).
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-stage-{}", std::process::id()));
    /// let squares = s.range(0, 5).map(|x| x * x).materialize(&dir)?; // computed, written
    /// assert_eq!(squares.collect()?, Some(vec![0, 1, 4, 9, 16]));
    /// let again = s.range(0, 0).map(|x| x * x).materialize(&dir)?; // complete: read back
    /// assert_eq!(again.count()?, 5);
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As any action; [`Error::InvalidArgument`] if `dir` holds a complete data set of
    /// another record type (remove it, or materialize elsewhere).
    pub fn materialize(&self, dir: impl AsRef<Path>) -> Result<DataSet<T>> {
        let dir = dir.as_ref().to_path_buf();
        let want = Stage { record: std::any::type_name::<T>().to_string(), parts: 0 };
        // Rank 0 looks, and every worker follows its answer (or reports its error).
        let mut answer: std::result::Result<Option<u32>, String> = Ok(None);
        if self.session.rank() == 0 {
            answer = match read_stage(&dir) {
                Ok(Some(s)) if s.record == want.record => Ok(Some(s.parts)),
                Ok(Some(s)) => Err(format!(
                    "{} holds a materialized data set of {}, not of {}: remove it or \
                     materialize elsewhere",
                    dir.display(),
                    s.record,
                    want.record
                )),
                Ok(None) => Ok(None),
                Err(e) => Err(e.to_string()),
            };
        }
        let comm = self.session.comm();
        let mut bytes = serde_json::to_vec(&answer).unwrap_or_default();
        let mut len = [bytes.len() as u64];
        comm.broadcast(&mut len, 0)?;
        bytes.resize(len[0] as usize, 0);
        comm.broadcast(&mut bytes, 0)?;
        let answer: std::result::Result<Option<u32>, String> = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| Err(format!("rank 0's answer does not parse: {e}")));
        let parts = match answer.map_err(Error::InvalidArgument)? {
            None => self.write_stage(&dir)?,
            Some(n) => n,
        };
        Ok(read_back(self, dir, parts))
    }

    /// Writes every partition into `dir` (replacing what an unfinished earlier write left)
    /// and marks the stage complete.
    fn write_stage(&self, dir: &Path) -> Result<u32> {
        let parts = self.parallelism();
        if self.session.rank() == 0 {
            // An older stage's description goes first: until the new one is written, the
            // directory is not complete.
            match std::fs::remove_file(dir.join(STAGE)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io(&dir.join(STAGE), e))
                }
                _ => {}
            }
        }
        self.write_parts(Output::new(dir).mode(WriteMode::Overwrite), |out, x| {
            let bytes = bincode::serialize(&x).map_err(std::io::Error::other)?;
            out.write_all(&(bytes.len() as u32).to_le_bytes())?;
            out.write_all(&bytes)
        })?;
        if self.session.rank() == 0 {
            let stage = Stage { record: std::any::type_name::<T>().to_string(), parts };
            let path = dir.join(STAGE);
            let temp = dir.join(format!(".{STAGE}.tmp"));
            let _ = std::fs::remove_file(&temp);
            let text = serde_json::to_vec(&stage).map_err(|e| io(&path, e.into()))?;
            let mut f = heddle_comm::private::create_file(&temp).map_err(|e| io(&temp, e))?;
            f.write_all(&text).and_then(|()| f.sync_all()).map_err(|e| io(&temp, e))?;
            std::fs::rename(&temp, &path).map_err(|e| io(&path, e))?;
            File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, e))?;
        }
        self.session.comm().barrier()?;
        Ok(parts)
    }
}

/// The stage description of a complete directory (`None`: missing or incomplete).
fn read_stage(dir: &Path) -> Result<Option<Stage>> {
    if !dir.join(SUCCESS).exists() {
        return Ok(None);
    }
    let path = dir.join(STAGE);
    match std::fs::read(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path, e)),
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            Error::InvalidArgument(format!("{} does not parse ({e}): remove it", path.display()))
        }),
    }
}

/// A data set reading the `parts` part files of `dir`: partition `i` of `p` reads parts
/// `i`, `i + p`, ...
fn read_back<T: Record>(of: &DataSet<T>, dir: PathBuf, parts: u32) -> DataSet<T> {
    let make: crate::tasks::MakeIter<T> = Arc::new(move |i, p| {
        let step = p.max(1) as usize;
        let files: Vec<PathBuf> =
            (i..parts).step_by(step).map(|k| dir.join(format!("part-{k:05}"))).collect();
        Box::new(files.into_iter().flat_map(Records::<T>::open))
    });
    crate::sources::from_iter_fn(&of.session, "materialized", make)
}

/// The records of one part file, decoded.
struct Records<T> {
    path: PathBuf,
    input: Option<BufReader<File>>,
    done: bool,
    _t: std::marker::PhantomData<fn() -> T>,
}

impl<T> Records<T> {
    fn open(path: PathBuf) -> Records<T> {
        Records { path, input: None, done: false, _t: std::marker::PhantomData }
    }

    fn read(&mut self) -> Result<Option<T>>
    where
        T: serde::de::DeserializeOwned,
    {
        if self.input.is_none() {
            let f = File::open(&self.path).map_err(|e| io(&self.path, e))?;
            self.input = Some(BufReader::with_capacity(256 << 10, f));
        }
        let input = self.input.as_mut().expect("opened above");
        let mut len = [0u8; 4];
        match input.read_exact(&mut len) {
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other.map_err(|e| io(&self.path, e))?,
        }
        let mut bytes = vec![0u8; u32::from_le_bytes(len) as usize];
        input.read_exact(&mut bytes).map_err(|e| io(&self.path, e))?;
        bincode::deserialize(&bytes).map(Some).map_err(|e| {
            Error::InvalidArgument(format!(
                "{}: a record does not decode ({e}): the materialized data set is damaged; \
                 remove its directory to compute it again",
                self.path.display()
            ))
        })
    }
}

impl<T: serde::de::DeserializeOwned> Iterator for Records<T> {
    type Item = Result<T>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.read().transpose();
        self.done = !matches!(r, Some(Ok(_)));
        r
    }
}
