//! Exactly once: the `exactly_once` example (files of `ID KEY` lines in, a running count
//! per key in keyed state, `ID KEY COUNT` lines out through the two-phase file sink) with
//! checkpoints, killed with SIGKILL at random moments and restarted by `heddle run
//! --restarts`, still writes every ID exactly once and each key's counts 1..n. Damaged or
//! foreign checkpoints are refused naming the file; a checkpoint that cannot be written
//! fails alone while the job goes on.

mod common;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::{assert_no_survivors, command, example, marker, run, survivors, text, wait_bounded};

/// A small random generator (xorshift), seeded per test run and printed.
struct Rng(u64);

impl Rng {
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

fn fresh_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("heddle-eo-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    dir
}

/// Writes `files` input files of `per_file` lines `ID KEY` (unique ids, keys skewed: a
/// few hot keys and a long tail); one file has CRLF line ends and one no final newline.
/// Returns each id's key.
fn make_input(dir: &Path, files: usize, per_file: usize, rng: &mut Rng) -> HashMap<String, String> {
    let mut keys = HashMap::new();
    let mut id = 0u64;
    for f in 0..files {
        let mut text = String::new();
        let eol = if f == 1 { "\r\n" } else { "\n" };
        for _ in 0..per_file {
            // Skewed: half the records on 4 keys, the rest over 300.
            let key = match rng.below(2) {
                0 => format!("hot{}", rng.below(4)),
                _ => format!("k{}", rng.below(300)),
            };
            id += 1 + rng.below(3);
            text.push_str(&format!("{id} {key}{eol}"));
            keys.insert(id.to_string(), key);
        }
        if f == 2 {
            text.pop(); // no final newline
        }
        std::fs::write(dir.join(format!("events-{f:02}.txt")), text).expect("input file");
    }
    keys
}

/// Checks the output directory: every input id exactly once, with its key, and each
/// key's counts exactly 1..n; no in-progress file left.
fn check_exactly_once(out: &Path, input: &HashMap<String, String>) {
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut counts: HashMap<String, Vec<u64>> = HashMap::new();
    for entry in std::fs::read_dir(out).expect("output dir").flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        assert!(!name.ends_with(".inprogress"), "an in-progress file was left: {name}");
        if !name.starts_with("part-") {
            continue;
        }
        for line in std::fs::read_to_string(entry.path()).expect("part file").lines() {
            let f: Vec<&str> = line.split(' ').collect();
            assert_eq!(f.len(), 3, "bad output line {line:?} in {name}");
            assert_eq!(input.get(f[0]).map(String::as_str), Some(f[1]), "{line:?}");
            *seen.entry(f[0].to_string()).or_default() += 1;
            counts.entry(f[1].to_string()).or_default().push(f[2].parse().expect("a count"));
        }
    }
    let dups: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).take(5).collect();
    assert!(dups.is_empty(), "ids written more than once: {dups:?}");
    let missing: Vec<_> = input.keys().filter(|id| !seen.contains_key(*id)).take(5).collect();
    assert!(missing.is_empty(), "ids missing from the output: {missing:?}");
    for (key, mut c) in counts {
        c.sort_unstable();
        let want: Vec<u64> = (1..=c.len() as u64).collect();
        assert!(c == want, "key {key}: counts are not 1..{}", want.len());
    }
}

/// Whether process `pid` runs the example (not the launcher or its guardian).
fn is_worker(pid: u32) -> bool {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().unwrap_or_default();
    argv0.ends_with(b"/exactly_once")
}

fn exactly_once_args<'a>(input: &'a str, out: &'a str, ckpt: &'a str) -> Vec<&'a str> {
    vec!["--input", input, "--output", out, "--checkpoint-dir", ckpt, "--checkpoint-ms", "100"]
}

#[test]
fn ten_random_kills_still_write_every_record_exactly_once() {
    chaos("eo-chaos", &[], 10);
}

/// As above, every checkpoint unaligned (`--alignment-timeout 0`): barriers overtake the
/// queued records, which each checkpoint stores and a restarted attempt gives back first.
#[test]
fn random_kills_with_unaligned_checkpoints_still_write_every_record_exactly_once() {
    chaos("eo-unaligned", &["--alignment-timeout", "0"], 6);
}

