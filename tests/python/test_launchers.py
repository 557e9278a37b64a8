"""Python programs started by Open MPI's ``mpirun``: by themselves (rank 0 hosts the job
master, the others find it through a rendezvous file) and through ``heddle run --launcher
mpirun``. The allreduce result is checked against numpy. Needs ``mpirun`` (``make
test-deps`` installs Open MPI)."""

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from conftest import job_env

HEDDLE = [sys.executable, "-m", "heddle"]
PROGRAM = """
import json, heddle, numpy as np
comm = heddle.init()
x = np.arange(1000, dtype=np.float64) * (comm.rank + 1)
x = comm.allreduce(x)
print(json.dumps({"rank": comm.rank, "size": comm.size, "sum": float(x.sum())}))
"""


def mpi_env(runtime: str) -> dict:
    assert shutil.which("mpirun"), "mpirun (Open MPI) is missing: run `make test-deps`"
    return job_env(
        {
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1",
            "XDG_RUNTIME_DIR": runtime,
        }
    )


def expected(n: int) -> float:
    return float(sum(np.arange(1000, dtype=np.float64).sum() * (r + 1) for r in range(n)))


def results(stdout: str) -> list[dict]:
    """Every JSON object printed, wherever mpirun's forwarding put it (two ranks' lines can
    share a line of its output)."""
    decoder, out, at = json.JSONDecoder(), [], 0
    while (start := stdout.find("{", at)) >= 0:
        obj, at = decoder.raw_decode(stdout, start)
        out.append(obj)
    return out


def run_in(runtime: str, cmd: list[str]) -> subprocess.CompletedProcess[str]:
    """Runs ``cmd`` under mpirun's settings with ``runtime`` as the private runtime
    directory; fails the test if it fails."""
    os.chmod(runtime, 0o700)
    p = subprocess.run(
        cmd, env=mpi_env(runtime), capture_output=True, text=True, timeout=120, check=False
    )
    assert p.returncode == 0, p.stderr
    return p


def test_plain_mpirun_runs_a_python_job():
    with tempfile.TemporaryDirectory() as runtime:
        p = run_in(runtime, ["mpirun", "-n", "3", sys.executable, "-c", PROGRAM])
        got = results(p.stdout)
        assert sorted(r["rank"] for r in got) == [0, 1, 2], p.stdout
        assert all(r["size"] == 3 and r["sum"] == expected(3) for r in got), got
        # The rendezvous file is gone once every rank joined.
        left = [f for _, _, files in os.walk(runtime) for f in files]
        assert left == [], left


def test_heddle_run_launcher_mpirun_from_python():
    with tempfile.TemporaryDirectory() as runtime:
        p = run_in(runtime, [*HEDDLE, "run", "--launcher", "mpirun", "-n", "2", "-c", PROGRAM])
        got = results(p.stdout)
        assert sorted(r["rank"] for r in got) == [0, 1], p.stdout
        assert all(r["sum"] == expected(2) for r in got), got


def test_bad_launcher_flags_are_usage_errors():
    for flags, message in [
        (["--launcher", "pbs"], 'unknown launcher "pbs"'),
        (["--allocate", "sbatch"], "--allocate goes with --launcher slurm"),
    ]:
        p = subprocess.run(
            [*HEDDLE, "run", *flags, "-n", "2", "x.py"],
            env=job_env(),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert p.returncode == 2 and message in p.stderr, p.stderr
