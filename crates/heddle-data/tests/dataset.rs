//! Data sets on 1-4 workers (threads with in-process transports) against plain
//! computations of the same thing.

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use common::on_workers;
use heddle_data::OnMalformed;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-data-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A skewed draw of words: one word holds about half of them.
fn skewed_words(n: usize) -> Vec<String> {
    let mut x = 88172645463325252u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x.is_multiple_of(2) {
                "the".to_string()
            } else {
                format!("w{}", x % 97)
            }
        })
        .collect()
}

#[test]
fn word_count_matches_a_plain_count_on_1_to_4_workers() {
    let words = skewed_words(20_000);
    let lines: Vec<String> = words.chunks(7).map(|c| c.join(" ")).collect();
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for w in &words {
        *want.entry(w.clone()).or_default() += 1;
    }
    for n in 1..=4 {
        let results = on_workers(n, |s| {
            let counts = s
                .from_vec(lines.clone())
                .flat_map(|l| l.split(' ').map(|w| (w.to_string(), 1u64)).collect::<Vec<_>>())
                .reduce_by_key(|a, b| a + b);
            counts.collect().unwrap()
        });
        let got: BTreeMap<String, u64> = results[0].clone().unwrap().into_iter().collect();
        assert_eq!(got, want, "{n} workers");
        assert!(results[1..].iter().all(Option::is_none), "collect gives rank 0 the records");
    }
}

#[test]
fn element_wise_steps_actions_and_empty_inputs() {
    for n in [1, 3] {
        let r = on_workers(n, |s| {
            let xs = s.range(0, 1000);
            let evens = xs.filter(|x| x % 2 == 0).map(|x| x * 3);
            let pairs = xs.flat_map(|x| if x % 10 == 0 { vec![x, x] } else { vec![] });
            let parts = xs.map_partitions(|p| vec![p.len() as u64]);
            let empty = s.range(5, 5);
            (
                evens.count().unwrap(),
                evens.reduce(|a, b| a + b).unwrap(),
                pairs.collect_all().unwrap(),
                parts.collect_all().unwrap().iter().sum::<u64>(),
                empty.count().unwrap(),
                empty.reduce(|a, b| a + b).unwrap(),
                empty.collect_all().unwrap(),
                xs.union(&xs).count().unwrap(),
                xs.repartition().collect_all().unwrap().len(),
            )
        });
        for (count, sum, pairs, total, empty_count, empty_sum, empty_all, union, repart) in r {
            assert_eq!(count, 500);
            assert_eq!(sum, Some((0..1000).filter(|x| x % 2 == 0).map(|x| x * 3).sum()));
            assert_eq!(
                pairs,
                (0..1000).filter(|x| x % 10 == 0).flat_map(|x| [x, x]).collect::<Vec<_>>(),
                "collect keeps partition order"
            );
            assert_eq!(total, 1000);
            assert_eq!((empty_count, empty_sum, empty_all), (0, None, vec![]));
            assert_eq!(union, 2000);
            assert_eq!(repart, 1000);
        }
    }
}