/// Runs `exactly_once` on 4 workers under `--restarts 20` (with `flags`), SIGKILLs a random
/// worker `want` times at random moments, and checks the output.
fn chaos(name: &str, flags: &[&str], want: usize) {
    let seed = (u64::from(std::process::id()) * 0x9e37_79b9) | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let dir = fresh_dir(name);
    let (input_dir, out, ckpt) = (dir.join("in"), dir.join("out"), dir.join("ckpt"));
    std::fs::create_dir_all(&input_dir).expect("input dir");
    let input = make_input(&input_dir, 4, 6000, &mut rng);
    let program = example("exactly_once");
    let (i, o, c) = (input_dir.to_str().unwrap(), out.to_str().unwrap(), ckpt.to_str().unwrap());
    let mut args = vec!["run", "-n", "4", "--restarts", "20"];
    args.extend(flags);
    args.extend(["--", &program]);
    args.extend(exactly_once_args(i, o, c));
    args.extend(["--rate", "4000"]);
    let mark = marker(name);
    let child = command(&mark, &args).spawn().expect("spawn heddle");
    let launcher = child.id();
    let mut kills = 0;
    let until = Instant::now() + Duration::from_secs(60);
    while kills < want && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(150 + rng.below(350)));
        let workers: Vec<u32> =
            survivors(&mark).into_iter().filter(|&p| p != launcher && is_worker(p)).collect();
        if workers.is_empty() {
            continue; // between attempts
        }
        let victim = workers[rng.below(workers.len() as u64) as usize];
        let killed = Command::new("kill").args(["-KILL", &victim.to_string()]).status();
        kills += usize::from(killed.is_ok_and(|s| s.success()));
    }
    let output = wait_bounded(child, Duration::from_secs(180));
    assert_no_survivors(&mark);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(kills, want, "the job ended after {kills} kills:\n{stderr}");
    assert!(stderr.contains("restarting the job"), "{stderr}");
    check_exactly_once(&out, &input);
    if !flags.is_empty() {
        let history = std::fs::read_to_string(ckpt.join("history.jsonl")).expect("history");
        let unaligned = history.lines().filter(|l| !l.contains("\"unaligned_tasks\":0")).count();
        assert!(unaligned > 0, "no checkpoint stored records in flight:\n{history}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `exactly_once` on 3 workers; returns exit code, stdout, stderr.
fn run_once(test: &str, input: &str, out: &str, ckpt: &str) -> (Option<i32>, String, String) {
    let mark = marker(test);
    let program = example("exactly_once");
    let mut args = vec!["run", "-n", "3", "--", &program];
    args.extend(exactly_once_args(input, out, ckpt));
    let (output, _) = run(&mark, &args);
    assert_no_survivors(&mark);
    (output.status.code(), text(&output.stdout), text(&output.stderr))
}

#[test]
fn a_finished_job_run_again_resumes_at_its_end_and_writes_nothing_new() {
    let dir = fresh_dir("rerun");
    let (input_dir, out, ckpt) = (dir.join("in"), dir.join("out"), dir.join("ckpt"));
    std::fs::create_dir_all(&input_dir).expect("input dir");
    let input = make_input(&input_dir, 3, 2000, &mut Rng(7));
    let (i, o, c) = (input_dir.to_str().unwrap(), out.to_str().unwrap(), ckpt.to_str().unwrap());
    let (code, stdout, stderr) = run_once("eo-first", i, o, c);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    check_exactly_once(&out, &input);
    let commits = |d: &Path| {
        std::fs::read_dir(d)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".ckpt"))
            .count()
    };
    assert!(commits(&ckpt) <= 2, "more than 2 checkpoints kept");
    let (code, stdout, stderr) = run_once("eo-again", i, o, c);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    check_exactly_once(&out, &input);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_and_foreign_checkpoints_are_refused_naming_the_file() {
    let dir = fresh_dir("refused");
    let (input_dir, out, ckpt) = (dir.join("in"), dir.join("out"), dir.join("ckpt"));
    std::fs::create_dir_all(&input_dir).expect("input dir");
    make_input(&input_dir, 2, 500, &mut Rng(11));
    let (i, o, c) = (input_dir.to_str().unwrap(), out.to_str().unwrap(), ckpt.to_str().unwrap());
    let (code, stdout, stderr) = run_once("eo-base", i, o, c);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    let newest = |suffix: &str| -> PathBuf {
        let mut all: Vec<PathBuf> = std::fs::read_dir(&ckpt)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        all.sort();
        all.pop().expect("a checkpoint file")
    };
    // A checkpoint of another job.
    let commit = newest(".ckpt");
    let original = std::fs::read_to_string(&commit).unwrap();
    std::fs::write(&commit, original.replace("\"job\":\"exactly_once\"", "\"job\":\"payroll\""))
        .unwrap();
    let (code, _, stderr) = run_once("eo-foreign", i, o, c);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&commit.display().to_string()), "{stderr}");
    assert!(stderr.contains("another job: \"payroll\", not \"exactly_once\""), "{stderr}");
    // A damaged state file.
    std::fs::write(&commit, &original).unwrap();
    let state = newest(".state");
    let mut bytes = std::fs::read(&state).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&state, bytes).unwrap();
    let (code, _, stderr) = run_once("eo-damaged", i, o, c);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&state.display().to_string()), "{stderr}");
    assert!(stderr.contains("checksum does not match"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_checkpoint_that_cannot_be_written_fails_alone_and_the_job_goes_on() {
    let dir = fresh_dir("unwritable");
    let (input_dir, out, ckpt) = (dir.join("in"), dir.join("out"), dir.join("ckpt"));
    std::fs::create_dir_all(&input_dir).expect("input dir");
    let input = make_input(&input_dir, 3, 3000, &mut Rng(5));
    // Checkpoint 2's state files cannot be put in place: directories hold their names.
    std::fs::create_dir_all(&ckpt).unwrap();
    std::fs::set_permissions(&ckpt, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    for task in 0..32 {
        std::fs::create_dir(ckpt.join(format!("stream-000000000002.task-{task}.state"))).unwrap();
    }
    let program = example("exactly_once");
    let (i, o, c) = (input_dir.to_str().unwrap(), out.to_str().unwrap(), ckpt.to_str().unwrap());
    let mark = marker("eo-unwritable");
    let mut args = vec!["run", "-n", "3", "--", &program];
    args.extend(exactly_once_args(i, o, c));
    args.extend(["--rate", "9000"]);
    let (output, _) = run(&mark, &args);
    assert_no_survivors(&mark);
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("checkpoint 2 failed, the job goes on"), "{stderr}");
    check_exactly_once(&out, &input);
    let _ = std::fs::remove_dir_all(&dir);
}
