//! Text input in blocks of whole lines, for vectorized Python (one `str` of many lines
//! per record instead of one record per line): the files of a path (a file, a
//! directory's files or a glob) are cut into byte ranges, and each line belongs to the
//! block its first byte lies in — the rule of `heddle_data`'s line reader.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Files of `path` with their sizes, sorted by name (see [`heddle_data::list_files`]).
pub(crate) fn list_files(path: &Path) -> Result<Vec<(PathBuf, u64)>, String> {
    heddle_data::list_files(path).map_err(|e| e.to_string())
}

/// Blocks of about `block_bytes` over `files`: block `j` of `count()` covers bytes
/// `j * total / n .. (j + 1) * total / n` of the files laid end to end.
#[derive(Debug, Clone)]
pub(crate) struct Blocks {
    files: Vec<(PathBuf, u64)>,
    total: u64,
    n: u64,
}

impl Blocks {
    pub(crate) fn new(files: Vec<(PathBuf, u64)>, block_bytes: u64) -> Blocks {
        let total = files.iter().map(|f| f.1).sum::<u64>();
        Blocks { files, total, n: total.div_ceil(block_bytes.max(1)).max(1) }
    }

    pub(crate) fn count(&self) -> u64 {
        self.n
    }

    /// The lines of block `j` that start in it, each ending with a newline.
    pub(crate) fn read(&self, j: u64) -> Result<Vec<u8>, String> {
        let (start, end) = (self.total * j / self.n, self.total * (j + 1) / self.n);
        let mut out = Vec::with_capacity((end - start) as usize + 256);
        let mut at = 0;
        for (f, len) in &self.files {
            let (s, e) = (start.max(at), end.min(at + len));
            if s < e {
                read_segment(f, s - at, e - at, &mut out).map_err(|err| format!("{}: {err}", f.display()))?;
                if out.last().is_some_and(|&b| b != b'\n') {
                    out.push(b'\n'); // a file's last line without a newline
                }
            }
            at += len;
        }
        Ok(out)
    }
}

/// Appends the lines of `path` that start in `start..end` (the last one read to its end).
fn read_segment(path: &Path, start: u64, end: u64, out: &mut Vec<u8>) -> std::io::Result<()> {
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
        return Ok(());
    }
    let before = out.len();
    r.by_ref().take(end - pos).read_to_end(out)?;
    if out.len() > before && out.last() != Some(&b'\n') {
        r.read_until(b'\n', out)?;
    }
    Ok(())
}
