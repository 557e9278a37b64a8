//! The replayable stream sources' partitions: a generator (its sequence number), a
//! growing file (its byte offset), the files of a directory (which file, and the byte
//! offset in it).

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::pull::{Pulled, Puller};
use crate::{Error, Result};

fn position_err(what: &str, e: bincode::Error) -> Error {
    Error::InvalidArgument(format!("{what}: a checkpointed position does not decode: {e}"))
}

/// Paces a partition at `rate` records per second, if given.
#[derive(Debug)]
pub(crate) struct Pace {
    rate: Option<f64>,
    start: Instant,
    made: u64,
}

impl Pace {
    pub(crate) fn new(rate: Option<f64>) -> Pace {
        Pace { rate: rate.filter(|r| *r > 0.0), start: Instant::now(), made: 0 }
    }

    /// When the next record is due.
    pub(crate) fn next_at(&self) -> Instant {
        match self.rate {
            Some(r) => self.start + Duration::from_secs_f64(self.made as f64 / r),
            None => self.start,
        }
    }

    /// Whether the next record is due now (counting it if so).
    pub(crate) fn due(&mut self) -> bool {
        if let Some(r) = self.rate {
            if self.start.elapsed() < Duration::from_secs_f64(self.made as f64 / r) {
                return false;
            }
        }
        self.made += 1;
        true
    }
}

/// `f(i), f(i + p), ...` (`stream_generate`); its position is the next sequence number.
pub(crate) struct Generate<T> {
    pub(crate) f: Arc<dyn Fn(u64) -> T + Send + Sync>,
    pub(crate) seq: u64,
    pub(crate) step: u64,
    pub(crate) limit: Option<u64>,
    pub(crate) pace: Pace,
}

impl<T> Puller<T> for Generate<T> {
    fn pull(&mut self) -> Result<Pulled<T>> {
        if self.limit.is_some_and(|l| self.seq >= l) {
            return Ok(Pulled::End);
        }
        if !self.pace.due() {
            return Ok(Pulled::Later(self.pace.next_at()));
        }
        let x = (self.f)(self.seq);
        self.seq += self.step;
        Ok(Pulled::Item(x))
    }

    fn position(&self) -> Option<Vec<u8>> {
        Some(self.seq.to_le_bytes().to_vec())
    }

    fn seek(&mut self, position: &[u8]) -> Result<()> {
        self.seq = position.try_into().map(u64::from_le_bytes).map_err(|_| {
            Error::InvalidArgument("stream_generate: a checkpointed position is not a u64".into())
        })?;
        Ok(())
    }
}

/// The lines of a growing file from its start (`follow_file`); its position is the byte
/// offset after the last line it gave.
pub(crate) struct Follow {
    pub(crate) path: PathBuf,
    pub(crate) end_marker: Option<String>,
    pub(crate) file: Option<File>,
    pub(crate) pending: Vec<u8>,
    /// Bytes of the file consumed by the lines given.
    pub(crate) offset: u64,
    pub(crate) ended: bool,
}

impl Puller<String> for Follow {
    fn pull(&mut self) -> Result<Pulled<String>> {
        if self.ended {
            return Ok(Pulled::End);
        }
        let io = |e: std::io::Error| Error::Io { path: self.path.display().to_string(), source: e };
        if self.file.is_none() {
            match File::open(&self.path) {
                Ok(mut f) => {
                    f.seek(SeekFrom::Start(self.offset)).map_err(io)?;
                    self.file = Some(f);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Pulled::Pending),
                Err(e) => return Err(io(e)),
            }
        }
        let f = self.file.as_mut().expect("opened above");
        match pull_line(&mut self.pending, |buf| f.read(buf), &io, false)? {
            // A file at its current end is not finished: wait for more.
            Pulled::End => Ok(Pulled::Pending),
            Pulled::Item((line, bytes)) => {
                self.offset += bytes;
                if self.end_marker.as_deref() == Some(line.as_str()) {
                    self.ended = true;
                    return Ok(Pulled::End);
                }
                Ok(Pulled::Item(line))
            }
            Pulled::Pending => Ok(Pulled::Pending),
            Pulled::Later(at) => Ok(Pulled::Later(at)),
        }
    }

    fn position(&self) -> Option<Vec<u8>> {
        bincode::serialize(&(self.offset, self.ended)).ok()
    }

