//! Run files: the sorted runs a spill sorter writes ([`write_run`]) and reads back
//! ([`RunReader`]) in the format described in the module documentation, and removes again
//! ([`SpillFile`]).

use std::fs::{self, File};
use std::io::{self, BufReader, BufWriter, Read, Write};
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

/// A run file on disk, removed when dropped (and its scratch directory with the last run).
#[derive(Debug)]
pub(super) struct SpillFile {
    pub(super) path: PathBuf,
    pub(super) records: u64,
    _dir: Arc<ScratchDir>,
}

impl Drop for SpillFile {
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

/// Creates a new, uniquely named, empty private file in `dir`.
fn create_spill_file(dir: &Arc<ScratchDir>) -> io::Result<(File, SpillFile)> {
    let n = NEXT_FILE.fetch_add(1, atomic::Ordering::Relaxed);
    let (path, file) = dir.create_file(&format!("{FILE_PREFIX}{n}.run"))?;
    Ok((file, SpillFile { path, records: 0, _dir: dir.clone() }))
}

/// Writes `records` (already in key order, exactly `count` of them) as a new run in `dir`;
/// returns it and the bytes written.
pub(super) fn write_run<K: AsRef<[u8]>, V: AsRef<[u8]>>(
    dir: &Arc<ScratchDir>,
    count: u64,
    records: impl Iterator<Item = Result<(K, V)>>,
) -> Result<(SpillFile, u64)> {
    let (file, mut run) = create_spill_file(dir).map_err(|e| {
        Error::io(
            format!(
                "creating a spill run in {} (free space there or list another directory in \
                 SpillConfig::dirs)",
                dir.path().display()
            ),
            e,
        )
    })?;
    let failed = |e| Error::io(format!("writing spill run {}", run.path.display()), e);
    let mut out = BufWriter::with_capacity(IO_BUFFER_BYTES, file);
    let mut header = [0u8; HEADER_BYTES as usize];
    header[0..4].copy_from_slice(&MAGIC);
    header[4..8].copy_from_slice(&VERSION.to_le_bytes());
    header[8..16].copy_from_slice(&count.to_le_bytes());
    out.write_all(&header).map_err(failed)?;
    let mut written = HEADER_BYTES;
    for record in records {
        let (key, value) = record?;
        let (key, value) = (key.as_ref(), value.as_ref());
        for len in [key.len(), value.len()] {
            let len = u32::try_from(len)
                .map_err(|_| failed(io::Error::other("key or value of 4 GiB or more")))?;
            out.write_all(&len.to_le_bytes()).map_err(failed)?;
        }
        out.write_all(key).map_err(failed)?;
        out.write_all(value).map_err(failed)?;
        written += RECORD_HEADER_BYTES + key.len() as u64 + value.len() as u64;
    }
    out.into_inner().map_err(|e| failed(e.into_error()))?;
    run.records = count;
    Ok((run, written))
}

/// Reads one run file back, record by record, checking every length against the file.
pub(super) struct RunReader {
    input: BufReader<File>,
    left_records: u64,
    left_bytes: u64,
    run: SpillFile,
}

impl RunReader {
    pub(super) fn open(run: SpillFile) -> Result<RunReader> {
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
