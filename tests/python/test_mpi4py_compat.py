"""Programs written for mpi4py run unchanged on Heddle: each program of
``mpi4py_programs/`` runs under ``mpirun`` with the real mpi4py (Open MPI, from
``benches/.venv-mpi``, which ``make test`` sets up with ``benches/mpi/setup.sh``) and under
``heddle run --mpi4py``, and rank 0's output must be the same. Then what only Heddle
checks: the errors mpi4py users meet (truncation, a receive nobody sends, an unknown
rank), calls Heddle does not offer, and that the ``mpi4py`` package exists for that job
only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import job_env

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = Path(__file__).resolve().parent / "mpi4py_programs"
MPI4PY_PYTHON = ROOT / "benches" / ".venv-mpi" / "bin" / "python"
RANKS = 3
TIMEOUT = 120


def reference_python() -> Path:
    """The interpreter with the real mpi4py; its absence is a failure, not a skip."""
    if not MPI4PY_PYTHON.exists() or shutil.which("mpirun") is None:
        pytest.fail(
            f"the real mpi4py is missing ({MPI4PY_PYTHON}) or mpirun is: run "
            "benches/mpi/setup.sh (make test-python does)"
        )
    return MPI4PY_PYTHON


def under_mpirun(program: Path, stdin: str = "", *, module: str | None = None) -> str:
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env = {k: v for k, v in env.items() if not k.startswith("HEDDLE_")}
    cmd = ["mpirun", "--oversubscribe", "-n", str(RANKS), str(reference_python())]
    cmd += ["-m", module, str(program)] if module else [str(program)]
    proc = subprocess.run(
        cmd, input=stdin, capture_output=True, text=True, timeout=TIMEOUT, env=env, check=False
    )
    assert proc.returncode == 0, f"mpirun failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def under_heddle(
    program: Path, stdin: str = "", *, flag: bool = True, n: int = RANKS, module: str | None = None
) -> str:
    cmd = [sys.executable, "-m", "heddle", "run", "-n", str(n)]
    cmd += ["--mpi4py"] if flag else []
    cmd += ["-m", module] if module else []
    proc = subprocess.run(
        [*cmd, str(program)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=job_env(),
        check=False,
    )
    assert proc.returncode == 0, f"heddle run failed:\n{proc.stdout}\n{proc.stderr}"
    # Only rank 0 prints; the launcher prefixes its lines with "[0] ".
    return "".join(line.removeprefix("[0] ") for line in proc.stdout.splitlines(keepends=True))


@pytest.mark.parametrize(
    "name",
    [
        "hello",
        "cpi",
        "ring",
        "reductions",
        "vcollectives",
        "split",
        "p2p_status",
        "datatypes",
        "nonblocking",
        "persistent",
        "nbx",
    ],
)
def test_the_same_output_as_mpi4py_on_open_mpi(name: str) -> None:
    program = PROGRAMS / f"{name}.py"
    expected = under_mpirun(program)
    assert expected.strip(), "the reference printed nothing"
    assert under_heddle(program) == expected


def test_mpi4py_futures_executors_give_the_same_results() -> None:
    comm = PROGRAMS / "futures_comm.py"
    assert under_heddle(comm) == under_mpirun(comm)
    pool = PROGRAMS / "futures_pool.py"
    expected = under_mpirun(pool, module="mpi4py.futures")
    assert "starmap [32, 27, 100]" in expected
    assert under_heddle(pool, module="mpi4py.futures") == expected


def test_standard_input_goes_to_rank_0_as_with_mpirun() -> None:
    program = PROGRAMS / "stdin_echo.py"
    text = "first line\nsecond\r\nno final newline"
    expected = under_mpirun(program, text)
    assert "lines per rank [3, 3, 3] first first line" in expected
    assert under_heddle(program, text) == expected


def write(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(code))
    return path


def test_without_the_flag_mpi4py_is_not_provided(tmp_path: Path) -> None:
    program = write(
        tmp_path,
        """
        import importlib.util, os
        found = importlib.util.find_spec("mpi4py")
        print("mpi4py", None if found is None else found.origin)
        """,
    )
    out = under_heddle(program, flag=False, n=1)
    assert out.strip() == "mpi4py None", out


def test_the_package_lives_in_the_job_directory_and_goes_with_it(tmp_path: Path) -> None:
    program = write(
        tmp_path,
        """
        import mpi4py, os, stat
        from mpi4py import MPI
        import mpi4py.MPI as again
        import heddle.MPI
        assert MPI is heddle.MPI and again is heddle.MPI
        home = os.path.dirname(os.path.dirname(mpi4py.__file__))
        print(home.startswith(os.environ["HEDDLE_JOB_DIR"]),
              oct(stat.S_IMODE(os.stat(home).st_mode)), mpi4py.__version__)
        print("HOME", home)
        """,
    )
    out = under_heddle(program, n=1)
    assert out.splitlines()[0] == "True 0o700 4.0.0", out
    home = out.splitlines()[1].removeprefix("HOME ")
    assert not Path(home).exists(), f"{home} was left behind"


ERRORS = """
    import numpy as np
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    try:
        comm.Send(np.zeros(1), dest=comm.size)
    except MPI.Exception as e:
        print("bad rank", e.Get_error_class() == MPI.ERR_RANK, str(e).split(":")[0])
    try:
        comm.Mprobe()
    except NotImplementedError as e:
        print("unsupported", "Mprobe" in str(e))
    print("no Win", not hasattr(MPI, "Win"))
    r = comm.Isend(np.zeros(1), dest=MPI.PROC_NULL)
    r.Wait()
    print("waited twice", r.Wait(), r == MPI.REQUEST_NULL)
    if rank == 1:
        try:
            comm.Recv(np.zeros(1), source=0, tag=77)
        except MPI.Exception as e:
            text = str(e)
            print("never sent", e.Get_error_class() == MPI.ERR_PENDING,
                  "rank 1" in text and "rank 0 with tag 77" in text)
    else:
        import time
        time.sleep(3)  # stays until rank 1's receive has timed out (after 2 s)
    comm.Barrier()
    """


def test_errors_name_their_class_and_a_recv_nobody_sends_times_out(tmp_path: Path) -> None:
    program = write(tmp_path, ERRORS)
    proc = subprocess.run(
        [sys.executable, "-m", "heddle", "run", "-n", "2", "--mpi4py", str(program)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=job_env({"HEDDLE_TIMEOUT_S": "2"}),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    for line in (
        "[0] bad rank True MPI_ERR_RANK",
        "[0] unsupported True",
        "[0] no Win True",
        "[0] waited twice True True",
        "[1] never sent True True",
    ):
        assert line in proc.stdout, proc.stdout


def test_a_message_longer_than_the_buffer_is_err_truncate(tmp_path: Path) -> None:
    # Its own process: a truncated message ends the job (the stream of messages is lost).
    program = write(
        tmp_path,
        """
        import numpy as np
        from heddle import MPI
        comm = MPI.COMM_SELF
        comm.Send(np.arange(4.0), dest=0, tag=1)
        try:
            comm.Recv(np.zeros(2), source=0, tag=1)
        except MPI.Exception as e:
            print("truncate", e.Get_error_class() == MPI.ERR_TRUNCATE, str(e))
        """,
    )
    proc = subprocess.run(
        [sys.executable, str(program)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=job_env(),
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "truncate True MPI_ERR_TRUNCATE: message truncated: message of 32 bytes" in proc.stdout
