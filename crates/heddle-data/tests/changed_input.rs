//! An input file that changes while a job reads it — appended to, truncated, rewritten in
//! place — fails the job with an error naming the file, instead of a result that mixes two
//! versions of it.

mod common;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::on_workers;
use heddle_data::OnMalformed;

#[derive(Debug, Clone, Copy)]
enum Change {
    Append,
    Truncate,
    Rewrite,
}

fn change(path: &Path, how: Change) {
    match how {
        Change::Append => std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap()
            .write_all(b"late line\n")
            .unwrap(),
        Change::Truncate => {
            std::fs::OpenOptions::new().write(true).open(path).unwrap().set_len(100).unwrap()
        }
        Change::Rewrite => {
            // The same size, other bytes, a later modification time.
            let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
            (&f).write_all(b"X").unwrap();
            f.set_modified(SystemTime::now() + Duration::from_secs(5)).unwrap();
        }
    }
}

fn input(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    let text: String = (0..20_000).map(|i| format!("{{\"line\": {i}}}\n")).collect();
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_file_changed_while_it_is_read_fails_the_job_naming_it() {
    let dir = std::env::temp_dir().join(format!("heddle-changed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for how in [Change::Append, Change::Truncate, Change::Rewrite] {
        for reader in ["text_file", "read_json_lines", "text_blocks"] {
            let path = input(&dir, &format!("{reader}-{how:?}.jsonl"));
            let errors = on_workers(1, |s| {
                let p = path.clone();
                // The first record read changes the file; the range's end notices.
                let first = std::sync::Once::new();
                let touch = move || first.call_once(|| change(&p, how));
                let result = match reader {
                    "text_file" => s
                        .text_file(&path)
                        .unwrap()
                        .map(move |l: String| {
                            touch();
                            l.len()
                        })
                        .count(),
                    "read_json_lines" => s
                        .read_json_lines::<serde_json::Value>(&path, OnMalformed::Skip)
                        .unwrap()
                        .map(move |v: serde_json::Value| {
                            touch();
                            v.to_string().len()
                        })
                        .count(),
                    // Small blocks: a source hands records on in batches, so most blocks are
                    // read after the change.
                    _ => s
                        .text_blocks(&path, 64)
                        .unwrap()
                        .map(move |b: String| {
                            touch();
                            b.len()
                        })
                        .count(),
                };
                result.map(|n| n.to_string()).unwrap_or_else(|e| e.to_string())
            });
            let e = &errors[0];
            assert!(
                e.contains(&format!("{}", path.display()))
                    && e.contains("changed while the job read it"),
                "{reader} {how:?}: {e}"
            );
        }
    }
    // An unchanged file still reads whole.
    let path = input(&dir, "steady.jsonl");
    for n in [1, 3] {
        for count in on_workers(n, |s| {
            s.read_json_lines::<serde_json::Value>(&path, OnMalformed::Fail)
                .unwrap()
                .count()
                .unwrap()
        }) {
            assert_eq!(count, 20_000);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
