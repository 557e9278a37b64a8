//! A worker's share of the sort input, read (or generated) a chunk at a time, so the share
//! is never held whole: the sort holds every record once, in its own buffer, and the
//! input costs one chunk of memory on top.
//!
//! Worker `rank` of `size` takes records `n * rank / size .. n * (rank + 1) / size` of the
//! input's `n`. An input file holds 100-byte lines (`Format::Lines`: 101 bytes each with
//! the newline) or raw 100-byte records back to back (`Format::Raw`); its form is told, not
//! guessed. A file whose size is not a whole number of records is refused at open on every
//! worker alike; a line without its newline is an error naming the file and the line when
//! the chunk holding it is read.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::records::{generate, record_hash, KEY, RECORD};
use crate::BoxError;

/// Records read (or generated) at a time: about 1 MiB.
const CHUNK_RECORDS: u64 = 10_000;

/// The form of an input file: told, never guessed (raw records can look like lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// 100-byte lines, each followed by a newline (101 bytes apart).
    Lines,
    /// 100-byte records back to back.
    Raw,
}

/// Where the records come from.
enum Origin {
    /// The seeded generator.
    Generate { seed: u64 },
    /// An input file in a told format.
    File { file: File, path: PathBuf, format: Format },
}

/// One worker's share of the input, read a chunk at a time.
pub(crate) struct Share {
    origin: Origin,
    /// Bytes from one record to the next in `chunk` (and in the file).
    stride: usize,
    /// This worker's records of the input: `lo..hi`.
    lo: u64,
    hi: u64,
    /// The record the next chunk starts with.
    next: u64,
    /// The current chunk's records and the position of the next one in it.
    chunk: Vec<u8>,
    at: usize,
    /// Records per chunk.
    chunk_records: u64,
}

impl Share {
    /// Worker `rank`'s share of `records` generated from `seed`.
    pub(crate) fn generated(records: u64, seed: u64, rank: usize, size: usize) -> Share {
        let (lo, hi) = split(records, rank, size);
        Share::new(Origin::Generate { seed }, RECORD, lo, hi)
    }

    /// Worker `rank`'s share of the records of the file at `path`, in `format`.
    ///
    /// # Errors
    /// The file cannot be opened, or is not a whole number of records of its format.
    pub(crate) fn open(
        path: &Path,
        format: Format,
        rank: usize,
        size: usize,
    ) -> Result<Share, BoxError> {
        let name = path.display();
        let file = File::open(path).map_err(|e| format!("cannot open --input {name}: {e}"))?;
        let len = file.metadata().map_err(|e| format!("cannot read --input {name}: {e}"))?.len();
        let (stride, what) = match format {
            Format::Lines => (RECORD + 1, "100-byte lines (101 bytes each with the newline)"),
            Format::Raw => (RECORD, "100-byte records (--format raw)"),
        };
        if len % stride as u64 != 0 {
            let hint = if format == Format::Lines && len % RECORD as u64 == 0 {
                "; raw records need --format raw"
            } else {
                ""
            };
            return Err(
                format!("{name} holds {len} bytes: not a whole number of {what}{hint}").into()
            );
        }
        let (lo, hi) = split(len / stride as u64, rank, size);
        let origin = Origin::File { file, path: path.to_path_buf(), format };
        Ok(Share::new(origin, stride, lo, hi))
    }

    fn new(origin: Origin, stride: usize, lo: u64, hi: u64) -> Share {
        let chunk_records = CHUNK_RECORDS;
        Share { origin, stride, lo, hi, next: lo, chunk: Vec::new(), at: 0, chunk_records }
    }

    /// The share read `n` records at a time (tests put chunk bounds everywhere).
    #[cfg(test)]
    fn chunked(mut self, n: u64) -> Share {
        self.chunk_records = n.max(1);
        self
    }

    /// Records in this share.
    pub(crate) fn len(&self) -> u64 {
        self.hi - self.lo
    }

