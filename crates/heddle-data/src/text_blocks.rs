//! Text input in blocks of whole lines (one record of many lines instead of one record per
//! line): the files of a path are laid end to end and cut into byte ranges, and each line
//! belongs to the block its first byte lies in — the rule of the line reader.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::dataset::DataSet;
use crate::session::Session;
use crate::input_files::{planned_files, Planned};
use crate::sources::from_iter_fn;
use crate::{Error, Result};

/// Blocks of about `block_bytes` over some files: block `j` of [`TextBlocks::count`] covers
/// bytes `j * total / n .. (j + 1) * total / n` of the files laid end to end.
#[derive(Debug, Clone)]
pub struct TextBlocks {
    files: Vec<Planned>,
    total: u64,
    n: u64,
}

impl TextBlocks {
    /// Blocks of about `block_bytes` (at least 1) over the files of `path` (a file, a
    /// directory's files, or a glob's).
    ///
    /// # Errors
    /// A path that names no readable file.
    pub fn new(path: &Path, block_bytes: u64) -> Result<TextBlocks> {
        let files = planned_files(path)?;
        let total = files.iter().map(|f| f.len).sum::<u64>();
        Ok(TextBlocks { files, total, n: total.div_ceil(block_bytes.max(1)).max(1) })
    }

    /// The first byte of block `j` in the files laid end to end.
    pub fn start(&self, j: u64) -> u64 {
        self.total * j / self.n
    }

    /// Number of blocks.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The lines that start in block `j`, each ending with a newline (empty if none does).
    ///
    /// # Errors
    /// [`Error::Io`] naming the file that could not be read; [`Error::Changed`] if a file
    /// no longer has the size and modification time it had when the blocks were planned.
    pub fn read(&self, j: u64) -> Result<Vec<u8>> {
        let (start, end) = (self.start(j), self.start(j + 1));
        let mut out = Vec::with_capacity((end - start) as usize + 256);
        let mut at = 0;
        for planned in &self.files {
            let (f, len) = (&planned.path, planned.len);
            let (s, e) = (start.max(at), end.min(at + len));
            if s < e {
                let file = read_segment(f, s - at, e - at, &mut out).map_err(|source| Error::Io { path: f.display().to_string(), source })?;
                planned.check(&file)?;
                if out.last().is_some_and(|&b| b != b'\n') {
                    out.push(b'\n'); // a file's last line without a newline
                }
            }
            at += len;
        }
        Ok(out)
    }
}

/// Appends the lines of `path` that start in `start..end` (the last one read to its end);
/// returns the file, to be checked against its plan.
fn read_segment(path: &Path, start: u64, end: u64, out: &mut Vec<u8>) -> std::io::Result<File> {
    let mut f = File::open(path)?;
    let mut pos = start;
    if start > 0 {
        f.seek(SeekFrom::Start(start - 1))?;
    }
    let mut r = BufReader::with_capacity(1 << 16, f);
    if start > 0 {
        // Skip the rest of a line that began before this segment.
        let mut skipped = Vec::new();
        pos = start - 1 + r.read_until(b'\n', &mut skipped)? as u64;
    }
    if pos >= end {
        return Ok(r.into_inner());
    }
    let before = out.len();
    r.by_ref().take(end - pos).read_to_end(out)?;
    if out.len() > before && out.last() != Some(&b'\n') {
        r.read_until(b'\n', out)?;
    }
    Ok(r.into_inner())
}

impl Session {
    /// Blocks of whole lines (each ending with a newline) of about `block_bytes` from the
    /// files of `path`, as [`Session::text_file`] finds them: for work that goes through
    /// many lines at once (splitting words, vectorized parsing) without a record per line.
    /// Blocks in which no line starts (inside a long line) give no record.
    ///
    /// # Errors
    /// A path that names no readable file, or a zero `block_bytes`; reading a block that is
    /// not UTF-8 fails the job naming the file.
    pub fn text_blocks(&self, path: impl AsRef<Path>, block_bytes: u64) -> Result<DataSet<String>> {
        if block_bytes == 0 {
            return Err(Error::InvalidArgument("text_blocks: block_bytes must be at least 1".into()));
        }
        let path = path.as_ref().to_path_buf();
        let blocks = Arc::new(TextBlocks::new(&path, block_bytes)?);
        Ok(from_iter_fn(
            self,
            "text_blocks",
            Arc::new(move |i, p| {
                let (b, path) = (blocks.clone(), path.clone());
                let n = b.count();
                let range = n * u64::from(i) / u64::from(p)..n * (u64::from(i) + 1) / u64::from(p);
                Box::new(range.filter_map(move |j| match b.read(j) {
                    Ok(bytes) if bytes.is_empty() => None,
                    Ok(bytes) => Some(String::from_utf8(bytes).map_err(|_| {
                        Error::InvalidArgument(format!("{}: the block from byte {} is not UTF-8 text", path.display(), b.start(j)))
                    })),
                    Err(e) => Some(Err(e)),
                }))
            }),
        ))
    }
}
