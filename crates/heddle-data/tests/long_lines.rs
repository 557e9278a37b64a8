//! The line limit of the text readers ([`MAX_LINE_BYTES`], a constant: no setting lowers it)
//! on real files of more than 256 MiB. The files are sparse: their long lines are holes,
//! NUL bytes (UTF-8 text without a newline) that take no disk space and little time to
//! read. Tests run one at a time (each may hold a 256 MiB line in memory, and the work
//! checks read the process's I/O counters).
//!
//! - A line past the limit fails the job with an error naming the file and the line
//!   (text_file, CSV, JSON lines) or its byte offset (text_blocks), whether or not the
//!   partition reading it starts at the start of the file, and even when malformed rows
//!   are skipped.
//! - A line of exactly the limit is read by every reader.
//! - Work is linear in the file: a 64 MiB line read in small blocks or many partitions
//!   is read about twice (once by the range it starts in, once by the ranges inside it),
//!   never once per block. Bytes read come from the kernel's counters (`rchar` of
//!   `/proc/.../io`), not from timing; the check is skipped where those are missing.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::Mutex;

use heddle_data::{OnMalformed, Session, TextBlocks, MAX_LINE_BYTES};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn session(partitions: u32) -> Session {
    let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).expect("a world of one");
    Session::new(comm).and_then(|s| s.with_partitions(partitions)).expect("a session")
}

/// A file of lines, some of them holes (runs of NUL bytes), removed when dropped.
struct Sparse {
    path: PathBuf,
    len: u64,
}

enum Line {
    Text(&'static str),
    Hole(u64),
}

impl Sparse {
    /// The lines, each followed by a newline but the last if `final_newline` is false.
    fn new(tag: &str, lines: &[Line], final_newline: bool) -> Sparse {
        let path =
            std::env::temp_dir().join(format!("heddle-long-lines-{tag}-{}", std::process::id()));
        let mut f = File::create(&path).unwrap();
        let mut at = 0u64;
        for (i, line) in lines.iter().enumerate() {
            match line {
                Line::Text(t) => {
                    f.write_all(t.as_bytes()).unwrap();
                    at += t.len() as u64;
                }
                Line::Hole(n) => {
                    at += n;
                    f.seek(SeekFrom::Start(at)).unwrap();
                }
            }
            if i + 1 < lines.len() || final_newline {
                f.write_all(b"\n").unwrap();
                at += 1;
            }
        }
        f.set_len(at).unwrap(); // a hole at the end
        Sparse { path, len: at }
    }