    /// The keys of about 1,000 records spread evenly over the share (all, if fewer).
    ///
    /// # Errors
    /// The file cannot be read.
    pub(crate) fn sample(&self) -> Result<Vec<[u8; KEY]>, BoxError> {
        let step = (self.len() / 1000).max(1);
        let mut key = [0u8; KEY];
        (self.lo..self.hi)
            .step_by(step as usize)
            .map(|i| {
                match &self.origin {
                    Origin::Generate { seed } => key.copy_from_slice(&generate(*seed, i)[..KEY]),
                    Origin::File { file, path, .. } => file
                        .read_exact_at(&mut key, i * self.stride as u64)
                        .map_err(|e| format!("cannot read --input {}: {e}", path.display()))?,
                }
                Ok(key)
            })
            .collect()
    }

    /// The next record's key and value, or `None` after the last.
    ///
    /// # Errors
    /// The file cannot be read, or a line of it lacks its newline.
    pub(crate) fn next_record(&mut self) -> Result<Option<(&[u8; KEY], &[u8])>, BoxError> {
        if self.at == self.chunk.len() && !self.fill()? {
            return Ok(None);
        }
        let record = &self.chunk[self.at..self.at + RECORD];
        self.at += self.stride;
        let (key, value) = record.split_at(KEY);
        Ok(Some((key.try_into().expect("a record holds a key"), value)))
    }

    /// Reads the next chunk; `false` at the end of the share.
    fn fill(&mut self) -> Result<bool, BoxError> {
        let n = self.chunk_records.min(self.hi - self.next);
        if n == 0 {
            return Ok(false);
        }
        self.chunk.resize(n as usize * self.stride, 0);
        self.at = 0;
        let first = self.next;
        self.next += n;
        match &self.origin {
            Origin::Generate { seed } => {
                for (i, slot) in (first..).zip(self.chunk.chunks_exact_mut(RECORD)) {
                    slot.copy_from_slice(&generate(*seed, i));
                }
            }
            Origin::File { file, path, format } => {
                let name = path.display();
                file.read_exact_at(&mut self.chunk, first * self.stride as u64)
                    .map_err(|e| format!("cannot read --input {name}: {e}"))?;
                if *format == Format::Lines {
                    let stride = self.stride;
                    if let Some(i) =
                        self.chunk.chunks_exact(stride).position(|l| l[RECORD] != b'\n')
                    {
                        let index = first + i as u64;
                        return Err(format!(
                            "{name} line {}: expected 100 bytes and a newline, found byte {:?} \
                             at byte {} where the newline goes{}",
                            index + 1,
                            char::from(self.chunk[i * stride + RECORD]),
                            index * stride as u64 + RECORD as u64,
                            if index == 0 { " (raw records need --format raw)" } else { "" }
                        )
                        .into());
                    }
                }
            }
        }
        Ok(true)
    }

    /// The order-independent checksum of the share's records, read once more from the
    /// start (for validation, after the clock).
    ///
    /// # Errors
    /// As [`next_record`](Self::next_record).
    pub(crate) fn checksum(&mut self) -> Result<u64, BoxError> {
        self.next = self.lo;
        self.chunk.clear();
        self.at = 0;
        let mut sum = 0u64;
        while let Some((k, v)) = self.next_record()? {
            sum = sum.wrapping_add(record_hash(k, v));
        }
        Ok(sum)
    }
}

