//! Text input in blocks of whole lines (one record of many lines instead of one record per
//! line): the files of a path are laid end to end and cut into byte ranges, and each line
//! belongs to the block its first byte lies in — the rule of the line reader.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::Arc;

use crate::dataset::DataSet;
use crate::input_files::{planned_files, Planned};
use crate::session::Session;
use crate::sources::from_files_iter_fn;
use crate::tasks::PartitionBytes;
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

    /// The blocks partition `i` of `p` reads.
    ///
    /// ```
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-part-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("in.txt"), "a\nb\nc\n")?;
    /// let blocks = heddle_data::TextBlocks::new(&dir, 2)?; // 6 bytes: 3 blocks
    /// assert_eq!((blocks.partition(0, 2), blocks.partition(1, 2)), (0..1, 1..3));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn partition(&self, i: u32, p: u32) -> std::ops::Range<u64> {
        let (i, p) = (u64::from(i), u64::from(p.max(1)));
        self.n * i / p..self.n * (i + 1) / p
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
                let file = read_segment(f, s - at, e - at, MAX_LINE_BYTES, &mut out)
                    .map_err(|source| Error::Io { path: f.display().to_string(), source })?;
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

/// Consumes `r` up to and including its next newline, but at most `limit` bytes, without
/// keeping them; returns how many it consumed (fewer than `limit` without a newline only
/// at the end of the input).
pub(crate) fn skip_line(r: &mut impl BufRead, limit: u64) -> std::io::Result<u64> {
    let mut skipped = 0u64;
    while skipped < limit {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let room = usize::try_from(limit - skipped).unwrap_or(usize::MAX);
        match buf.iter().take(room).position(|&b| b == b'\n') {
            Some(i) => {
                r.consume(i + 1);
                return Ok(skipped + i as u64 + 1);
            }
            None => {
                let n = buf.len().min(room);
                r.consume(n);
                skipped += n as u64;
            }
        }
    }
    Ok(skipped)
}

/// The longest line the text readers take (256 MiB): a longer one fails the job naming its
/// file, rather than growing a buffer without bound.
pub const MAX_LINE_BYTES: u64 = 256 << 20;

/// Appends the lines of `path` that start in `start..end` (the last one read to its end,
/// if it is at most `max_line` bytes long); returns the file, to be checked against its
/// plan. Work is linear in the bytes of the segment and of its last line: a segment inside
/// one long line stops skipping at its own end.
fn read_segment(
    path: &Path,
    start: u64,
    end: u64,
    max_line: u64,
    out: &mut Vec<u8>,
) -> std::io::Result<File> {
    let mut f = File::open(path)?;
    let mut pos = start;
    if start > 0 {
        f.seek(SeekFrom::Start(start - 1))?;
        pos = start - 1;
    }
    let mut r = BufReader::with_capacity(1 << 16, f);
    if start > 0 {
        // Skip the rest of a line that began before this segment, up to the segment's
        // end: if no line starts in it, it holds nothing.
        pos += skip_line(&mut r, end - pos)?;
    }
    if pos >= end {
        return Ok(r.into_inner());
    }
    let before = out.len();
    r.by_ref().take(end - pos).read_to_end(out)?;
    if out.len() > before && out.last() != Some(&b'\n') {
        // The last line goes on past the segment: read it to its end, within the limit.
        let line_start = out.iter().rposition(|&b| b == b'\n').map_or(before, |p| p + 1);
        let so_far = (out.len() - line_start) as u64;
        let n =
            r.by_ref().take((max_line + 1).saturating_sub(so_far)).read_until(b'\n', out)? as u64;
        if so_far + n > max_line && out.last() != Some(&b'\n') {
            let at = pos + (line_start - before) as u64;
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the line at byte {at} is longer than the {max_line}-byte line limit; \
                     split it into lines"
                ),
            ));
        }
    }
    Ok(r.into_inner())
}

