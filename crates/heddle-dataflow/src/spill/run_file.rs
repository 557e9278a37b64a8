//! Run files: the sorted runs an external sort writes ([`RunWriter`]) and reads back
//! ([`RunReader`]) in the format described in the module documentation, and removes again
//! ([`Run`]).

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{self, AtomicU64};
use std::sync::Arc;

use crate::{Error, Result};
use heddle_comm::scratch::ScratchDir;

const MAGIC: [u8; 4] = *b"HSPL";
const VERSION: u32 = 1;
const HEADER_BYTES: u64 = 16;
const RECORD_HEADER_BYTES: u64 = 8;
const IO_BUFFER_BYTES: usize = 64 << 10;
pub(super) const FILE_PREFIX: &str = "heddle-spill-";
static NEXT_FILE: AtomicU64 = AtomicU64::new(0);

/// A sorted run on disk, written by a [`RunWriter`]; its file is removed when the run is
/// dropped (and its private scratch directory with the last run in it).
#[derive(Debug)]
pub struct Run {
    pub(super) path: PathBuf,
    pub(super) records: u64,
    _dir: Arc<ScratchDir>,
}

impl Run {
    /// Records in the run.
    pub fn records(&self) -> u64 {
        self.records
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.path) {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(
                    path = %self.path.display(),
                    error = %e,
                    "could not remove spill file"
                );
            }
        }
    }
}

/// Writes one run file: records in key order, each a key and a value of under 4 GiB.
///
/// Made by [`RunStore::writer`](super::RunStore::writer); [`finish`](Self::finish) hands
/// the [`Run`] over. Dropped unfinished, it removes its file.
#[derive(Debug)]
pub struct RunWriter {
    out: BufWriter<File>,
    run: Run,
    written: u64,
}

