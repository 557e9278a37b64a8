"""Shared helpers: run a job script under ``python -m heddle run -n N`` and read what each
rank reported (one JSON line per rank, printed as ``[rank] {...}`` by the launcher)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

JOBS = Path(__file__).resolve().parent / "jobs"
#: Upper bound of any job in these tests (seconds); a hang fails instead of blocking CI.
JOB_TIMEOUT = 180


class Job:
    """A finished job: exit code, output, and each rank's JSON report."""

    def __init__(self, proc: subprocess.CompletedProcess):
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.reports: dict[int, dict] = {}
        for line in proc.stdout.splitlines():
            if line.startswith("[") and "] {" in line:
                rank, _, rest = line[1:].partition("] ")
                self.reports[int(rank)] = json.loads(rest)

    def __repr__(self) -> str:
        return (
            f"Job(returncode={self.returncode})\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr}"
        )


def launcher_cmd(
    n: int,
    script: str,
    *args: str,
    launcher: Sequence[str] | None = None,
    options: Sequence[str] = (),
) -> list[str]:
    """``heddle run -n N [OPTIONS] JOBS/SCRIPT ARGS``."""
    launcher = list(launcher or [sys.executable, "-m", "heddle"])
    target = script if script.startswith("-") else str(JOBS / script)  # "-c CODE" runs inline code
    return [*launcher, "run", "-n", str(n), *options, target, *args]


def job_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    env.update(extra or {})
    return env


def run_job(
    n: int,
    script: str,
    *args: str,
    env: dict | None = None,
    timeout: float = JOB_TIMEOUT,
    launcher=None,
    options: Sequence[str] = (),
) -> Job:
    proc = subprocess.run(
        launcher_cmd(n, script, *args, launcher=launcher, options=options),
        check=False,
        env=job_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    return Job(proc)


def assert_all_ok(job: Job, n: int) -> None:
    assert job.returncode == 0, job
    assert sorted(job.reports) == list(range(n)), job
    for rank, rep in job.reports.items():
        assert rep.get("ok") is True, (rank, rep, job)


def wait_for_pids(
    piddir: Path, n: int, proc: subprocess.Popen, timeout: float = 60.0
) -> dict[int, int]:
    """Waits until every rank of a running job has written ``<rank>.pid`` (all joined)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {}
        for f in piddir.glob("*.pid"):
            text = f.read_text().strip()
            if text:
                pids[int(f.stem)] = int(text)
        if len(pids) == n:
            return pids
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"job ended early ({proc.returncode}):\n{out}\n{err}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("workers did not all start in time")


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def assert_gone(pids, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    assert not [p for p in pids if alive(p)], "orphan worker processes left behind"


@pytest.fixture
def piddir(tmp_path: Path) -> Path:
    d = tmp_path / "pids"
    d.mkdir()
    return d


def popen_job(n: int, script: str, *args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        launcher_cmd(n, script, *args),
        env=job_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def finish(proc: subprocess.Popen, timeout: float = 30.0):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"job did not end within {timeout}s after the signal:\n{out}\n{err}"
        ) from None
    return proc.returncode, out, err


__all__ = [
    "Job",
    "run_job",
    "assert_all_ok",
    "wait_for_pids",
    "assert_gone",
    "popen_job",
    "finish",
    "alive",
    "signal",
]


# A real redis-server of the test (the Redis source and sink, the streaming benchmark).


@pytest.fixture
def redis_url(tmp_path):
    if not (shutil.which("redis-server") and shutil.which("redis-cli")):
        pytest.skip("redis-server is not installed (make test-deps installs it)")
    # The port is free when picked, but another process may take it first: a server that
    # cannot bind it exits, and one that is not ours answers with another process id.
    for _ in range(10):
        port, server = _start_redis(tmp_path)
        if _wait_own_redis(port, server):
            break
        server.kill()
        server.wait()
    else:
        pytest.fail("redis-server did not start on any of 10 free ports")
    yield port
    server.kill()
    server.wait()


def _start_redis(tmp_path):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["redis-server", "--port", str(port), "--bind", "127.0.0.1"]
    argv += ["--save", "", "--appendonly", "no", "--dir", str(tmp_path)]
    return port, subprocess.Popen(argv, stdout=subprocess.DEVNULL)


def _wait_own_redis(port, server):
    """Whether `server` came to answer on `port` (False: it exited, or another did)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and server.poll() is None:
        info = subprocess.run(
            ["redis-cli", "-p", str(port), "info", "server"], check=False, capture_output=True
        )
        if info.returncode == 0 and b"process_id:" in info.stdout:
            return f"process_id:{server.pid}\r".encode() in info.stdout
        time.sleep(0.05)
    return False