impl Session {
    /// Blocks of whole lines (each ending with a newline) of about `block_bytes` from the
    /// files of `path`, as [`Session::text_file`] finds them: for work that goes through
    /// many lines at once (splitting words, vectorized parsing) without a record per line.
    /// Blocks in which no line starts (inside a long line) give no record.
    ///
    /// ```
    /// let s = heddle_data::Session::new(heddle_comm::solo(Default::default())?)?;
    /// let dir = std::env::temp_dir().join(format!("heddle-doc-blocks-{}", std::process::id()));
    /// std::fs::create_dir_all(&dir)?;
    /// std::fs::write(dir.join("in.txt"), "a\nb\nc\n")?;
    /// // Blocks of 4 bytes: bytes 0..3 hold the starts of "a" and "b", bytes 3..6 that of "c".
    /// let blocks = s.text_blocks(&dir, 4)?.collect()?;
    /// assert_eq!(blocks, Some(vec!["a\nb\n".to_string(), "c\n".to_string()]));
    /// std::fs::remove_dir_all(&dir)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// A path that names no readable file, or a zero `block_bytes`; reading a block that is
    /// not UTF-8 fails the job naming the file.
    pub fn text_blocks(&self, path: impl AsRef<Path>, block_bytes: u64) -> Result<DataSet<String>> {
        if block_bytes == 0 {
            return Err(Error::InvalidArgument(
                "text_blocks: block_bytes must be at least 1".into(),
            ));
        }
        let path = path.as_ref().to_path_buf();
        let blocks = Arc::new(TextBlocks::new(&path, block_bytes)?);
        let shares = blocks.clone();
        let bytes: PartitionBytes = Arc::new(move |i, p| {
            let r = shares.partition(i, p);
            shares.start(r.end) - shares.start(r.start)
        });
        Ok(from_files_iter_fn(
            self,
            "text_blocks",
            Arc::new(move |i, p| {
                let (b, path) = (blocks.clone(), path.clone());
                let range = b.partition(i, p);
                Box::new(range.filter_map(move |j| {
                    heddle_comm::metrics::bytes_read(b.start(j + 1) - b.start(j));
                    b.read(j).map_or_else(|e| Some(Err(e)), |bytes| utf8(bytes, &path, b.start(j)))
                }))
            }),
            Some(bytes),
        ))
    }
}

/// Block `bytes` from byte `start` of `path`'s files as text: `None` for an empty block
/// (no line starts in it).
fn utf8(bytes: Vec<u8>, path: &Path, start: u64) -> Option<Result<String>> {
    (!bytes.is_empty()).then(|| {
        String::from_utf8(bytes).map_err(|_| {
            Error::InvalidArgument(format!(
                "{}: the block from byte {start} is not UTF-8 text",
                path.display()
            ))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments(content: &[u8], cuts: &[u64], max_line: u64) -> std::io::Result<Vec<u8>> {
        let path = std::env::temp_dir().join(format!(
            "heddle-segment-{}-{}",
            std::process::id(),
            content.len()
        ));
        std::fs::write(&path, content).unwrap();
        let mut out = Vec::new();
        let r = cuts
            .windows(2)
            .try_for_each(|w| read_segment(&path, w[0], w[1], max_line, &mut out).map(drop));
        std::fs::remove_file(&path).unwrap();
        r.map(|()| out)
    }

    #[test]
    fn a_long_line_is_read_once_across_segments_inside_it() {
        let mut content = b"a b\n".to_vec();
        content.extend(std::iter::repeat_n(b'x', 1000));
        content.extend_from_slice(b"\nlast");
        let cuts: Vec<u64> =
            (0..=content.len() as u64).step_by(7).chain([content.len() as u64]).collect();
        assert_eq!(segments(&content, &cuts, 4096).unwrap(), content);
    }

    #[test]
    fn a_line_past_the_limit_is_an_error_naming_its_start() {
        let mut content = b"ok\n".to_vec();
        content.extend(std::iter::repeat_n(b'y', 300));
        content.push(b'\n');
        let e = segments(&content, &[0, 10, content.len() as u64], 100).unwrap_err().to_string();
        assert!(e.contains("line at byte 3") && e.contains("100-byte line limit"), "{e}");
        assert!(segments(&content, &[0, content.len() as u64], 400).is_ok());
    }
}
