//! External sort with disk spill: order and stability against `std`'s stable sort, and cleanup.

use std::cmp::Ordering;
use std::fs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use heddle_dataflow::spill::{KeyOrder, SpillConfig, SpillSorter, MERGE_WIDTH};
use heddle_dataflow::Error;

type Record = (Vec<u8>, Vec<u8>);

/// A fresh directory under the system temp directory, removed with its contents on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir()
            .join(format!("heddle-spill-test-{name}-{}-{nanos}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// Spill files currently in the directory's private scratch directories (an empty
    /// scratch directory counts as one: it should be gone with its last run).
    fn spill_files(&self) -> usize {
        let mut runs = 0;
        for entry in fs::read_dir(&self.0).unwrap() {
            let entry = entry.unwrap();
            if !entry.file_name().to_string_lossy().starts_with("heddle-scratch-") {
                continue;
            }
            runs += fs::read_dir(entry.path())
                .unwrap()
                .filter(|e| {
                    e.as_ref().unwrap().file_name().to_string_lossy().starts_with("heddle-spill-")
                })
                .count()
                .max(1);
        }
        runs
    }

    fn config(&self, budget_bytes: usize) -> SpillConfig {
        SpillConfig { dirs: vec![self.0.clone()], budget_bytes }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// xorshift64: deterministic test data without a dependency.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `n` records over about `distinct` keys of 0..12 bytes (prefixes of each other included);
/// each value starts with its push index so stability is visible.
fn random_records(seed: u64, n: usize, distinct: u64) -> Vec<Record> {
    let mut rng = XorShift(seed);
    (0..n)
        .map(|i| {
            let k = rng.below(distinct);
            let key: Vec<u8> = (0..k % 13)
                .map(|j| (k.wrapping_mul(31).wrapping_add(j) % 5) as u8 + b'a')
                .collect();
            let mut value = (i as u64).to_be_bytes().to_vec();
            value.extend((0..rng.below(40)).map(|_| rng.next() as u8));
            (key, value)
        })
        .collect()
}

/// The independent reference: `std`'s stable sort.
fn reference(records: &[Record], order: impl Fn(&[u8], &[u8]) -> Ordering) -> Vec<Record> {
    let mut sorted = records.to_vec();
    sorted.sort_by(|a, b| order(&a.0, &b.0));
    sorted
}

fn fill(config: SpillConfig, order: Option<KeyOrder>, records: &[Record]) -> SpillSorter {
    let mut sorter = SpillSorter::new(config, order).unwrap();
    for (key, value) in records {
        sorter.push(key.clone(), value.clone()).unwrap();
    }
    assert_eq!(sorter.len(), records.len() as u64);
    sorter
}

fn drain(sorter: SpillSorter) -> Vec<Record> {
    sorter.finish().unwrap().collect::<Result<_, _>>().unwrap()
}

#[test]
fn sorter_and_streams_can_move_between_threads() {
    fn send<T: Send>() {}
    send::<SpillSorter>();
    send::<heddle_dataflow::spill::SortedRecords>();
    send::<heddle_dataflow::spill::GroupedRecords>();
}

#[test]
fn within_budget_nothing_spills_and_order_matches_std() {
    let scratch = Scratch::new("no-spill");
    let records = random_records(1, 5_000, 300);
    let sorter = fill(scratch.config(64 << 20), None, &records);
    assert_eq!((sorter.runs(), sorter.spilled_bytes()), (0, 0));
    assert_eq!(scratch.spill_files(), 0);
    assert_eq!(drain(sorter), reference(&records, |a, b| a.cmp(b)));
}

#[test]
fn tiny_budget_spills_many_runs_and_order_matches_std() {
    let scratch = Scratch::new("many-runs");
    let records = random_records(2, 20_000, 500);
    let sorter = fill(scratch.config(4 << 10), None, &records);
    // More runs than one merge takes, so intermediate merge passes run too.
    assert!(sorter.runs() > MERGE_WIDTH, "{} runs", sorter.runs());
    assert!(sorter.spilled_bytes() > 0);
    assert_eq!(scratch.spill_files(), sorter.runs());
    assert_eq!(drain(sorter), reference(&records, |a, b| a.cmp(b)));
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn budget_sweep_gives_identical_results() {
    let scratch = Scratch::new("sweep");
    let records = random_records(3, 3_000, 50);
    let want = reference(&records, |a, b| a.cmp(b));
    for budget in [0, 100, 1 << 10, 16 << 10, 1 << 20] {
        let sorter = fill(scratch.config(budget), None, &records);
        if budget == 0 {
            assert_eq!(sorter.runs(), records.len());
        }
        assert_eq!(drain(sorter), want, "budget {budget}");
        assert_eq!(scratch.spill_files(), 0);
    }
}

#[test]
fn custom_order_descending_big_endian_u64() {
    let scratch = Scratch::new("custom");
    let mut rng = XorShift(4);
    let records: Vec<Record> = (0..10_000u64)
        .map(|i| (rng.below(1_000).to_be_bytes().to_vec(), i.to_le_bytes().to_vec()))
        .collect();
    let decode = |k: &[u8]| u64::from_be_bytes(k.try_into().unwrap());
    let descending: KeyOrder = Arc::new(move |a, b| decode(b).cmp(&decode(a)));
    let sorter = fill(scratch.config(8 << 10), Some(descending.clone()), &records);
    assert!(sorter.runs() > 5, "{} runs", sorter.runs());
    let got = drain(sorter);
    assert_eq!(got, reference(&records, |a, b| descending(a, b)));
    assert_eq!(decode(&got[0].0), 999);
}

#[test]
fn group_by_key_yields_every_value_in_push_order() {
    let scratch = Scratch::new("group");
    let records = random_records(5, 8_000, 200);
    let sorter = fill(scratch.config(2 << 10), None, &records);
    assert!(sorter.runs() > 5);
    let groups: Vec<(Vec<u8>, Vec<Vec<u8>>)> =
        sorter.finish().unwrap().group_by_key().collect::<Result<_, _>>().unwrap();
    let mut want: Vec<(Vec<u8>, Vec<Vec<u8>>)> = Vec::new();
    for (key, value) in reference(&records, |a, b| a.cmp(b)) {
        match want.last_mut() {
            Some((k, values)) if *k == key => values.push(value),
            _ => want.push((key, vec![value])),
        }
    }
    assert_eq!(groups, want);
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn empty_input_yields_nothing() {
    let scratch = Scratch::new("empty");
    let sorter = SpillSorter::new(scratch.config(0), None).unwrap();
    assert!(sorter.is_empty());
    assert_eq!((sorter.len(), sorter.runs(), sorter.spilled_bytes()), (0, 0, 0));
    let mut records = sorter.finish().unwrap();
    assert!(records.next().is_none());
    let sorter = SpillSorter::new(scratch.config(0), None).unwrap();
    assert_eq!(sorter.finish().unwrap().group_by_key().count(), 0);
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn record_larger_than_budget_is_spilled_alone() {
    let scratch = Scratch::new("huge");
    let huge: Record = (b"m".to_vec(), (0..3 << 20).map(|i| (i % 251) as u8).collect());
    let records = vec![(b"z".to_vec(), vec![1]), huge.clone(), (b"a".to_vec(), vec![2])];
    let sorter = fill(scratch.config(1 << 10), None, &records);
    assert_eq!(sorter.runs(), 1);
    assert!(sorter.spilled_bytes() > 3 << 20);
    assert_eq!(drain(sorter), reference(&records, |a, b| a.cmp(b)));
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn files_removed_when_stream_dropped_half_way() {
    let scratch = Scratch::new("half");
    let records = random_records(6, 5_000, 100);
    let sorter = fill(scratch.config(4 << 10), None, &records);
    assert!(sorter.runs() > 5);
    let mut stream = sorter.finish().unwrap();
    for record in stream.by_ref().take(records.len() / 2) {
        record.unwrap();
    }
    assert!(scratch.spill_files() > 0);
    drop(stream);
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn files_removed_when_sorter_dropped_without_finish() {
    let scratch = Scratch::new("unfinished");
    let sorter = fill(scratch.config(4 << 10), None, &random_records(7, 2_000, 100));
    assert!(sorter.runs() > 5);
    assert_eq!(scratch.spill_files(), sorter.runs());
    drop(sorter);
    assert_eq!(scratch.spill_files(), 0);
}

#[test]
fn runs_alternate_between_directories() {
    let (first, second) = (Scratch::new("dir-a"), Scratch::new("dir-b"));
    let config =
        SpillConfig { dirs: vec![first.0.clone(), second.0.clone()], budget_bytes: 4 << 10 };
    let records = random_records(8, 2_000, 100);
    let sorter = fill(config, None, &records);
    let runs = sorter.runs();
    assert!(runs > 5);
    assert_eq!((first.spill_files(), second.spill_files()), (runs.div_ceil(2), runs / 2));
    assert_eq!(drain(sorter), reference(&records, |a, b| a.cmp(b)));
    assert_eq!((first.spill_files(), second.spill_files()), (0, 0));
}

fn error_of(dirs: Vec<PathBuf>) -> Error {
    SpillSorter::new(SpillConfig { dirs, budget_bytes: 1 }, None).unwrap_err()
}

#[test]
fn missing_directory_is_an_error_naming_it() {
    let scratch = Scratch::new("missing");
    let missing = scratch.0.join("not-there");
    let message = error_of(vec![scratch.0.clone(), missing.clone()]).to_string();
    assert!(
        message.contains(&*missing.to_string_lossy()) && message.contains("SpillConfig::dirs"),
        "{message}"
    );
}

#[test]
fn file_in_place_of_directory_is_an_error_naming_it() {
    let scratch = Scratch::new("file");
    let file = scratch.0.join("plain-file");
    fs::write(&file, b"x").unwrap();
    let error = error_of(vec![file.clone()]);
    assert!(matches!(error, Error::InvalidArgument(_)));
    assert!(error.to_string().contains(&*file.to_string_lossy()), "{error}");
}

#[test]
fn no_directory_is_invalid_argument() {
    assert!(matches!(error_of(Vec::new()), Error::InvalidArgument(_)));
}

/// A directory this process cannot create files in: a read-only one when not privileged,
/// else a kernel file system.
fn unwritable_dir(scratch: &Scratch) -> Option<PathBuf> {
    let read_only = scratch.0.join("read-only");
    fs::create_dir(&read_only).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(&read_only, fs::Permissions::from_mode(0o555)).unwrap();
    }
    [read_only, PathBuf::from("/sys"), PathBuf::from("/proc")].into_iter().find(|dir| {
        let probe = dir.join(format!("heddle-spill-probe-{}", std::process::id()));
        match fs::File::create(&probe) {
            Ok(_) => {
                let _ = fs::remove_file(&probe);
                false
            }
            Err(_) => dir.is_dir(),
        }
    })
}

#[test]
fn unwritable_directory_is_an_error_naming_it() {
    let scratch = Scratch::new("unwritable");
    let Some(dir) = unwritable_dir(&scratch) else {
        eprintln!("skipped: every candidate directory is writable here");
        return;
    };
    let message = error_of(vec![dir.clone()]).to_string();
    assert!(
        message.contains(&*dir.to_string_lossy()) && message.contains("not writable"),
        "{message}"
    );
    assert_eq!(scratch.spill_files(), 0);
}