#[test]
fn keyed_operations_and_joins_match_plain_ones() {
    let left: Vec<(u32, String)> = (0..300).map(|i| (i % 40, format!("l{i}"))).collect();
    let right: Vec<(u32, i64)> = (0..100i64).map(|i| ((i % 50 + 20) as u32, i)).collect();
    let r = on_workers(3, |s| {
        let (l, rr) = (s.from_vec(left.clone()), s.from_vec(right.clone()));
        let mut groups = l.group_by_key().collect_all().unwrap();
        for g in &mut groups {
            g.1.sort();
        }
        let sums = rr
            .aggregate_by_key(
                || (0i64, 0u32),
                |(s, c), v| (s + v, c + 1),
                |a, b| (a.0 + b.0, a.1 + b.1),
            )
            .collect_all()
            .unwrap();
        let inner = l.join(&rr).unwrap().collect_all().unwrap();
        let leftj = l.left_join(&rr).unwrap().collect_all().unwrap();
        let outer = l.full_outer_join(&rr).unwrap().collect_all().unwrap();
        let distinct = l.map(|(k, _)| k).distinct().collect_all().unwrap();
        (groups, sums, inner, leftj, outer, distinct)
    });
    let (groups, sums, inner, leftj, outer, distinct) = r.into_iter().next().unwrap();
    let mut want_groups: BTreeMap<u32, Vec<String>> = BTreeMap::new();
    for (k, v) in &left {
        want_groups.entry(*k).or_default().push(v.clone());
    }
    for g in want_groups.values_mut() {
        g.sort();
    }
    assert_eq!(groups.into_iter().collect::<BTreeMap<_, _>>(), want_groups);
    let mut want_sums: BTreeMap<u32, (i64, u32)> = BTreeMap::new();
    for (k, v) in &right {
        let e = want_sums.entry(*k).or_default();
        e.0 += v;
        e.1 += 1;
    }
    assert_eq!(sums.into_iter().collect::<BTreeMap<_, _>>(), want_sums);
    // Nested-loop references.
    let mut want_inner = vec![];
    let mut want_left = vec![];
    for (k, v) in &left {
        let matches: Vec<i64> = right.iter().filter(|(rk, _)| rk == k).map(|(_, w)| *w).collect();
        for w in &matches {
            want_inner.push((*k, (v.clone(), *w)));
            want_left.push((*k, (v.clone(), Some(*w))));
        }
        if matches.is_empty() {
            want_left.push((*k, (v.clone(), None)));
        }
    }
    let mut want_outer: Vec<(u32, (Option<String>, Option<i64>))> =
        want_left.iter().map(|(k, (v, w))| (*k, (Some(v.clone()), *w))).collect();
    for (k, w) in &right {
        if !left.iter().any(|(lk, _)| lk == k) {
            want_outer.push((*k, (None, Some(*w))));
        }
    }
    fn sorted<T: Ord>(mut v: Vec<T>) -> Vec<T> {
        v.sort();
        v
    }
    assert_eq!(sorted(inner), sorted(want_inner));
    assert_eq!(sorted(leftj), sorted(want_left));
    assert_eq!(sorted(outer), sorted(want_outer));
    assert_eq!(distinct.into_iter().collect::<BTreeSet<_>>(), (0..40).collect());
}

