//! Output directories as Spark's save modes treat them: a directory that holds files is
//! refused by default, replaced with `overwrite`, added to with `append`; parts appear with
//! `_SUCCESS` only when every worker wrote its own, and a failed write leaves nothing that
//! looks like output.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::on_workers;
use heddle_data::{Output, WriteMode, SUCCESS};

fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    n.sort();
    n
}

fn lines(dir: &Path) -> Vec<String> {
    let mut all: Vec<String> = names(dir)
        .iter()
        .filter(|n| n.starts_with("part-"))
        .flat_map(|n| {
            std::fs::read_to_string(dir.join(n))
                .unwrap()
                .lines()
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort();
    all
}

fn numbers(r: std::ops::Range<u64>) -> Vec<String> {
    let mut v: Vec<String> = r.map(|x| x.to_string()).collect();
    v.sort();
    v
}

#[test]
fn modes_refuse_replace_and_append_on_every_worker() {
    for n in [1, 3] {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("heddle-write-modes-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        on_workers(n, |s| s.range(0, 50).write_text(&dir).unwrap());
        assert_eq!(lines(&dir), numbers(0..50));
        assert!(dir.join(SUCCESS).exists());
        std::fs::write(dir.join("notes.txt"), "kept").unwrap();
        let before = names(&dir);

        // Refused by default, on every worker, naming the directory; nothing changes.
        for e in on_workers(n, |s| s.range(0, 7).write_text(&dir).unwrap_err().to_string()) {
            assert!(
                e.contains(&dir.display().to_string()) && e.contains("overwrite or append"),
                "{e}"
            );
        }
        assert_eq!(names(&dir), before);

        // Overwrite: the old parts and marker go, other files stay.
        on_workers(n, |s| {
            s.range(100, 107).write_text(Output::new(&dir).mode(WriteMode::Overwrite)).unwrap()
        });
        assert_eq!(lines(&dir), numbers(100..107));
        assert!(dir.join("notes.txt").exists() && dir.join(SUCCESS).exists());

        // Append: new parts beside the old ones, no name reused.
        let old: Vec<String> = names(&dir).into_iter().filter(|x| x.starts_with("part-")).collect();
        on_workers(n, |s| {
            s.range(200, 230).write_json_lines(Output::new(&dir).mode(WriteMode::Append)).unwrap()
        });
        let now: Vec<String> = names(&dir).into_iter().filter(|x| x.starts_with("part-")).collect();
        assert!(
            old.iter().all(|o| now.contains(o)) && now.len() == old.len() + n,
            "{old:?} -> {now:?}"
        );
        let mut want = numbers(100..107);
        want.extend(numbers(200..230));
        want.sort();
        assert_eq!(lines(&dir), want);
        assert!(!names(&dir).iter().any(|x| x.starts_with("_temporary")), "{:?}", names(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn a_failed_write_leaves_no_output_that_looks_complete() {
    for n in [1, 3] {
        let dir: PathBuf =
            std::env::temp_dir().join(format!("heddle-write-failed-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // A CSV row cannot hold a map: record 33 fails, on whichever worker holds it.
        let errors = on_workers(n, |s| {
            s.range(0, 60)
                .map(|x| if x == 33 { vec![BTreeMap::from([(x, x)])] } else { Vec::new() })
                .write_csv(&dir)
                .unwrap_err()
                .to_string()
        });
        assert!(errors.iter().all(|e| !e.is_empty()));
        let left = if dir.exists() { names(&dir) } else { Vec::new() };
        assert!(left.is_empty(), "{n} workers: a failed write left {left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
