//! The task-API and data-API examples under `heddle run`, their output files checked
//! against plain computations done here from the same input.

mod common;

use std::collections::HashMap;

use common::{assert_no_survivors, example, marker, run, text};

fn summary(stdout: &str) -> &str {
    stdout.lines().find(|l| l.starts_with("[0] {\"example\"")).expect("a summary line")
}

#[test]
fn wordcount_part_files_hold_the_counts_of_the_input() {
    let dir = std::env::temp_dir().join(format!("heddle-wc-task-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // A small skewed text, with lines that straddle the workers' byte ranges.
    let mut x = 7u64;
    let mut input = String::new();
    for line in 0..5000 {
        for w in 0..(1 + line % 13) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = x % 1000;
            input.push_str(&format!("{}w{}", if w > 0 { " " } else { "" }, r * r / 1000));
        }
        input.push('\n');
    }
    let path = dir.join("input.txt");
    std::fs::write(&path, &input).unwrap();
    let mut want: HashMap<String, u64> = HashMap::new();
    for w in input.split_whitespace() {
        *want.entry(w.to_string()).or_default() += 1;
    }
    // The last two run each worker's tasks on 2 executor threads.
    let runs = [
        ("wordcount_task", "1", "1"),
        ("wordcount_task", "2", "1"),
        ("wordcount_task", "3", "1"),
        ("wordcount", "2", "1"),
        ("wordcount", "4", "1"),
        ("wordcount_task", "2", "2"),
        ("wordcount", "3", "2"),
    ];
    for (name, n, threads) in runs {
        let wc = example(name);
        let out = dir.join(format!("out-{name}-{n}-{threads}"));
        let mark = marker(name);
        let env = format!("HEDDLE_TASK_THREADS={threads}");
        let (o, _) = run(
            &mark,
            &[
                "run",
                "-n",
                n,
                "--",
                "env",
                &env,
                &wc,
                "--input",
                path.to_str().unwrap(),
                "--output",
                out.to_str().unwrap(),
            ],
        );
        let stdout = text(&o.stdout);
        assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
        assert!(summary(&stdout).contains("\"ok\": true"), "{stdout}");
        let mut got: HashMap<String, u64> = HashMap::new();
        for part in std::fs::read_dir(&out).unwrap().flatten() {
            for line in std::fs::read_to_string(part.path()).unwrap().lines() {
                let (w, c) = line.split_once('\t').expect("word<TAB>count");
                assert!(
                    got.insert(w.to_string(), c.parse().unwrap()).is_none(),
                    "{w} in two parts"
                );
            }
        }
        assert_eq!(got, want, "{name} on {n} workers, {threads} threads each");
        assert_no_survivors(&mark);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn kmeans_from_csv_and_npy_matches_lloyd() {
    let dir = std::env::temp_dir().join(format!("heddle-km-task-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Three well separated clusters; the first three points are one of each.
    let mut pts: Vec<[f64; 2]> = vec![[0.0, 0.0], [10.0, 10.0], [-10.0, 5.0]];
    let mut x = 99u64;
    for i in 0..3000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let (dx, dy) = ((x % 1000) as f64 / 1000.0 - 0.5, ((x >> 20) % 1000) as f64 / 1000.0 - 0.5);
        let c = pts[i % 3];
        pts.push([c[0] + dx, c[1] + dy]);
    }
    // Lloyd's algorithm here, 5 iterations.
    let mut centers = pts[..3].to_vec();
    for _ in 0..5 {
        let mut sums = [[0.0f64; 3]; 3];
        for p in &pts {
            let d = |c: &[f64; 2]| (p[0] - c[0]).powi(2) + (p[1] - c[1]).powi(2);
            let k = (0..3).min_by(|&a, &b| d(&centers[a]).total_cmp(&d(&centers[b]))).unwrap();
            sums[k][0] += p[0];
            sums[k][1] += p[1];
            sums[k][2] += 1.0;
        }
        for k in 0..3 {
            centers[k] = [sums[k][0] / sums[k][2], sums[k][1] / sums[k][2]];
        }
    }
    let csv = dir.join("points.csv");
    std::fs::write(
        &csv,
        std::iter::once("x,y".to_string())
            .chain(pts.iter().map(|p| format!("{},{}", p[0], p[1])))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .unwrap();
    let npy = dir.join("points.npy");
    let header =
        format!("{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, 2), }}", pts.len());
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&((header.len() + pad + 1) as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend(std::iter::repeat_n(b' ', pad));
    bytes.push(b'\n');
    for p in &pts {
        bytes.extend_from_slice(&p[0].to_le_bytes());
        bytes.extend_from_slice(&p[1].to_le_bytes());
    }
    std::fs::write(&npy, bytes).unwrap();
    for (name, input, n) in [
        ("kmeans_task", &csv, "2"),
        ("kmeans_task", &npy, "3"),
        ("kmeans", &csv, "3"),
        ("kmeans", &npy, "2"),
    ] {
        let km = example(name);
        let out = dir.join(format!("out-{name}-{n}"));
        let mark = marker(name);
        let args = [
            "run",
            "-n",
            n,
            "--",
            &km,
            "--input",
            input.to_str().unwrap(),
            "--k",
            "3",
            "--iterations",
            "5",
            "--output",
            out.to_str().unwrap(),
        ];
        let (o, _) = run(&mark, &args);
        let stdout = text(&o.stdout);
        assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
        assert!(summary(&stdout).contains("\"ok\": true"), "{stdout}");
        let written = std::fs::read_to_string(out.join("centers.csv")).unwrap();
        let got: Vec<[f64; 2]> = written
            .lines()
            .skip(1)
            .map(|l| {
                let (a, b) = l.split_once(',').unwrap();
                [a.parse().unwrap(), b.parse().unwrap()]
            })
            .collect();
        assert_eq!(got.len(), 3);
        for (g, w) in got.iter().zip(&centers) {
            assert!(
                (g[0] - w[0]).abs() < 1e-9 && (g[1] - w[1]).abs() < 1e-9,
                "{got:?} vs {centers:?}"
            );
        }
        assert_no_survivors(&mark);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stream_window_counts_every_event_in_its_window() {
    let sw = example("stream_window");
    let dir = std::env::temp_dir().join(format!("heddle-sw-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // 300 lines ("ms" 0..300) of words; windows of 10 lines.
    let input: String = (0..300).map(|l| format!("a b{} c{}\n", l % 7, l % 3)).collect();
    let path = dir.join("words.txt");
    std::fs::write(&path, &input).unwrap();
    let out = dir.join("out");
    for args in [
        vec!["--input", path.to_str().unwrap(), "--output", out.to_str().unwrap()],
        vec!["--generate", "--events", "200000", "--rate", "200000"],
    ] {
        let mark = marker("stream_window");
        let mut all = vec!["run", "-n", "2", "--", sw.as_str()];
        all.extend(args.iter().copied());
        let (o, _) = run(&mark, &all);
        let stdout = text(&o.stdout);
        assert!(o.status.success(), "{stdout}\n{}", text(&o.stderr));
        assert!(summary(&stdout).contains("\"ok\": true"), "{stdout}");
        assert_no_survivors(&mark);
    }
    // The written windows against a count done here.
    let mut want: HashMap<(u64, String), u64> = HashMap::new();
    for (l, line) in input.lines().enumerate() {
        for w in line.split(' ') {
            *want.entry(((l as u64 / 10) * 10, w.to_string())).or_default() += 1;
        }
    }
    let mut got: HashMap<(u64, String), u64> = HashMap::new();
    for line in std::fs::read_to_string(out.join("windows.tsv")).unwrap().lines() {
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f[1].parse::<u64>().unwrap() - f[0].parse::<u64>().unwrap(), 10);
        got.insert((f[0].parse().unwrap(), f[2].to_string()), f[3].parse().unwrap());
    }
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Lines longer than the task-API reader's 1 MiB block that cross the workers' range ends
/// (the reader once dropped the tail of such a line), empty lines and no final newline.
#[test]
fn wordcount_task_keeps_lines_that_cross_both_a_range_end_and_a_block_end() {
    let dir = std::env::temp_dir().join(format!("heddle-wc-long-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut input = Vec::new();
    let mut x = 11u64;
    let mut word = |input: &mut Vec<u8>| -> u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        input.extend_from_slice(format!("w{}", x % 5000).as_bytes());
        x
    };
    // Every 700 KB a line of 1.3 MB: wherever the 2-4 workers' ranges end, some end falls
    // inside a long line that also crosses the end of the block holding that range end.
    while input.len() < 5_000_000 {
        for _ in 0..2000 {
            let r = word(&mut input);
            // Now and then an empty line.
            input.extend_from_slice(if r % 7 == 0 { b"\n\n" } else { b"\n" });
        }
        let long_end = input.len() + 1_300_000;
        while input.len() < long_end {
            word(&mut input);
            input.push(b' ');
        }
        input.push(b'\n');
    }
    word(&mut input); // no final newline
    let path = dir.join("long-lines.txt");
    std::fs::write(&path, &input).unwrap();
    let words = input.split(|&b| b == b' ' || b == b'\n').filter(|w| !w.is_empty()).count();
    for n in ["2", "3", "4"] {
        let mark = marker("wc-long");
        let (o, _) = run(
            &mark,
            &["run", "-n", n, "--", &example("wordcount_task"), "--input", path.to_str().unwrap()],
        );
        let stdout = text(&o.stdout);
        assert!(o.status.success(), "{n} workers: {stdout}\n{}", text(&o.stderr));
        let line = summary(&stdout);
        assert!(
            line.contains("\"ok\": true") && line.contains(&format!("\"words\": {words},")),
            "{n} workers, {words} words: {line}"
        );
        assert_no_survivors(&mark);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
