//! Every range reader is exact on every split boundary: for random files (empty lines, CRLF,
//! no final newline, lines longer than the block, several files in a row), any number of
//! partitions and any block size, the partitions' records in order equal one sequential
//! reading of the files. And the external sort's run reader (heddle_comm's spill runs,
//! read back through a 64 KiB buffer) returns every record it wrote, whatever their sizes.

use std::path::{Path, PathBuf};

use heddle_data::{OnMalformed, Session};
use heddle_dataflow::spill::{SpillConfig, SpillSorter};
use proptest::prelude::*;

/// One line: a few tokens, or one long run, or nothing; its terminator.
fn line() -> impl Strategy<Value = (String, &'static str)> {
    let token = prop_oneof![
        4 => "[a-z0-9]{1,6}".prop_map(String::from),
        1 => "[a-z]{500,3000}".prop_map(String::from), // longer than small blocks
    ];
    let text = prop_oneof![
        1 => Just(String::new()),
        6 => prop::collection::vec(token, 1..5).prop_map(|t| t.join(",")),
    ];
    (text, prop_oneof![Just("\n"), Just("\r\n")])
}

/// A file's lines and whether the last one ends with its terminator.
fn file() -> impl Strategy<Value = (Vec<(String, &'static str)>, bool)> {
    (prop::collection::vec(line(), 0..40), any::<bool>())
}

fn render((lines, final_newline): &(Vec<(String, &'static str)>, bool)) -> String {
    let mut s = String::new();
    for (i, (text, end)) in lines.iter().enumerate() {
        s.push_str(text);
        if i + 1 < lines.len() || *final_newline {
            s.push_str(end);
        }
    }
    s
}

/// The lines of `content` as a sequential reader sees them (terminators removed).
fn sequential_lines(content: &str) -> Vec<String> {
    if content.is_empty() {
        return Vec::new();
    }
    let body = content.strip_suffix('\n').unwrap_or(content);
    body.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect()
}

fn session(partitions: u32) -> Session {
    let comm = heddle_comm::solo(heddle_comm::CommConfig::default()).expect("a world of one");
    Session::new(comm).and_then(|s| s.with_partitions(partitions)).expect("a session")
}

struct Files {
    dir: PathBuf,
    contents: Vec<String>,
}

impl Files {
    fn write(tag: &str, files: &[(Vec<(String, &'static str)>, bool)]) -> Files {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("heddle-props-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let contents: Vec<String> = files.iter().map(render).collect();
        for (i, c) in contents.iter().enumerate() {
            std::fs::write(dir.join(format!("part-{i:03}.txt")), c).unwrap();
        }
        Files { dir, contents }
    }

    fn all(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn text_file_partitions_equal_a_sequential_read(
        files in prop::collection::vec(file(), 1..4),
        partitions in 1u32..8,
    ) {
        let f = Files::write("lines", &files);
        let want: Vec<String> = f.contents.iter().flat_map(|c| sequential_lines(c)).collect();
        let got = session(partitions).text_file(f.all()).unwrap().collect().unwrap().unwrap();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn text_blocks_hold_every_line_once_for_any_block_size(
        files in prop::collection::vec(file(), 1..4),
        partitions in 1u32..8,
        block in prop_oneof![1u64..64, 64u64..4096, Just(2u64 << 20)],
    ) {
        let f = Files::write("blocks", &files);
        // Each file's lines, each ending with a newline (CR kept: blocks are raw lines).
        let want: String = f
            .contents
            .iter()
            .filter(|c| !c.is_empty())
            .map(|c| if c.ends_with('\n') { c.clone() } else { format!("{c}\n") })
            .collect();
        let blocks =
            session(partitions).text_blocks(f.all(), block).unwrap().collect().unwrap().unwrap();
        prop_assert!(blocks.iter().all(|b| b.ends_with('\n') && !b.is_empty()));
        prop_assert_eq!(blocks.concat(), want);
    }

    #[test]
    fn json_lines_partitions_equal_a_sequential_parse(
        files in prop::collection::vec(file(), 1..4),
        partitions in 1u32..8,
    ) {
        // Every non-blank line as a JSON string (the reader skips blank lines).
        let as_json: Vec<(Vec<(String, &'static str)>, bool)> = files
            .iter()
            .map(|(lines, fin)| {
                let quoted = lines
                    .iter()
                    .map(|(t, e)| (if t.is_empty() { String::new() } else { format!("{t:?}") }, *e))
                    .collect();
                (quoted, *fin)
            })
            .collect();
        let f = Files::write("json", &as_json);
        let want: Vec<String> = f
            .contents
            .iter()
            .flat_map(|c| sequential_lines(c))
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(&l).unwrap())
            .collect();
        let got = session(partitions)
            .read_json_lines::<String>(f.all(), OnMalformed::Fail)
            .unwrap()
            .collect()
            .unwrap()
            .unwrap();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn csv_partitions_equal_a_sequential_parse(
        files in prop::collection::vec(file(), 1..4),
        partitions in 1u32..8,
    ) {
        let f = Files::write("csv", &files);
        let rows: Vec<Vec<String>> = f
            .contents
            .iter()
            .flat_map(|c| sequential_lines(c))
            .filter(|l| !l.is_empty())
            .map(|l| l.split(',').map(String::from).collect())
            .collect();
        // Rows as wide as the first file's first line; the others are skipped and counted.
        let width = f
            .contents
            .iter()
            .find(|c| !c.is_empty())
            .map(|c| sequential_lines(c)[0].split(',').count());
        let first_is_blank = f
            .contents
            .first()
            .is_none_or(|c| sequential_lines(c).first().is_none_or(|l| l.is_empty()));
        let s = session(partitions);
        let got = s
            .read_csv::<Vec<String>>(f.all(), false, OnMalformed::Skip)
            .unwrap()
            .collect()
            .unwrap()
            .unwrap();
        if !first_is_blank {
            let want: Vec<Vec<String>> =
                rows.iter().filter(|r| Some(r.len()) == width).cloned().collect();
            prop_assert_eq!(s.skipped_rows().unwrap() as usize, rows.len() - want.len());
            prop_assert_eq!(got, want);
        }
    }
}

/// A length for a key or value: mostly small, some about the run reader's 64 KiB buffer
/// (so that records straddle its refills), some far past it.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        6 => 0usize..16,
        1 => (64usize << 10) - 16..(64 << 10) + 16,
        1 => 16usize..(64 << 10),
        1 => (64usize << 10)..(300 << 10),
    ]
}

/// `len` bytes made from `seed` (cheap to make however long).
fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| seed.wrapping_add((i % 251) as u8)).collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Records of any sizes (empty, around and past the read buffer) pushed with any
    /// budget (one run per record up to none spilled, past 64 runs: merged in passes)
    /// come back as std's stable sort of them: each run reads back what it wrote.
    #[test]
    fn spill_runs_read_back_every_record(
        shape in prop::collection::vec(
            (prop_oneof![4 => 0usize..3, 1 => size()], 0u8..3, size(), any::<u8>()),
            0..100,
        ),
        budget in prop_oneof![Just(1usize), 1usize..4096, 4096usize..(4 << 20)],
    ) {
        // Keys of few distinct bytes (equal keys and prefixes); values carry their index.
        let records: Vec<(Vec<u8>, Vec<u8>)> = shape
            .iter()
            .enumerate()
            .map(|(i, &(klen, k, vlen, v))| {
                (vec![k; klen], [(i as u32).to_le_bytes().to_vec(), bytes(vlen, v)].concat())
            })
            .collect();
        let dir = std::env::temp_dir().join(format!("heddle-props-spill-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = SpillConfig { dirs: vec![dir.clone()], budget_bytes: budget };
        let mut sorter = SpillSorter::new(config, None).unwrap();
        for (k, v) in &records {
            sorter.push_slices(k, v).unwrap();
        }
        let runs = sorter.runs();
        let got: Vec<(Vec<u8>, Vec<u8>)> =
            sorter.finish().unwrap().collect::<Result<_, _>>().unwrap();
        let mut want = records.clone();
        want.sort_by(|a, b| a.0.cmp(&b.0));
        let _ = std::fs::remove_dir(&dir); // empty again: the runs went with the stream
        prop_assert!(
            budget > 1 || runs + 1 >= records.len(),
            "{} runs of {} records",
            runs,
            records.len()
        );
        prop_assert_eq!(got.len(), want.len());
        prop_assert!(got == want, "the merged runs differ from a stable sort");
    }
}
