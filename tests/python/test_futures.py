"""heddle.futures: the executor interface of concurrent.futures over a job's ranks
(jobs/futures_job.py checks each call against plain Python), python -m heddle.futures with
two pools in turn, and a world of one."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import assert_all_ok, job_env, run_job


def test_commexecutor_serves_every_call_on_two_and_three_workers() -> None:
    for n in (3, 4):
        job = run_job(n, "futures_job.py")
        assert_all_ok(job, n)
        assert job.reports[0]["checks"] == 29, job
        assert all(job.reports[r]["worker"] for r in range(1, n)), job


def test_idle_workers_outlast_the_timeout() -> None:
    job = run_job(3, "futures_job.py", "2.5", env={"HEDDLE_TIMEOUT_S": "1"})
    assert_all_ok(job, 3)


SCRIPT = """
    import os
    from heddle.futures import PoolExecutor, as_completed

    def where(x):
        return x * 10, os.environ["HEDDLE_RANK"]

    print("top level runs on rank", os.environ["HEDDLE_RANK"])

    if __name__ == "__main__":
        with PoolExecutor() as pool:
            values = list(pool.map(where, range(20), chunksize=3))
        print("first", [v for v, _ in values] == [x * 10 for x in range(20)])
        with PoolExecutor() as a, PoolExecutor() as b:
            fa = [a.submit(where, i) for i in range(50)]
            fb = [b.submit(where, -i) for i in range(50)]
            got = sorted(f.result()[0] for f in as_completed(fa + fb))
        want = sorted([i * 10 for i in range(50)] + [-i * 10 for i in range(50)])
        print("two at once", got == want)
        print("ranks", sorted({r for _, r in values}))
"""


def test_python_m_heddle_futures_runs_the_script_on_rank_0(tmp_path: Path) -> None:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    proc = subprocess.run(
        [sys.executable, "-m", "heddle", "run", "-n", "3", "-m", "heddle.futures", str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        env=job_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for line in ("[0] first True", "[0] two at once True", "[0] ranks ['1', '2']"):
        assert line in out, out
    # Workers import the script as __mp_main__: its top level runs, its __main__ block not.
    assert sorted(line for line in out.splitlines() if "top level" in line) == [
        f"[{r}] top level runs on rank {r}" for r in range(3)
    ], out


def test_a_world_of_one_runs_tasks_in_a_thread() -> None:
    code = textwrap.dedent(
        """
        from heddle.futures import CommExecutor
        with CommExecutor() as ex:
            print(type(ex).__name__, list(ex.map(abs, [-1, 2, -3])))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=job_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ThreadPoolExecutor [1, 2, 3]"


def test_pool_executor_without_serving_ranks_says_how_to_start(tmp_path: Path) -> None:
    code = "from heddle.futures import PoolExecutor\nPoolExecutor()"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=job_env(),
        check=False,
    )
    assert proc.returncode != 0
    assert "python -m heddle.futures script.py" in proc.stderr, proc.stderr
