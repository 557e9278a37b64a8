//! The input files of a path (a file, a directory's files, a glob's matches), as planned:
//! each with its size and modification time, so a reader notices a file that changes
//! while a job reads it (appended to, truncated, rewritten) instead of returning a result
//! that mixes two versions of it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::io;
use crate::{Error, Result};

/// An input file as it was when the job was planned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Planned {
    /// The file.
    pub(crate) path: PathBuf,
    /// Its size then.
    pub(crate) len: u64,
    /// Its modification time then.
    pub(crate) modified: Option<SystemTime>,
}

impl Planned {
    /// Checks that `file` (open on this path) still has the planned size and modification
    /// time.
    ///
    /// # Errors
    /// [`Error::Changed`] naming the file and what changed.
    pub(crate) fn check(&self, file: &File) -> Result<()> {
        let meta = file
            .metadata()
            .map_err(|source| Error::Io { path: self.path.display().to_string(), source })?;
        let detail = if meta.len() != self.len {
            format!("it had {} bytes when the job was planned and has {} now", self.len, meta.len())
        } else if meta.modified().ok() != self.modified {
            "it was modified after the job was planned".to_string()
        } else {
            return Ok(());
        };
        Err(Error::Changed { path: self.path.display().to_string(), detail })
    }
}

/// [`list_files`] with each file's modification time.
pub(crate) fn planned_files(path: &Path) -> Result<Vec<Planned>> {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    // As Hadoop and Spark read a directory: names starting with `.` or `_` (`_SUCCESS`,
    // temporary directories of writes) are not input.
    let visible =
        |p: &PathBuf| !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with(['.', '_']));
    let candidates: Vec<PathBuf> = if name.contains(['*', '?']) {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let entries = std::fs::read_dir(dir).map_err(|e| io(dir, e))?;
        entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                visible(p) && p.file_name().is_some_and(|n| glob_match(&name, &n.to_string_lossy()))
            })
            .collect()
    } else if path.is_dir() {
        std::fs::read_dir(path)
            .map_err(|e| io(path, e))?
            .flatten()
            .map(|e| e.path())
            .filter(visible)
            .collect()
    } else {
        vec![path.to_path_buf()]
    };
    let mut files = Vec::new();
    for f in candidates {
        let meta = std::fs::metadata(&f).map_err(|e| io(&f, e))?;
        if meta.is_file() {
            files.push(Planned { len: meta.len(), modified: meta.modified().ok(), path: f });
        }
    }
    if files.is_empty() {
        return Err(Error::InvalidArgument(format!("{} names no readable file", path.display())));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

/// Files of `path` (a file, a directory's files but hidden ones (`.` or `_` first), or the
/// matches of a glob — `*` and `?` in the last component) with their sizes, sorted by
/// name: what the file sources of a session read.
///
/// # Errors
/// [`Error::Io`] for an unreadable directory or file, [`Error::InvalidArgument`] when the
/// path names no readable file.
pub fn list_files(path: &Path) -> Result<Vec<(PathBuf, u64)>> {
    Ok(planned_files(path)?.into_iter().map(|f| (f.path, f.len)).collect())
}

/// Whether `name` matches `pattern` (`*`: any run of characters, `?`: one character).
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
