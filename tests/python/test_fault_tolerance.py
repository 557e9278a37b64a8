"""Surviving failures from Python: ``heddle run --restarts`` starts a failed job again
(``comm.attempt`` counts), ``DataSet.iterate(checkpoint_dir=...)`` and
``Session.loop_checkpoints`` resume after their newest checkpoint with the result of an
uninterrupted run (a plain loop is the reference), and a stopped worker is declared failed
by its missing heartbeats. A bridged filter that crashes fails its job, which restarts
like any other."""

import os
import subprocess
import sys

import pytest

from conftest import job_env

HERE = os.path.dirname(__file__)
RESUME = os.path.join(HERE, "jobs", "resume.py")
BRIDGE_RESTART = os.path.join(HERE, "jobs", "bridge_restart.py")


def heddle_run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "heddle", "run", *args],
        check=False,
        env=job_env({"HEDDLE_TIMEOUT_S": "600"}),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def affine_steps(values: list[int], steps: int) -> list[int]:
    for _ in range(steps):
        values = [(x * 7 + 3) % 1_000_003 for x in values]
    return values


def test_a_killed_iterate_resumes_from_its_checkpoint(tmp_path):
    p = heddle_run("-n", "3", "--restarts", "1", RESUME, str(tmp_path / "ckpt"), "7", "dataset")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "heddle: rank 2 was killed by signal 9" in p.stderr, p.stderr
    assert "heddle: restarting the job: attempt 2 of at most 2" in p.stderr, p.stderr
    # Checkpoints after steps 3 and 6, killed after 7: resumed after 6.
    want = f"[0] attempt=1 resumed_from=6 steps=9 {affine_steps(list(range(100)), 9)}"
    assert p.stdout.splitlines() == [want], p.stdout


def test_a_killed_loop_resumes_from_its_checkpoint(tmp_path):
    p = heddle_run("-n", "2", "--restarts", "1", RESUME, str(tmp_path / "ckpt"), "10", "loop")
    assert p.returncode == 0, p.stdout + p.stderr
    want = f"[0] attempt=1 resumed_from=8 steps=12 {affine_steps(list(range(10)), 12)}"
    assert p.stdout.splitlines() == [want], p.stdout
    assert sorted(os.listdir(tmp_path / "ckpt")) == [
        "loop-000000000008.ckpt",
        "loop-000000000012.ckpt",
    ]


def test_without_restarts_the_job_fails_and_attempt_is_zero(tmp_path):
    p = heddle_run("-n", "2", RESUME, str(tmp_path / "ckpt"), "2", "loop")
    assert p.returncode == 137, p.stdout + p.stderr
    assert "restarting" not in p.stderr
    code = "import heddle; c = heddle.init(); print(c.attempt)"
    p = heddle_run("-n", "2", "-c", code)
    assert p.returncode == 0 and sorted(p.stdout.splitlines()) == ["[0] 0", "[1] 0"], p.stderr


def test_a_stopped_worker_is_named_by_its_missing_heartbeats():
    code = (
        "import os, signal, heddle\n"
        "c = heddle.init()\n"
        "if c.rank == 1:\n"
        "    os.kill(os.getpid(), signal.SIGSTOP)\n"
        "c.barrier()\n"
    )
    flags = ["--heartbeat-interval", "0.2", "--heartbeat-timeout", "2"]
    p = heddle_run("-n", "3", *flags, "-c", code, timeout=60)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "rank 1 failed: NoHeartbeat: no heartbeat for 2.0 s from rank 1 on host" in p.stderr
    assert "heddle: rank 1 sent no heartbeat in time and was killed" in p.stderr, p.stderr


@pytest.mark.parametrize("transport", ["pipe", "shm"])
def test_a_crashed_bridged_filter_restarts_with_its_job(tmp_path, transport):
    ckpt = tmp_path / "ckpt"
    p = heddle_run("-n", "2", "--restarts", "1", BRIDGE_RESTART, str(ckpt), transport)
    assert p.returncode == 0, p.stdout + p.stderr
    # The failure names the filter, its exit status and the end of its standard error.
    assert "affine_filter.py" in p.stderr and "status 3" in p.stderr, p.stderr
    assert "affine_filter: crashing on purpose" in p.stderr, p.stderr
    assert "heddle: restarting the job: attempt 2 of at most 2" in p.stderr, p.stderr
    # Checkpoints after steps 2 and 4, the crash in step 5: resumed after 4.
    want = f"[0] attempt=1 resumed_from=4 steps=6 {affine_steps(list(range(100)), 6)}"
    assert p.stdout.splitlines() == [want], p.stdout
