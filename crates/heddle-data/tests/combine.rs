//! `text_blocks` and `flat_map_reduce_by_key` against plain computations: every line in
//! exactly one block, and fused counts equal to a plain count (skewed and unicode keys,
//! empty input, owned and borrowed keys, 1-4 workers, 1 and 2 executor threads).

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use common::{on_workers, on_workers_with};

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-data-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Lines with skewed, unicode words: one word holds about half of them.
fn text(lines: usize, seed: u64) -> String {
    let mut x = seed | 1;
    let mut out = String::new();
    for i in 0..lines {
        let words: Vec<String> = (0..(i % 9))
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match x % 4 {
                    0 | 1 => "the".to_string(),
                    2 => format!("κόσμε{}", x % 13),
                    _ => format!("w{}🌍", x % 101),
                }
            })
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

fn plain_count(texts: &[&str]) -> BTreeMap<String, u64> {
    let mut want = BTreeMap::new();
    for t in texts {
        for w in t.split_ascii_whitespace() {
            *want.entry(w.to_string()).or_default() += 1;
        }
    }
    want
}

#[test]
fn text_blocks_hold_every_line_once_whatever_the_block_size() {
    let dir = temp_dir("blocks");
    let (a, b) = (text(3000, 7), "no final newline\nκόσμε 🌍".to_string());
    std::fs::write(dir.join("a.txt"), &a).unwrap();
    std::fs::write(dir.join("b.txt"), &b).unwrap();
    std::fs::write(dir.join("c.txt"), "").unwrap();
    let want: Vec<String> =
        [a.as_str(), b.as_str()].iter().flat_map(|t| t.lines().map(String::from)).collect();
    for block in [1u64, 7, 4096, 1 << 20] {
        for n in 1..=3 {
            let got = on_workers(n, |s| s.text_blocks(&dir, block).unwrap().collect_all().unwrap());
            for blocks in got {
                assert!(
                    blocks.iter().all(|b| b.ends_with('\n') && !b.is_empty()),
                    "blocks of whole lines"
                );
                let lines: Vec<String> =
                    blocks.iter().flat_map(|b| b.lines().map(String::from)).collect();
                assert_eq!(lines, want, "block {block}, {n} workers: every line once, in order");
            }
        }
    }
    on_workers(1, |s| {
        let e = s.text_blocks(&dir, 0).unwrap_err().to_string();
        assert!(e.contains("block_bytes must be at least 1"), "{e}");
        let e = s.text_blocks(dir.join("*.none"), 64).unwrap_err().to_string();
        assert!(e.contains("names no readable file"), "{e}");
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fused_counts_match_a_plain_count() {
    let dir = temp_dir("fused");
    let (a, b) = (text(5000, 11), text(700, 3));
    std::fs::write(dir.join("a.txt"), &a).unwrap();
    std::fs::write(dir.join("b.txt"), &b).unwrap();
    let want = plain_count(&[&a, &b]);
    for threads in [1usize, 2] {
        for n in 1..=4 {
            let got = on_workers_with(n, threads, |s| {
                // Borrowed keys from blocks; owned keys from lines: the same counts.
                let borrowed = s.text_blocks(&dir, 4096).unwrap().flat_map_reduce_by_key(
                    |block: String, c| block.split_ascii_whitespace().for_each(|w| c.add(w, 1u64)),
                    |x, y| x + y,
                );
                let owned = s.text_file(&dir).unwrap().flat_map_reduce_by_key(
                    |line: String, c| {
                        line.split_ascii_whitespace().for_each(|w| c.add_owned(w.to_string(), 1u64))
                    },
                    |x, y| x + y,
                );
                (borrowed.collect().unwrap(), owned.collect().unwrap())
            });
            let (borrowed, owned) = got.into_iter().next().unwrap();
            let borrowed: BTreeMap<String, u64> = borrowed.unwrap().into_iter().collect();
            let owned: BTreeMap<String, u64> = owned.unwrap().into_iter().collect();
            assert_eq!(borrowed, want, "{n} workers, {threads} threads, borrowed keys");
            assert_eq!(owned, want, "{n} workers, {threads} threads, owned keys");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn fused_reduction_of_empty_input_is_empty() {
    let got = on_workers(2, |s| {
        s.from_vec(Vec::<String>::new())
            .flat_map_reduce_by_key(
                |l: String, c| l.split(' ').for_each(|w| c.add(w, 1u64)),
                |x, y| x + y,
            )
            .collect_all()
            .unwrap()
    });
    assert!(got.iter().all(Vec::is_empty));
}