    fn name(&self) -> String {
        self.path.display().to_string()
    }
}

impl Drop for Sparse {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Line 1 short; line 2 a 10 MiB hole (under the limit); line 3 short; line 4 one byte
/// past the limit; line 5 short. With 32 partitions line 4 starts in partition 1, whose
/// range starts inside line 2: its line number is counted, not known from the start.
fn over_the_limit(tag: &str) -> Sparse {
    use Line::{Hole, Text};
    Sparse::new(
        tag,
        &[Text("first"), Hole(10 << 20), Text("third"), Hole(MAX_LINE_BYTES + 1), Text("last")],
        true,
    )
}

fn assert_names_line_4(e: &str, file: &Sparse) {
    let want = format!(
        "{} line 4: the line is longer than the {MAX_LINE_BYTES}-byte line limit",
        file.name()
    );
    assert!(e.contains(&want), "{e}\nshould contain: {want}");
}

#[test]
fn text_file_fails_on_a_line_past_the_limit_naming_file_and_line() {
    let _one = one_at_a_time();
    let file = over_the_limit("text");
    for partitions in [1, 32] {
        let e = session(partitions).text_file(&file.path).unwrap().count().unwrap_err().to_string();
        assert_names_line_4(&e, &file);
    }
}

#[test]
fn csv_fails_on_a_line_past_the_limit_naming_file_and_line() {
    let _one = one_at_a_time();
    let file = over_the_limit("csv");
    for partitions in [1, 32] {
        for on_malformed in [OnMalformed::Fail, OnMalformed::Skip] {
            let rows = session(partitions)
                .read_csv::<Vec<String>>(&file.path, false, on_malformed)
                .unwrap();
            assert_names_line_4(&rows.count().unwrap_err().to_string(), &file);
        }
    }
}

#[test]
fn json_lines_fail_on_a_line_past_the_limit_naming_file_and_line() {
    let _one = one_at_a_time();
    let file = over_the_limit("json");
    for partitions in [1, 32] {
        // Skip the malformed rows (every line here): the long one still fails the job.
        let rows = session(partitions)
            .read_json_lines::<serde_json::Value>(&file.path, OnMalformed::Skip)
            .unwrap();
        assert_names_line_4(&rows.count().unwrap_err().to_string(), &file);
    }
}

#[test]
fn text_blocks_fail_on_a_line_past_the_limit_naming_file_and_byte() {
    let _one = one_at_a_time();
    let file = over_the_limit("blocks");
    let at = 6 + (10 << 20) + 1 + 6; // "first\n", the hole and its newline, "third\n"
    let want = format!(
        "{}: the line at byte {at} is longer than the {MAX_LINE_BYTES}-byte line limit",
        file.name()
    );
    for (partitions, block) in [(1, 4u64 << 20), (32, 1 << 20)] {
        let e = session(partitions)
            .text_blocks(&file.path, block)
            .unwrap()
            .count()
            .unwrap_err()
            .to_string();
        assert!(e.contains(&want), "{e}\nshould contain: {want}");
    }
}

/// A line of exactly `MAX_LINE_BYTES` bytes before its newline is taken by every reader
/// (and by text_file at the end of a file without a newline).
#[test]
fn a_line_of_exactly_the_limit_is_read_by_every_reader() {
    use Line::{Hole, Text};
    let _one = one_at_a_time();
    let file = Sparse::new("limit", &[Text("first"), Hole(MAX_LINE_BYTES), Text("last")], true);
    let s = session(4);
    assert_eq!(s.text_file(&file.path).unwrap().count().unwrap(), 3, "text_file");
    let csv = s.read_csv::<Vec<String>>(&file.path, false, OnMalformed::Fail).unwrap();
    assert_eq!(csv.count().unwrap(), 3, "read_csv");
    // The NUL line is no JSON: skipped and counted, not refused for its length.
    let json = s.read_json_lines::<serde_json::Value>(&file.path, OnMalformed::Skip).unwrap();
    assert_eq!(json.count().unwrap(), 0, "read_json_lines");
    assert_eq!(s.skipped_rows().unwrap(), 3, "read_json_lines skipped");
    let blocks = s
        .text_blocks(&file.path, 1 << 20)
        .unwrap()
        .map(|b: String| b.matches('\n').count())
        .collect()
        .unwrap()
        .unwrap();
    assert_eq!(blocks.iter().sum::<usize>(), 3, "text_blocks");
    // Without a final newline.
    let file = Sparse::new("limit-end", &[Text("first"), Hole(MAX_LINE_BYTES)], false);
    assert_eq!(
        session(4).text_file(&file.path).unwrap().count().unwrap(),
        2,
        "text_file, no final newline"
    );
}

/// Bytes read so far (`rchar`) by this thread, or by the whole process; `None` without
/// the kernel's per-task I/O counters.
fn bytes_read(of: &str) -> Option<u64> {
    let io = std::fs::read_to_string(format!("/proc/{of}/io")).ok()?;
    io.lines().find_map(|l| l.strip_prefix("rchar:")).and_then(|v| v.trim().parse().ok())
}

/// One 64 MiB line between short ones.
fn one_long_line(tag: &str) -> Sparse {
    use Line::{Hole, Text};
    Sparse::new(tag, &[Text("a b"), Hole(64 << 20), Text("c"), Text(""), Text("d")], false)
}

#[test]
fn text_blocks_read_a_long_line_in_small_blocks_in_linear_work() {
    let _one = one_at_a_time();
    if bytes_read("thread-self").is_none() {
        eprintln!("skipped: no /proc/thread-self/io");
        return;
    }
    let file = one_long_line("linear-blocks");
    let block = 64 << 10;
    let blocks = TextBlocks::new(&file.path, block).unwrap();
    assert!(blocks.count() >= 1024);
    let before = bytes_read("thread-self").unwrap();
    let mut lines = 0;
    let mut total = 0u64;
    for j in 0..blocks.count() {
        let b = blocks.read(j).unwrap();
        lines += b.iter().filter(|&&c| c == b'\n').count();
        total += b.len() as u64;
    }
    let read = bytes_read("thread-self").unwrap() - before;
    assert_eq!((lines, total), (5, file.len + 1));
    // The line once whole, each block's own bytes once, and a read buffer per block.
    let bound = 2 * file.len + blocks.count() * (2 * (64 << 10));
    assert!(
        read <= bound,
        "read {read} bytes of a {}-byte file in {} blocks (bound {bound})",
        file.len,
        blocks.count()
    );
}

#[test]
fn text_file_reads_a_long_line_in_many_partitions_in_linear_work() {
    let _one = one_at_a_time();
    if bytes_read("self").is_none() {
        eprintln!("skipped: no /proc/self/io");
        return;
    }
    let file = one_long_line("linear-lines");
    let partitions = 256;
    let s = session(partitions);
    let lines = s.text_file(&file.path).unwrap();
    let before = bytes_read("self").unwrap();
    assert_eq!(lines.count().unwrap(), 5);
    let read = bytes_read("self").unwrap() - before;
    let bound = 2 * file.len + u64::from(partitions) * (2 * (64 << 10)) + (4 << 20);
    assert!(
        read <= bound,
        "read {read} bytes of a {}-byte file in {partitions} partitions (bound {bound})",
        file.len
    );
}
