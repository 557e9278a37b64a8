//! Batch resume: K-means checkpoints its centers every few iterations; killed mid-run and
//! restarted (`heddle run --restarts`), it resumes after its newest checkpoint and ends
//! with exactly the centers of a run that was never killed. Checkpoints of another job,
//! or damaged ones, are refused with the file named.

mod common;

use std::path::{Path, PathBuf};

use common::{assert_no_survivors, example, marker, run, text};

fn fresh_dir(name: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("heddle-kmeans-resume-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Runs kmeans on 2 workers (seed `seed`, 12 iterations) with `extra` flags; returns the
/// exit code, stdout and stderr.
fn kmeans(
    test: &str,
    seed: &str,
    launcher: &[&str],
    extra: &[&str],
) -> (Option<i32>, String, String) {
    let mark = marker(test);
    let program = example("kmeans");
    let mut args = vec!["run", "-n", "2"];
    args.extend_from_slice(launcher);
    args.extend_from_slice(&["--", &program, "--generate", "--seed", seed, "--iterations", "12"]);
    args.extend_from_slice(extra);
    let (out, _) = run(&mark, &args);
    assert_no_survivors(&mark);
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn centers(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("centers.csv")).expect("centers.csv")
}

#[test]
fn a_killed_kmeans_resumes_from_its_checkpoint_with_the_same_result() {
    let (plain, resumed, ckpt) = (fresh_dir("plain"), fresh_dir("resumed"), fresh_dir("ckpt"));
    let (code, stdout, stderr) =
        kmeans("km-plain", "3", &[], &["--output", plain.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("\"resumed_from_iteration\": 0"), "{stdout}");

    let (code, stdout, stderr) = kmeans(
        "km-killed",
        "3",
        &["--restarts", "1"],
        &[
            "--output",
            resumed.to_str().unwrap(),
            "--checkpoint-dir",
            ckpt.to_str().unwrap(),
            "--checkpoint-every",
            "4",
            "--kill-at-iteration",
            "10",
        ],
    );
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stderr.contains("heddle: rank 1 was killed by signal 9"), "{stderr}");
    assert!(stderr.contains("heddle: restarting the job: attempt 2"), "{stderr}");
    // Checkpoints after iterations 4 and 8; killed after 10: resumed after 8.
    assert!(stdout.contains("\"ok\": true"), "{stdout}");
    assert!(stdout.contains("\"resumed_from_iteration\": 8"), "{stdout}");
    assert_eq!(centers(&resumed), centers(&plain), "the resumed run ends elsewhere");
    // The newest two checkpoints are kept (8 and 12), private.
    let mut names: Vec<String> = std::fs::read_dir(&ckpt)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["loop-000000000008.ckpt", "loop-000000000012.ckpt"]);

    // Another job's checkpoint (another seed) is refused, naming the file and the job.
    let (code, _, stderr) =
        kmeans("km-foreign", "4", &[], &["--checkpoint-dir", ckpt.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("loop-000000000012.ckpt is a checkpoint of another job"), "{stderr}");
    assert!(stderr.contains("seed=3") && stderr.contains("seed=4"), "{stderr}");

    // A damaged checkpoint is refused, naming the file.
    let newest = ckpt.join("loop-000000000012.ckpt");
    let mut bytes = std::fs::read(&newest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&newest, &bytes).unwrap();
    let (code, _, stderr) =
        kmeans("km-damaged", "3", &[], &["--checkpoint-dir", ckpt.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(&*newest.to_string_lossy()) && stderr.contains("the checkpoint is damaged"),
        "{stderr}"
    );
    for dir in [plain, resumed, ckpt] {
        std::fs::remove_dir_all(dir).unwrap();
    }
}