    fn seek(&mut self, position: &[u8]) -> Result<()> {
        let (offset, ended): (u64, bool) =
            bincode::deserialize(position).map_err(|e| position_err("follow_file", e))?;
        (self.offset, self.ended, self.file) = (offset, ended, None);
        self.pending.clear();
        Ok(())
    }
}

/// The next complete line from `pending` and whatever `read` has now, with the bytes it
/// took (its newline included): an item, pending (no complete line yet, or the read would
/// block), or the end (the reader is exhausted; with `last_line`, a last line without a
/// newline comes first, else it waits for its newline).
pub(crate) fn pull_line(
    pending: &mut Vec<u8>,
    mut read: impl FnMut(&mut [u8]) -> std::io::Result<usize>,
    io: &dyn Fn(std::io::Error) -> Error,
    last_line: bool,
) -> Result<Pulled<(String, u64)>> {
    loop {
        if let Some(nl) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=nl).collect();
            return Ok(Pulled::Item((text_of(&line[..line.len() - 1]), line.len() as u64)));
        }
        let mut buf = [0u8; 64 << 10];
        match read(&mut buf) {
            Ok(0) => {
                if pending.is_empty() {
                    return Ok(Pulled::End);
                }
                if !last_line {
                    // A growing file: its last line is not complete until its newline.
                    return Ok(Pulled::Pending);
                }
                let item = (text_of(pending), pending.len() as u64);
                pending.clear();
                return Ok(Pulled::Item(item));
            }
            Ok(n) => pending.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(Pulled::Pending),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
}

/// A line's text: invalid UTF-8 replaced, a CR before the newline dropped.
fn text_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line).trim_end_matches('\r').to_string()
}

/// The lines of a list of files, one after the other (`stream_text`); its position is
/// the file and the byte offset after the last line given.
pub(crate) struct TextFiles {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) file: usize,
    pub(crate) offset: u64,
    pub(crate) reader: Option<BufReader<File>>,
    pub(crate) line: Vec<u8>,
    pub(crate) pace: Pace,
}

impl Puller<String> for TextFiles {
    fn pull(&mut self) -> Result<Pulled<String>> {
        loop {
            let Some(path) = self.files.get(self.file) else { return Ok(Pulled::End) };
            let io = |e: std::io::Error| Error::Io { path: path.display().to_string(), source: e };
            if self.reader.is_none() {
                let mut f = File::open(path).map_err(io)?;
                f.seek(SeekFrom::Start(self.offset)).map_err(io)?;
                self.reader = Some(BufReader::with_capacity(256 << 10, f));
            }
            if !self.pace.due() {
                return Ok(Pulled::Later(self.pace.next_at()));
            }
            let r = self.reader.as_mut().expect("opened above");
            self.line.clear();
            let n = r.read_until(b'\n', &mut self.line).map_err(io)?;
            if n == 0 {
                (self.file, self.offset, self.reader) = (self.file + 1, 0, None);
                self.pace.made -= 1; // no record this time
                continue;
            }
            self.offset += n as u64;
            let body = self.line.strip_suffix(b"\n").unwrap_or(&self.line);
            return Ok(Pulled::Item(text_of(body)));
        }
    }

    fn position(&self) -> Option<Vec<u8>> {
        let name = self.files.get(self.file).map(|f| f.display().to_string());
        bincode::serialize(&(self.file as u64, self.offset, name, self.files.len() as u64)).ok()
    }

    fn seek(&mut self, position: &[u8]) -> Result<()> {
        let (file, offset, name, count): (u64, u64, Option<String>, u64) =
            bincode::deserialize(position).map_err(|e| position_err("stream_text", e))?;
        let now = self.files.get(file as usize).map(|f| f.display().to_string());
        if count != self.files.len() as u64 || name != now {
            return Err(Error::InvalidArgument(format!(
                "stream_text: the checkpoint was taken at {} (file {file} of {count} of this \
                 partition), but the input now has {} there ({} files); the input changed \
                 since the checkpoint: use a fresh checkpoint directory",
                name.as_deref().unwrap_or("the end"),
                now.as_deref().unwrap_or("nothing"),
                self.files.len()
            )));
        }
        (self.file, self.offset, self.reader) = (file as usize, offset, None);
        Ok(())
    }
}