/// Records `n * rank / size .. n * (rank + 1) / size`.
fn split(n: u64, rank: usize, size: usize) -> (u64, u64) {
    (n * rank as u64 / size as u64, n * (rank as u64 + 1) / size as u64)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    use proptest::prelude::*;

    use super::{Format, Share};
    use crate::records::{generate, record_hash, KEY, RECORD};

    /// A file in the temp directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(content: &[u8]) -> TempFile {
            static NEXT: AtomicU64 = AtomicU64::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir()
                .join(format!("heddle-terasort-dataflow-{}-{n}", std::process::id()));
            std::fs::write(&path, content).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    /// `n` records from `seed`: binary, or printable ASCII for a file of lines.
    fn records(n: usize, seed: u64, text: bool) -> Vec<[u8; RECORD]> {
        (0..n as u64)
            .map(|i| generate(seed, i).map(|b| if text { b' ' + b % 95 } else { b }))
            .collect()
    }

    /// The file: raw records back to back, or each followed by a newline.
    fn render(records: &[[u8; RECORD]], lines: bool) -> Vec<u8> {
        let end: &[u8] = if lines { b"\n" } else { b"" };
        records.iter().flat_map(|r| r.iter().chain(end).copied()).collect()
    }

    /// Every worker's share of the file's records, in rank order.
    fn read_all(content: &[u8], format: Format, workers: usize) -> Result<Vec<Vec<u8>>, String> {
        let f = TempFile::new(content);
        let mut got = Vec::new();
        for rank in 0..workers {
            got.extend(read_share(&f.0, format, rank, workers)?);
        }
        Ok(got)
    }

    /// Worker `rank`'s records of the file, or its first error.
    fn read_share(
        path: &std::path::Path,
        format: Format,
        rank: usize,
        workers: usize,
    ) -> Result<Vec<Vec<u8>>, String> {
        read_chunked(path, format, rank, workers, 7)
    }

    /// As `read_share`, `chunk` records at a time.
    fn read_chunked(
        path: &std::path::Path,
        format: Format,
        rank: usize,
        workers: usize,
        chunk: u64,
    ) -> Result<Vec<Vec<u8>>, String> {
        let share = Share::open(path, format, rank, workers).map_err(|e| e.to_string())?;
        let mut share = share.chunked(chunk);
        let mut got = Vec::new();
        while let Some((k, v)) = share.next_record().map_err(|e| e.to_string())? {
            got.push([k.as_slice(), v].concat());
        }
        assert_eq!(got.len() as u64, share.len());
        Ok(got)
    }

    fn format(lines: bool) -> Format {
        if lines {
            Format::Lines
        } else {
            Format::Raw
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 64,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Raw records or lines, any number of them (none too), any number of workers:
        /// the workers' shares in rank order are the file's records, each once.
        #[test]
        fn every_record_is_read_once(
            n in 0usize..300,
            seed in any::<u64>(),
            lines in any::<bool>(),
            workers in 1usize..9,
        ) {
            let records = records(n, seed, lines);
            let got = read_all(&render(&records, lines), format(lines), workers).unwrap();
            prop_assert_eq!(got, records.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
        }

        /// Every chunk size, every number of workers: the shares hold the file's records
        /// once each, in order, and their checksums add up to the records' one.
        #[test]
        fn chunk_bounds_lose_nothing(
            n in 0usize..120,
            seed in any::<u64>(),
            lines in any::<bool>(),
            workers in 1usize..5,
            chunk in 1u64..40,
        ) {
            let records = records(n, seed, lines);
            let f = TempFile::new(&render(&records, lines));
            let (mut got, mut sum) = (Vec::new(), 0u64);
            for rank in 0..workers {
                got.extend(read_chunked(&f.0, format(lines), rank, workers, chunk).unwrap());
                let share = Share::open(&f.0, format(lines), rank, workers).unwrap();
                sum = sum.wrapping_add(share.chunked(chunk).checksum().unwrap());
            }
            prop_assert_eq!(&got, &records.iter().map(|r| r.to_vec()).collect::<Vec<_>>());
            let want = records.iter().fold(0u64, |s, r| {
                s.wrapping_add(record_hash(&r[..KEY], &r[KEY..]))
            });
            prop_assert_eq!(sum, want);
        }

        /// A generated share holds the generator's records, chunk after chunk.
        #[test]
        fn generated_shares_are_the_generators_records(
            n in 0u64..200,
            seed in any::<u64>(),
            workers in 1usize..5,
            chunk in 1u64..40,
        ) {
            let mut got = Vec::new();
            for rank in 0..workers {
                let mut share = Share::generated(n, seed, rank, workers).chunked(chunk);
                while let Some((k, v)) = share.next_record().unwrap() {
                    got.push([k.as_slice(), v].concat());
                }
            }
            let want: Vec<Vec<u8>> = (0..n).map(|i| generate(seed, i).to_vec()).collect();
            prop_assert_eq!(got, want);
        }

        /// A trailing partial record or line (1 to 100 bytes) is an error naming the file
        /// and its size, on every worker.
        #[test]
        fn a_partial_last_record_is_an_error_naming_the_file(
            n in 0usize..50,
            seed in any::<u64>(),
            lines in any::<bool>(),
            extra in 1usize..=RECORD,
            workers in 1usize..9,
        ) {
            // A raw file cut after 100 bytes of a record holds whole records: cut earlier.
            let extra = if lines { extra } else { extra.min(RECORD - 1) };
            let mut content = render(&records(n + 1, seed, lines), lines);
            content.truncate(n * (RECORD + usize::from(lines)) + extra);
            let f = TempFile::new(&content);
            for rank in 0..workers {
                let e = Share::open(&f.0, format(lines), rank, workers)
                    .err()
                    .expect("an error")
                    .to_string();
                let want = format!(
                    "{} holds {} bytes: not a whole number of 100-byte {}",
                    f.0.display(),
                    content.len(),
                    if lines { "lines" } else { "records" }
                );
                prop_assert!(e.starts_with(&want), "{}\nshould start with: {}", e, want);
            }
        }

        /// Raw records read as lines are an error naming the file (by their size, or a
        /// line without its newline), whatever they hold.
        #[test]
        fn raw_records_are_not_lines(
            n in 1usize..300,
            seed in any::<u64>(),
            newline_at in 0usize..300,
        ) {
            let mut records = records(n, seed, false);
            records[newline_at % n][0] = b'\n';
            let content = render(&records, false);
            let f = TempFile::new(&content);
            let e = read_share(&f.0, Format::Lines, 0, 1).expect_err("an error");
            prop_assert!(e.starts_with(&f.0.display().to_string()), "{}", e);
        }
    }

    /// 101 raw records whose second one starts with a newline are 100 lines by size and
    /// byte 100: read as raw records, they are the records.
    #[test]
    fn raw_records_that_look_like_lines_are_read_as_records() {
        let mut records = records(101, 3, false);
        records[1][0] = b'\n';
        let got = read_all(&render(&records, false), Format::Raw, 1).unwrap();
        assert_eq!(got.len(), records.len(), "records read");
        assert!(got.iter().zip(&records).all(|(g, r)| g == r), "records differ");
        // Read as lines, line 2 has no newline.
        let e = read_all(&render(&records, false), Format::Lines, 1).unwrap_err();
        assert!(e.contains(" line 2: expected 100 bytes and a newline"), "{e}");
    }

    /// 99 lines and one byte are 10,000 bytes: 100 raw records by size, but not lines.
    #[test]
    fn a_partial_line_is_an_error_even_at_a_multiple_of_100_bytes() {
        let mut content = render(&records(100, 3, true), true);
        content.truncate(99 * (RECORD + 1) + 1);
        assert_eq!(content.len() % RECORD, 0);
        let e = read_all(&content, Format::Lines, 1).unwrap_err();
        assert!(e.contains("holds 10000 bytes: not a whole number of 100-byte lines"), "{e}");
    }

    /// A line of the wrong length after a good first line (the size still a multiple of
    /// 101) is an error naming the file and the line, on the worker whose share holds it,
    /// not records shifted by a byte.
    #[test]
    fn a_line_of_the_wrong_length_is_an_error() {
        let mut content = render(&records(6, 3, true), true);
        content.remove(4 * (RECORD + 1) + 50); // line 5 is 99 bytes ...
        content.insert(5 * (RECORD + 1) + 10, b'x'); // ... and line 6 is 101
        let f = TempFile::new(&content);
        for workers in 1..=6 {
            let errors: Vec<String> = (0..workers)
                .filter_map(|rank| read_share(&f.0, Format::Lines, rank, workers).err())
                .collect();
            let want = format!("{} line 5: expected 100 bytes and a newline", f.0.display());
            assert!(
                errors.len() == 1 && errors[0].starts_with(&want),
                "{workers} workers: {errors:?}"
            );
        }
    }

    /// An empty file is no records, in either format.
    #[test]
    fn an_empty_file_is_no_records() {
        for lines in [false, true] {
            assert_eq!(read_all(b"", format(lines), 3).unwrap(), Vec::<Vec<u8>>::new());
        }
    }
}