#[test]
fn sort_by_key_orders_across_partitions_with_skew() {
    for n in [1, 2, 4] {
        let r = on_workers(n, |s| {
            let data = s.generate(5000, |i| {
                let k = if i % 3 == 0 { 7 } else { (i * 2_654_435_761) % 1000 };
                (k, i)
            });
            data.sort_by_key().unwrap().collect().unwrap()
        });
        let got = r[0].clone().unwrap();
        let mut want: Vec<(u64, u64)> = (0..5000)
            .map(|i| (if i % 3 == 0 { 7 } else { (i * 2_654_435_761) % 1000 }, i))
            .collect();
        want.sort_by_key(|x| x.0);
        let keys = |v: &[(u64, u64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
        assert_eq!(keys(&got), keys(&want), "{n} workers: globally sorted");
        let mut a = got.clone();
        a.sort();
        let mut b = want.clone();
        b.sort();
        assert_eq!(a, b, "same records");
    }
}

/// A memory budget far below the data: sorted runs spill to disk, the result is the same.
#[test]
fn sort_by_key_beyond_the_memory_budget_matches_a_plain_sort() {
    let dir = temp_dir("sort-spill");
    let key = |i: u64| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40, format!("record {i} ü"));
    for n in [1, 3] {
        let r = common::on_sessions_with_options(
            n,
            heddle_dataflow::Options::batch().spill(64 << 10, vec![dir.clone()]),
            |s| s.generate(60_000, key).sort_by_key().unwrap().collect().unwrap(),
        );
        let got = r[0].clone().unwrap();
        let mut want: Vec<(u64, String)> = (0..60_000).map(key).collect();
        want.sort();
        let mut sorted = got.clone();
        sorted.sort();
        assert_eq!(sorted, want, "{n} workers: the same records");
        assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "{n} workers: globally sorted");
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "{n} workers: the spilled runs are removed"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Spilling into a directory that does not exist fails, naming it, before anything runs.
#[test]
fn a_sort_that_cannot_spill_names_the_file() {
    let missing = std::env::temp_dir().join(format!("heddle-no-such-dir-{}", std::process::id()));
    let r = common::on_sessions_with_options(
        2,
        heddle_dataflow::Options::batch().spill(16 << 10, vec![missing.clone()]),
        |s| {
            s.generate(20_000, |i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15), i))
                .sort_by_key()
                .and_then(|d| d.count())
                .map_err(|e| e.to_string())
        },
    );
    for got in r {
        let e = got.expect_err("no directory to spill into");
        assert!(e.contains(&missing.display().to_string()) && e.contains("unusable"), "{e}");
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

#[test]
fn text_files_directories_and_globs_split_by_byte_ranges() {
    let dir = temp_dir("text");
    // Unicode, empty lines, CRLF, a file without a final newline, an empty file.
    let a = "héllo wörld\n\nκόσμε 🌍\r\nline four\n";
    let b = "second file\nno final newline";
    write(&dir.join("a.txt"), a);
    write(&dir.join("b.txt"), b);
    write(&dir.join("c.log"), "");
    let long: String = (0..2000).map(|i| format!("line {i} {}\n", "x".repeat(i % 37))).collect();
    write(&dir.join("long.txt"), &long);
    let want_all: Vec<String> =
        [a, b, "", &long].iter().flat_map(|t| t.lines().map(String::from)).collect();
    for n in 1..=4 {
        let r = on_workers(n, |s| {
            let all = s.text_file(&dir).unwrap().collect_all().unwrap();
            let txt = s.text_file(dir.join("*.txt")).unwrap().count().unwrap();
            let one = s.text_file(dir.join("long.txt")).unwrap().collect_all().unwrap();
            (all, txt, one)
        });
        for (all, txt, one) in r {
            assert_eq!(all, want_all, "{n} workers: every line once, in order");
            assert_eq!(txt, want_all.len() as u64);
            assert_eq!(one, long.lines().map(String::from).collect::<Vec<_>>());
        }
    }
    on_workers(1, |s| {
        let e = s.text_file(dir.join("*.none")).unwrap_err().to_string();
        assert!(e.contains("names no readable file"), "{e}");
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Row {
    name: String,
    age: u32,
}

#[test]
fn malformed_csv_and_json_rows_name_file_and_line_or_are_counted() {
    let dir = temp_dir("rows");
    let csv_path = dir.join("people.csv");
    let mut csv_text = String::from("name,age\n");
    for i in 0..500 {
        if i == 321 {
            csv_text.push_str("bob,not-a-number\n");
        } else {
            csv_text.push_str(&format!("p{i},{}\n", i % 90));
        }
    }
    write(&csv_path, &csv_text);
    let json_path = dir.join("people.jsonl");
    let mut json_text = String::new();
    for i in 0..300 {
        if i == 17 || i == 250 {
            json_text.push_str("{\"name\": \"broken\", \n");
        } else {
            json_text.push_str(&format!("{{\"name\": \"j{i}\", \"age\": {i}}}\n"));
        }
    }
    write(&json_path, &json_text);
    // A failing task ends the job on its worker (under `heddle run` the launcher then
    // stops the others), so the failures are checked in a world of one.
    let (csv_err, json_err) = on_workers(1, |s| {
        let csv_err =
            s.read_csv::<Row>(&csv_path, true, OnMalformed::Fail).unwrap().count().unwrap_err();
        let json_err =
            s.read_json_lines::<Row>(&json_path, OnMalformed::Fail).unwrap().count().unwrap_err();
        // Raised inside a source task, each comes out of the job as itself.
        for e in [&csv_err, &json_err] {
            assert!(matches!(e, heddle_data::Error::Parse { .. }), "{e:?}");
            assert!(e.to_string().starts_with(&format!("{}", dir.display())), "{e}");
        }
        (csv_err.to_string(), json_err.to_string())
    })
    .remove(0);
    // Line 323: the header is line 1 and row i is line i + 2.
    assert!(
        csv_err.contains("people.csv line 323") && csv_err.contains("invalid digit"),
        "{csv_err}"
    );
    assert!(json_err.contains("people.jsonl line 18"), "{json_err}");
    for n in [1, 3] {
        let r = on_workers(n, |s| {
            let csv_rows = s
                .read_csv::<Row>(&csv_path, true, OnMalformed::Skip)
                .unwrap()
                .collect_all()
                .unwrap();
            let json_rows =
                s.read_json_lines::<Row>(&json_path, OnMalformed::Skip).unwrap().count().unwrap();
            (csv_rows, json_rows, s.skipped_rows().unwrap())
        });
        for (csv_rows, json_rows, skipped) in r {
            assert_eq!(csv_rows.len(), 499);
            assert_eq!(csv_rows[0], Row { name: "p0".into(), age: 0 });
            assert_eq!(json_rows, 298);
            assert_eq!(skipped, 3, "every skipped row is counted once");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn part_files_hold_the_partitions() {
    let dir = temp_dir("write");
    on_workers(2, |s| {
        let xs = s.range(0, 100).map(|x| (x, format!("v{x}")));
        xs.map(|(x, v)| format!("{x} {v}")).write_text(dir.join("text")).unwrap();
        xs.write_json_lines(dir.join("json")).unwrap();
        xs.write_csv(dir.join("csv")).unwrap();
        s.range(0, 0).write_json_lines(dir.join("empty")).unwrap();
    });
    let parts = |sub: &str| -> Vec<std::path::PathBuf> {
        assert!(dir.join(sub).join(heddle_data::SUCCESS).exists(), "{sub}: no _SUCCESS marker");
        std::fs::read_dir(dir.join(sub))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("part-"))
            .collect()
    };
    let read_parts = |sub: &str| -> Vec<String> {
        let mut files = parts(sub);
        files.sort();
        files
            .iter()
            .flat_map(|f| {
                std::fs::read_to_string(f).unwrap().lines().map(String::from).collect::<Vec<_>>()
            })
            .collect()
    };
    assert_eq!(read_parts("text"), (0..100).map(|x| format!("{x} v{x}")).collect::<Vec<_>>());
    assert_eq!(read_parts("json"), (0..100).map(|x| format!("[{x},\"v{x}\"]")).collect::<Vec<_>>());
    assert_eq!(read_parts("csv"), (0..100).map(|x| format!("{x},v{x}")).collect::<Vec<_>>());
    assert_eq!(parts("json").len(), 2, "one part per partition");
    assert_eq!(parts("empty").len(), 2, "empty partitions still get a part file");
    assert_eq!(
        std::fs::read_dir(dir.join("json")).unwrap().count(),
        3,
        "the parts and _SUCCESS, nothing temporary"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cache_and_iterate_keep_data_across_steps() {
    let r = on_workers(2, |s| {
        let xs = s.range(0, 1000).cache().unwrap();
        // Halve every value until the largest is below 10.
        let (last, steps) = xs
            .iterate(
                20,
                |d| Ok(d.map(|x| x / 2)),
                |_, next| Ok(next.reduce(u64::max).unwrap().unwrap_or(0) < 10),
            )
            .unwrap();
        let side = s.broadcast(if s.rank() == 0 { Some(&41u64) } else { None }).unwrap();
        // Whole cached partitions (handed over at once) and streamed ones: the same.
        let sizes = |d: &heddle_data::DataSet<u64>| {
            d.map_partitions(|p| vec![(p.len() as u64, p.iter().sum::<u64>())])
                .collect_all()
                .unwrap()
        };
        assert_eq!(sizes(&xs), sizes(&s.range(0, 1000)), "cached partitions");
        assert_eq!(sizes(&xs).iter().map(|x| x.1).sum::<u64>(), (0..1000).sum::<u64>());
        (last.reduce(u64::max).unwrap(), steps, xs.count().unwrap(), side)
    });
    for (max, steps, count, side) in r {
        assert_eq!(steps, 7, "999 >> 7 = 7 < 10");
        assert_eq!(max, Some(999 >> 7));
        assert_eq!(count, 1000);
        assert_eq!(side, 41);
    }
}

#[test]
fn explain_shows_chained_steps_and_shuffles() {
    on_workers(2, |s| {
        let plan =
            s.range(0, 10).map(|x| (x % 3, 1u64)).reduce_by_key(|a, b| a + b).explain().unwrap();
        assert!(
            plan.contains("Direct (chained in memory)")
                && plan.contains("KeyedReduce (dataflow operation)"),
            "{plan}"
        );
        let _ = HashMap::<u8, u8>::new();
    });
}
