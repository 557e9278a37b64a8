"""Multi-process tests: scripts launched with ``python -m heddle run -n N`` (2, 3 and 4
workers), each checking its results against numpy references computed on every rank."""

import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import assert_all_ok, assert_gone, finish, popen_job, run_job, wait_for_pids

WORLD_SIZES = [2, 3, 4]


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_buffer_collectives_every_dtype(n):
    job = run_job(n, "collectives.py")
    assert_all_ok(job, n)
    assert all(rep["checks"] > 500 for rep in job.reports.values()), job.reports


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_object_collectives_and_send_recv(n):
    job = run_job(n, "objects.py")
    assert_all_ok(job, n)


@pytest.mark.parametrize("n", WORLD_SIZES)
def test_buffer_point_to_point_and_split(n):
    job = run_job(n, "p2p_split.py")
    assert_all_ok(job, n)


def test_bad_arguments_raise_on_every_rank_and_leave_the_comm_usable():
    job = run_job(3, "bad_args.py")
    assert_all_ok(job, 3)
    assert {rep["caught"] for rep in job.reports.values()} == {16}


def test_timeout_raises_heddle_timeout_error():
    job = run_job(2, "timeout.py", env={"HEDDLE_TIMEOUT_S": "1"})
    assert_all_ok(job, 2)
    assert "recv timed out" in job.reports[0]["message"]


def test_a_departed_peer_raises_worker_failed():
    job = run_job(3, "peer_exit.py")
    assert job.returncode == 0, job
    assert job.reports[0]["lost"] == 1
    assert "rank 1 is gone" in job.reports[0]["message"]


def test_the_console_script_runs_jobs_too():
    heddle_cmd = Path(sys.executable).parent / "heddle"
    assert heddle_cmd.exists(), "pip install did not create the heddle command"
    job = run_job(2, "p2p_split.py", launcher=[str(heddle_cmd)])
    assert_all_ok(job, 2)


def test_a_failing_worker_fails_the_job_with_a_clear_message(piddir):
    job = run_job(3, "fail.py", str(piddir))
    assert job.returncode == 1, job
    assert "RuntimeError: boom from the last rank" in job.stdout + job.stderr
    assert "heddle: rank 2 exited with status 1; stopping the other" in job.stderr
    # The ranks blocked in the barrier were aborted at once, naming the origin.
    assert job.stderr.count("heddle: the job was aborted: rank 2 failed: RuntimeError:") == 1, job
    for rank in (0, 1):
        assert (
            f"[{rank}] heddle: rank {rank} stopped: the job was aborted because rank 2 failed"
            in job.stderr
        ), job
    pids = [int(f.read_text()) for f in piddir.glob("*.pid")]
    assert len(pids) == 3
    assert_gone(pids)


def test_abort_ends_the_job_with_its_code():
    job = run_job(
        2,
        "-c",
        "import heddle, time\nc = heddle.init()\nif c.rank == 1: c.Abort(5)\ntime.sleep(60)\n",
    )
    assert job.returncode == 5, job
    assert "rank 1 exited with status 5" in job.stderr


@pytest.mark.parametrize("n", [2, 4])
def test_ctrl_c_in_a_worker_blocked_in_a_call_ends_the_job(n, piddir):
    proc = popen_job(n, "block.py", str(piddir))
    pids = wait_for_pids(piddir, n, proc)
    proc_pids = list(pids.values())
    os.kill(pids[1], signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130, (code, out, err)
    assert "interrupted (SIGINT) while blocked in a communication call" in err, err
    assert "heddle: rank 1 exited with status 130" in err, err
    assert_gone(proc_pids)


def test_keyboard_interrupt_in_python_code_of_a_worker_ends_the_job(piddir):
    proc = popen_job(2, "sleep.py", str(piddir))
    pids = wait_for_pids(piddir, 2, proc)
    os.kill(pids[1], signal.SIGINT)
    code, _out, err = finish(proc)
    assert code != 0
    assert "KeyboardInterrupt" in err, err
    assert "heddle: rank 1 was killed by signal 2 (SIGINT)" in err, err
    assert_gone(list(pids.values()))


def test_ctrl_c_to_the_launcher_stops_every_worker(piddir):
    proc = popen_job(3, "block.py", str(piddir))
    pids = wait_for_pids(piddir, 3, proc)
    proc.send_signal(signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130, (code, out, err)
    assert "heddle: interrupted by signal 2; stopping 3 workers" in err, err
    assert_gone(list(pids.values()))


def test_allreduce_example_prints_its_json_line():
    example = Path(__file__).resolve().parents[2] / "examples" / "python" / "allreduce.py"
    job = run_job(3, str(example), "--elements", "5000")
    assert job.returncode == 0, job
    assert job.reports[0]["example"] == "allreduce" and job.reports[0]["ok"] is True, job
    assert job.reports[0]["ranks"] == 3


@pytest.mark.parametrize("api", ["data", "count", "stream"])
@pytest.mark.parametrize("n", [2, 3])
def test_an_exception_on_one_rank_aborts_every_rank_and_no_result_is_printed(n, api):
    job = run_job(n, "abort_data.py", "uncaught", api)
    assert job.returncode == 1, job
    assert not any("result" in rep for rep in job.reports.values()), job
    origin = n - 1
    # The origin's error, once from the launcher (its own traceback once more, from it).
    summary = f"heddle: the job was aborted: rank {origin} failed: ValueError:"
    assert job.stderr.count(summary) == 1, job
    assert f"ValueError: boom on rank {origin}" in job.stderr, job
    assert f"heddle: rank {origin} exited with status 1; stopping the other" in job.stderr, job
    for rank in range(n - 1):
        assert (
            f"[{rank}] heddle: rank {rank} stopped: the job was aborted because rank {origin} "
            "failed (ValueError)" in job.stderr
        ), job


@pytest.mark.parametrize("n", [2, 3])
def test_ranks_that_catch_the_abort_see_its_origin_and_the_job_still_fails(n):
    job = run_job(n, "abort_data.py", "caught", "data")
    assert job.returncode == 1, job
    for rank in range(n - 1):
        rep = job.reports[rank]
        assert rep["aborted"] and rep["origin"] == n - 1 and rep["kind"] == "ValueError", rep
        assert "boom on rank" in rep["text"] and "Traceback" in rep["text"], rep
    assert "result" not in job.reports.get(n - 1, {}), job


def test_send_and_receive_of_different_element_types_raise_naming_both():
    job = run_job(2, "p2p_types.py")
    assert job.reports[1]["untyped_ok"], job
    assert (
        "rank 0 sent f64 elements but the receive buffer holds i32" in job.reports[1]["mismatch"]
    ), job
    assert "sent f64 elements but the receive buffer holds i32" in job.reports[0]["aborted"], job
    assert job.returncode == 1, job  # the job was aborted


@pytest.mark.parametrize("flag", ["", "--op"])
def test_allreduce_with_different_counts_or_ops_fails_on_every_rank(flag):
    job = run_job(3, "collective_mismatch.py", *([flag] if flag else []))
    ours, theirs = ("with max", "with sum") if flag else ("of 6 f64", "of 8 f64")
    assert sorted(job.reports) == [0, 1, 2], job
    texts = []
    for rep in job.reports.values():
        assert "result" not in rep, job
        texts.append(rep.get("mismatch") or rep["aborted"])
    assert any("mismatch" in rep for rep in job.reports.values()), job
    for text in texts:
        assert ours in text and theirs in text, text
    assert job.returncode == 1, job
