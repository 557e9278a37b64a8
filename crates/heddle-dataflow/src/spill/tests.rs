//! Unit tests of the spill sorter that look inside it: run file bytes, multi-pass
//! merges, damaged runs.

use super::buffer::RECORD_OVERHEAD;
use super::run_file::{RunReader, FILE_PREFIX};
use super::{RunStore, SpillConfig, SpillSorter};
use crate::Result;
use std::fs;
use std::path::{Path, PathBuf};

/// A fresh directory, removed with its contents on drop (also when a test fails).
struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn scratch(name: &str) -> Scratch {
    use std::time::{SystemTime, UNIX_EPOCH};
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir()
        .join(format!("heddle-spill-unit-{name}-{}-{nanos}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

fn sorter(dir: &Path, budget_bytes: usize) -> SpillSorter {
    SpillSorter::new(SpillConfig { dirs: vec![dir.to_path_buf()], budget_bytes }, None).unwrap()
}

/// Pushes 40 records over 4 keys with a budget that spills every two records.
fn filled(dir: &Path) -> SpillSorter {
    let mut s = sorter(dir, 2 * (RECORD_OVERHEAD + 2));
    for i in 0..40u8 {
        s.push(vec![b'a' + i % 4], vec![i]).unwrap();
    }
    s
}

fn expected() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut all: Vec<_> = (0..40u8).map(|i| (vec![b'a' + i % 4], vec![i])).collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

#[test]
fn run_file_golden_bytes() {
    let dir = scratch("golden");
    let mut store = RunStore::new(vec![dir.to_path_buf()]).unwrap();
    let mut writer = store.writer().unwrap();
    writer.push(b"k", b"vv").unwrap();
    let (run, bytes) = writer.finish().unwrap();
    let want: &[u8] = &[
        b'H', b'S', b'P', b'L', 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, // header
        1, 0, 0, 0, 2, 0, 0, 0, b'k', b'v', b'v', // record
    ];
    assert_eq!(fs::read(&run.path).unwrap(), want);
    assert_eq!(bytes, want.len() as u64);
    let mut reader = RunReader::open(run).unwrap();
    assert_eq!(reader.next_record().unwrap(), Some((b"k".to_vec(), b"vv".to_vec())));
    assert_eq!(reader.next_record().unwrap(), None);
    drop((reader, store));
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    fs::remove_dir(&dir).unwrap();
}

#[test]
fn multi_pass_merge_is_stable() {
    let dir = scratch("passes");
    let s = filled(&dir);
    assert!(s.runs() >= 10, "{} runs", s.runs());
    let out: Vec<_> = s.finish_with_width(3).unwrap().collect::<Result<_>>().unwrap();
    assert_eq!(out, expected());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    fs::remove_dir(&dir).unwrap();
}

/// Every truncation of a run file and a few corruptions give an error naming the file.
#[test]
fn damaged_run_is_an_error_not_a_panic() {
    let dir = scratch("damaged");
    let s = filled(&dir);
    let path = s.runs[1].path.clone();
    let good = fs::read(&path).unwrap();
    let mut damaged: Vec<Vec<u8>> = (0..good.len()).map(|n| good[..n].to_vec()).collect();
    let mut huge = good.clone();
    huge[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    damaged.push(huge);
    let mut magic = good.clone();
    magic[0] = b'X';
    damaged.push(magic);
    let mut trailing = good.clone();
    trailing.push(0);
    damaged.push(trailing);
    drop(s);
    for bytes in damaged {
        let s = filled(&dir);
        fs::write(&s.runs[1].path, &bytes).unwrap();
        let err = match s.finish() {
            Err(e) => e,
            Ok(records) => records.filter_map(|r| r.err()).next().expect("damage went unnoticed"),
        };
        let message = err.to_string();
        assert!(
            message.contains("reading spill run") && message.contains(&*dir.to_string_lossy()),
            "{message}"
        );
        assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    }
    assert!(path.to_string_lossy().contains(FILE_PREFIX));
    fs::remove_dir(&dir).unwrap();
}

/// A run damaged while being merged ends the stream with one error.
#[test]
fn error_ends_the_stream_and_removes_files() {
    let dir = scratch("fused");
    let mut s = sorter(&dir, 1000);
    s.push(b"a".to_vec(), vec![1]).unwrap();
    s.push(b"a".to_vec(), vec![2; 200 << 10]).unwrap(); // larger than the read buffer
    s.push(b"b".to_vec(), vec![3]).unwrap();
    assert_eq!(s.runs(), 1);
    let path = s.runs[0].path.clone();
    let mut records = s.finish().unwrap();
    fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(100).unwrap();
    let results: Vec<_> = records.by_ref().collect();
    assert_eq!(results.iter().filter(|r| r.is_err()).count(), 1);
    let err = results.last().unwrap().as_ref().unwrap_err().to_string();
    assert!(err.contains(&*path.to_string_lossy()), "{err}");
    assert!(records.next().is_none());
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 0);
    fs::remove_dir(&dir).unwrap();
}

/// Twelve megabytes of records, sorted in memory: the buffer fills small chunks, then
/// mapped 2 MiB ones (huge pages where allowed), and also spilled runs of such chunks
/// reused; either way every record comes back once, in key order, ties in push order.
#[test]
fn records_in_mapped_chunks_sort_like_a_stable_sort() {
    let dir = scratch("mapped");
    let records: Vec<(Vec<u8>, Vec<u8>)> = (0..120_000u64)
        .map(|i| {
            let key = (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40).to_be_bytes().to_vec();
            (key, [i.to_le_bytes().as_slice(), &[7u8; 92]].concat())
        })
        .collect();
    let mut want = records.clone();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    for budget in [64 << 20, 5 << 20] {
        let mut s = sorter(&dir, budget);
        for (k, v) in &records {
            s.push_slices(k, v).unwrap();
        }
        assert_eq!(s.runs() > 0, budget < 64 << 20, "runs with a {budget}-byte budget");
        let got: Vec<_> = s.finish().unwrap().map(Result::unwrap).collect();
        assert!(got == want, "{budget}-byte budget: records out of order or lost");
    }
}