impl RunWriter {
    /// Creates a new, uniquely named, empty private run file in `dir`.
    pub(super) fn create(dir: &Arc<ScratchDir>) -> Result<RunWriter> {
        let n = NEXT_FILE.fetch_add(1, atomic::Ordering::Relaxed);
        let (path, file) = dir.create_file(&format!("{FILE_PREFIX}{n}.run")).map_err(|e| {
            Error::io(
                format!(
                    "creating a spill run in {} (free space there or list another spill \
                     directory in SpillConfig::dirs)",
                    dir.path().display()
                ),
                e,
            )
        })?;
        let run = Run { path, records: 0, _dir: dir.clone() };
        let mut writer =
            RunWriter { out: BufWriter::with_capacity(IO_BUFFER_BYTES, file), run, written: 0 };
        // The record count is filled in by `finish`.
        writer.write(&[0u8; HEADER_BYTES as usize])?;
        Ok(writer)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out.write_all(bytes).map_err(|e| self.failed(e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn failed(&self, e: io::Error) -> Error {
        Error::io(format!("writing spill run {}", self.run.path.display()), e)
    }

    /// Appends one record (records must come in the run's key order).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the key or value has 4 GiB or more; [`Error::Io`]
    /// naming the file if it cannot be written.
    pub fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let mut lens = [0u8; RECORD_HEADER_BYTES as usize];
        for (at, len) in [(0, key.len()), (4, value.len())] {
            let len = u32::try_from(len).map_err(|_| {
                Error::InvalidArgument(format!(
                    "a record with a {}-byte key and a {}-byte value cannot be spilled to {}; \
                     keys and values must be under 4 GiB",
                    key.len(),
                    value.len(),
                    self.run.path.display()
                ))
            })?;
            lens[at..at + 4].copy_from_slice(&len.to_le_bytes());
        }
        self.write(&lens)?;
        self.write(key)?;
        self.write(value)?;
        self.run.records += 1;
        Ok(())
    }

    /// Completes the file (its header counts the records) and returns the run and the bytes
    /// written, header included.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] naming the file if it cannot be written.
    pub fn finish(self) -> Result<(Run, u64)> {
        let RunWriter { out, run, written } = self;
        let failed = |e| Error::io(format!("writing spill run {}", run.path.display()), e);
        let file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        let mut header = [0u8; HEADER_BYTES as usize];
        header[0..4].copy_from_slice(&MAGIC);
        header[4..8].copy_from_slice(&VERSION.to_le_bytes());
        header[8..16].copy_from_slice(&run.records.to_le_bytes());
        file.write_all_at(&header, 0).map_err(failed)?;
        Ok((run, written))
    }
}

/// Reads one run file back, record by record, checking every length against the file.
pub(super) struct RunReader {
    input: BufReader<File>,
    left_records: u64,
    left_bytes: u64,
    run: Run,
}

impl RunReader {
    pub(super) fn open(run: Run) -> Result<RunReader> {
        let failed = |e| Error::io(format!("reading spill run {}", run.path.display()), e);
        // Our own run, still private (not swapped for a symlink or another's file).
        let file = heddle_comm::private::open_owned(&run.path, false)?;
        let len = file.metadata().map_err(failed)?.len();
        if len < HEADER_BYTES {
            return Err(corrupt(
                &run.path,
                format!("{len} bytes is shorter than the {HEADER_BYTES}-byte header"),
            ));
        }
        let mut input = BufReader::with_capacity(IO_BUFFER_BYTES, file);
        let mut header = [0u8; HEADER_BYTES as usize];
        input.read_exact(&mut header).map_err(failed)?;
        if header[0..4] != MAGIC {
            return Err(corrupt(&run.path, format!("bad magic {:02x?}", &header[0..4])));
        }
        let version = u32::from_le_bytes([header[4], header[5], header[6], header[7]]);
        if version != VERSION {
            return Err(corrupt(&run.path, format!("version {version}, expected {VERSION}")));
        }
        let mut count = [0u8; 8];
        count.copy_from_slice(&header[8..16]);
        let count = u64::from_le_bytes(count);
        if count != run.records {
            return Err(corrupt(
                &run.path,
                format!("header says {count} records but {} were written", run.records),
            ));
        }
        Ok(RunReader { input, left_records: count, left_bytes: len - HEADER_BYTES, run })
    }

    /// The run's file.
    pub(super) fn path(&self) -> &Path {
        &self.run.path
    }

    pub(super) fn next_record(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let path = &self.run.path;
        if self.left_records == 0 {
            return match self.left_bytes {
                0 => Ok(None),
                extra => Err(corrupt(path, format!("{extra} bytes follow the last record"))),
            };
        }
        let index = self.run.records - self.left_records;
        if self.left_bytes < RECORD_HEADER_BYTES {
            return Err(corrupt(
                path,
                format!("ends inside record {index} of {}", self.run.records),
            ));
        }
        let failed = |e| Error::io(format!("reading spill run {}", path.display()), e);
        let mut lens = [0u8; RECORD_HEADER_BYTES as usize];
        self.input.read_exact(&mut lens).map_err(failed)?;
        let key_len = u32::from_le_bytes([lens[0], lens[1], lens[2], lens[3]]);
        let value_len = u32::from_le_bytes([lens[4], lens[5], lens[6], lens[7]]);
        let body = u64::from(key_len) + u64::from(value_len);
        let left = self.left_bytes - RECORD_HEADER_BYTES;
        if body > left {
            return Err(corrupt(
                path,
                format!("record {index} claims {body} bytes but {left} remain"),
            ));
        }
        let mut key = vec![0; key_len as usize];
        self.input.read_exact(&mut key).map_err(failed)?;
        let mut value = vec![0; value_len as usize];
        self.input.read_exact(&mut value).map_err(failed)?;
        self.left_bytes = left - body;
        self.left_records -= 1;
        Ok(Some((key, value)))
    }
}

fn corrupt(path: &Path, detail: String) -> Error {
    Error::io(
        format!("reading spill run {}", path.display()),
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{detail}; the file is truncated or corrupt"),
        ),
    )
}
