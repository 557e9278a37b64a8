//! Text input in blocks of whole lines, for vectorized Python (one `str` of many lines
//! per record instead of one record per line): the files of a path (a file, a
//! directory's files or a glob) are cut into byte ranges, and each line belongs to the
//! block its first byte lies in — the rule of `heddle_data`'s line reader.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Files of `path` with their sizes, sorted by name: a file, a directory's files (not
/// hidden ones), or the matches of a glob (`*`, `?`) in the last path component.
pub(crate) fn list_files(path: &Path) -> Result<Vec<(PathBuf, u64)>, String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let candidates: Vec<PathBuf> = if name.contains(['*', '?']) {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        entries.flatten().map(|e| e.path()).filter(|p| p.file_name().is_some_and(|n| glob_match(&name, &n.to_string_lossy()))).collect()
    } else if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| io(path, e))?;
        entries.flatten().map(|e| e.path()).filter(|p| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))).collect()
    } else {
        vec![path.to_path_buf()]
    };
    let mut files = Vec::new();
    for f in candidates {
        let meta = std::fs::metadata(&f).map_err(|e| io(&f, e))?;
        if meta.is_file() {
            files.push((f, meta.len()));
        }
    }
    if files.is_empty() {
        return Err(format!("{} names no readable file", path.display()));
    }
    files.sort();
    Ok(files)
}

fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
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
