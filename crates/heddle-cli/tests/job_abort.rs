//! One failing worker aborts the whole job: the others' pending calls fail at once with the
//! origin's cause, and `heddle run` prints that cause once and exits with the origin's
//! status.

mod common;

use common::{assert_no_survivors, example, marker, run, text};

#[test]
fn a_panic_on_one_rank_aborts_the_barrier_of_the_others() {
    let mark = marker("panic");
    let (out, _) = run(
        &mark,
        &["run", "-n", "3", "--", &example("worker_faults"), "--fail-rank", "1", "--panic"],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(101), "a panic's status: {stderr}");
    assert!(stderr.contains("heddle: rank 1 exited with status 101"), "{stderr}");
    assert_eq!(
        stderr.matches("heddle: the job was aborted: rank 1 failed: Panic:").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains("rank 1 cannot go on"), "{stderr}");
    for rank in [0, 2] {
        // They ended by themselves, with the cause, instead of being stopped.
        let line = format!("[{rank}] error: the job was aborted: rank 1 failed: Panic:");
        assert!(stderr.contains(&line), "{line}\n{stderr}");
    }
    assert_no_survivors(&mark);
}
