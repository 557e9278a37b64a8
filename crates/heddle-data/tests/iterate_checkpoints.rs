//! `DataSet::iterate_with` checkpoints: each of 3 workers writes its partitions every k
//! iterations; a second run (as after a restart) resumes after the newest complete
//! checkpoint and ends with what an uninterrupted run computes (a plain loop on one
//! machine is the reference). Checkpoints of another job or another number of workers are
//! refused on every worker.

mod common;

use std::path::PathBuf;

use common::on_workers;
use heddle_data::{Checkpointing, IterateOptions};

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("heddle-iterate-ckpt-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// One step: x -> (x * 7 + 3) mod 1000003.
fn step(x: u64) -> u64 {
    (x * 7 + 3) % 1_000_003
}

/// Runs `max` steps on 3 workers over 0..100 with checkpoints every 3 in `dir`; returns
/// the result on rank 0 and the steps every worker reports.
fn run(
    dir: &std::path::Path,
    job: &str,
    workers: usize,
    max: u64,
) -> Vec<Result<(Option<Vec<u64>>, u64), String>> {
    on_workers(workers, |s| {
        let opts = IterateOptions {
            max,
            checkpoints: Some(Checkpointing { dir: dir.to_path_buf(), every: 3, job: job.into() }),
        };
        let (last, steps) = s
            .range(0, 100)
            .iterate_with(&opts, |d| Ok(d.map(step)), |_, _| Ok(false))
            .map_err(|e| e.to_string())?;
        Ok((last.collect().map_err(|e| e.to_string())?, steps))
    })
}

fn reference(steps: u64) -> Vec<u64> {
    (0..100u64)
        .map(|mut x| {
            for _ in 0..steps {
                x = step(x);
            }
            x
        })
        .collect()
}

#[test]
fn a_second_run_resumes_after_the_newest_checkpoint() {
    let d = dir("resume");
    // 7 steps: checkpoints after 3 and 6.
    let first = run(&d, "affine", 3, 7);
    assert_eq!(first[0], Ok((Some(reference(7)), 7)));
    let mut names: Vec<String> = std::fs::read_dir(&d)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let want: Vec<String> = [3u64, 6]
        .iter()
        .flat_map(|i| {
            std::iter::once(format!("loop-{i:012}.ckpt"))
                .chain((0..3).map(move |r| format!("loop-{i:012}.rank-{r}.ckpt")))
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    assert_eq!(names, want);
    // Resumed after 6, three more steps: the state of 9 steps, whoever holds what.
    let second = run(&d, "affine", 3, 9);
    for (rank, got) in second.iter().enumerate() {
        let want = if rank == 0 { Some(reference(9)) } else { None };
        assert_eq!(got, &Ok((want, 9)), "rank {rank}");
    }
    // Another job, or another number of workers, is refused on every worker.
    for (job, workers) in [("other", 3), ("affine", 2)] {
        for (rank, got) in run(&d, job, workers, 12).into_iter().enumerate() {
            let e = got.expect_err("a foreign checkpoint was resumed");
            let named =
                e.contains("is a checkpoint of another job") || e.contains("another worker");
            assert!(named, "{job} on {workers}, rank {rank}: {e}");
        }
    }
    // A damaged state of one worker fails every worker, naming the file where it is.
    let damaged = d.join("loop-000000000009.rank-1.ckpt");
    let mut bytes = std::fs::read(&damaged).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&damaged, bytes).unwrap();
    let third = run(&d, "affine", 3, 12);
    let e1 = third[1].clone().unwrap_err();
    assert!(e1.contains(&*damaged.to_string_lossy()) && e1.contains("damaged"), "{e1}");
    assert!(third[0].clone().unwrap_err().contains("another worker"), "{:?}", third[0]);
    std::fs::remove_dir_all(&d).unwrap();
}

/// Checkpoints that fail on one worker (here: something in the way of its temporary file)
/// are skipped on every worker, and never cost the states of the newest complete one: with
/// iterations 6, 9 and 12 failing on rank 1, a second run resumes after 3.
#[test]
fn failed_checkpoints_keep_the_newest_complete_one() {
    let d = dir("failing");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    for i in [6u64, 9, 12] {
        let temp = format!(".loop-{i:012}.rank-1.ckpt.{}.tmp", std::process::id());
        std::fs::create_dir(d.join(temp)).unwrap();
    }
    let written = on_workers(3, |s| {
        let c = s.worker_checkpoints::<Vec<u64>>(&d, 3, "failing").unwrap();
        assert_eq!(c.resume().unwrap(), None);
        (1..=12u64).map(|i| c.completed(i, &vec![i; s.rank() + 1]).unwrap()).collect::<Vec<_>>()
    });
    for (rank, done) in written.iter().enumerate() {
        let at: Vec<usize> = (0..12).filter(|&i| done[i]).map(|i| i + 1).collect();
        assert_eq!(at, [3], "rank {rank}: checkpoints completed");
    }
    let resumed = on_workers(3, |s| {
        let c = s.worker_checkpoints::<Vec<u64>>(&d, 3, "failing").unwrap();
        c.resume().unwrap()
    });
    for (rank, got) in resumed.into_iter().enumerate() {
        assert_eq!(got, Some((3, vec![3; rank + 1])), "rank {rank}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}
