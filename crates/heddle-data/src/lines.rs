//! The line reader of the file sources: the lines of a partition's byte range of files
//! laid end to end (a line belongs to the range its first byte lies in), with where each
//! line lies for error messages.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::io;
use crate::input_files::Planned;
use crate::sources::share;
use crate::text_blocks::{skip_line, MAX_LINE_BYTES};
use crate::{Error, Result};

pub(crate) fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|e| io(path, e))
}

/// Where a line lies: its file, byte offset, and line number when known without reading
/// the file from its start (line numbers are counted on demand for error messages).
#[derive(Debug, Clone)]
pub(crate) struct Position {
    pub(crate) file: PathBuf,
    offset: u64,
    pub(crate) line: Option<u64>,
}

impl Position {
    pub(crate) fn line_number(&self) -> u64 {
        self.line.unwrap_or_else(|| {
            // Count the newlines before the offset (only on the error path).
            let mut n = 1;
            if let Ok(f) = File::open(&self.file) {
                let mut r = BufReader::new(f);
                let mut seen = 0u64;
                let mut buf = Vec::new();
                while seen < self.offset {
                    buf.clear();
                    match r.read_until(b'\n', &mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(k) => {
                            seen += k as u64;
                            if seen <= self.offset {
                                n += 1;
                            }
                        }
                    }
                }
            }
            n
        })
    }
}

/// The lines of partition `i` of `p` of the concatenated files. Each file is checked
/// against its planned size and modification time when its range ends, so a file that
/// changes while it is read fails the job ([`Error::Changed`]).
pub(crate) struct Lines {
    /// (file, start, end) byte ranges of this partition, in order.
    segments: Vec<(Planned, u64, u64)>,
    current: Option<(BufReader<File>, Planned, u64, u64, Option<u64>)>,
    buf: Vec<u8>,
    /// Bytes read and not yet reported to the stage's progress.
    unreported: u64,
}

/// Bytes of lines read between two reports to the stage's progress.
const REPORT_BYTES: u64 = 1 << 20;

impl Lines {
    pub(crate) fn new(files: Arc<Vec<Planned>>, i: u32, p: u32) -> Lines {
        let total: u64 = files.iter().map(|f| f.len).sum();
        let r = share(total, i, p);
        let mut segments = Vec::new();
        let mut at = 0;
        for f in files.iter() {
            let (s, e) = (r.start.max(at), r.end.min(at + f.len));
            if s < e {
                segments.push((f.clone(), s - at, e - at));
            }
            at += f.len;
        }
        segments.reverse();
        Lines { segments, current: None, buf: Vec::new(), unreported: 0 }
    }

    /// Opens the next segment, skipping a line that started before it.
    fn open_next(&mut self) -> Result<bool> {
        let Some((planned, start, end)) = self.segments.pop() else { return Ok(false) };
        let path = planned.path.clone();
        let mut f = open(&path)?;
        let mut pos = start;
        if start > 0 {
            f.seek(SeekFrom::Start(start - 1)).map_err(|e| io(&path, e))?;
        }
        let mut reader = BufReader::with_capacity(1 << 16, f);
        if start > 0 {
            // Skip the line that began before this segment, but not past its end.
            pos = start - 1 + skip_line(&mut reader, end - start + 1).map_err(|e| io(&path, e))?;
        }
        let line = (start == 0).then_some(1);
        self.current = Some((reader, planned, pos, end, line));
        Ok(true)
    }

    fn next_line(&mut self) -> Option<Result<(String, Position)>> {
        loop {
            if self.current.is_none() {
                match self.open_next() {
                    Ok(true) => {}
                    Ok(false) => return None,
                    Err(e) => return Some(Err(e)),
                }
            }
            let (reader, planned, pos, end, line) = self.current.as_mut().expect("opened above");
            if *pos >= *end {
                let checked = planned.check(reader.get_ref());
                self.current = None;
                match checked {
                    Ok(()) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            self.buf.clear();
            let n = match reader.by_ref().take(MAX_LINE_BYTES + 1).read_until(b'\n', &mut self.buf)
            {
                Ok(n) => n as u64,
                Err(e) => return Some(Err(io(&planned.path, e))),
            };
            // Longer than the limit before its newline (as text_blocks counts it).
            if n > MAX_LINE_BYTES && self.buf.last() != Some(&b'\n') {
                let at = Position { file: planned.path.clone(), offset: *pos, line: *line };
                self.current = None;
                let message = format!(
                    "the line is longer than the {MAX_LINE_BYTES}-byte line limit; \
                     split it into lines"
                );
                return Some(Err(Error::Parse {
                    path: at.file.display().to_string(),
                    line: at.line_number(),
                    message,
                }));
            }
            if n == 0 {
                // The end of the file before the end of the range: it was truncated.
                let checked = planned.check(reader.get_ref());
                self.current = None;
                match checked {
                    Ok(()) => continue,
                    Err(e) => return Some(Err(e)),
                }
            }
            let at = Position { file: planned.path.clone(), offset: *pos, line: *line };
            *pos += n;
            self.unreported += n;
            if self.unreported >= REPORT_BYTES {
                heddle_comm::metrics::bytes_read(std::mem::take(&mut self.unreported));
            }
            if let Some(l) = line.as_mut() {
                *l += 1;
            }
            let bytes = self.buf.strip_suffix(b"\n").unwrap_or(&self.buf);
            let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
            return Some(match std::str::from_utf8(bytes) {
                Ok(s) => Ok((s.to_string(), at)),
                Err(_) => Err(Error::Parse {
                    path: at.file.display().to_string(),
                    line: at.line_number(),
                    message: "not UTF-8 text".into(),
                }),
            });
        }
    }
}

/// Numbered lines: `(text, position)`.
pub(crate) struct Numbered(Lines);

impl Lines {
    pub(crate) fn into_numbered(self) -> Numbered {
        Numbered(self)
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if self.unreported > 0 {
            heddle_comm::metrics::bytes_read(self.unreported);
        }
    }
}

impl Iterator for Lines {
    type Item = Result<String>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_line().map(|r| r.map(|(s, _)| s))
    }
}

impl Iterator for Numbered {
    type Item = Result<(String, Position)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_line()
    }
}
