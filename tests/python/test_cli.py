"""The ``heddle`` command of the Python package (``python -m heddle``): flags, program
resolution and launcher errors, mirroring the Rust ``heddle run``."""

import subprocess
import sys

from conftest import job_env

HEDDLE = [sys.executable, "-m", "heddle"]


def heddle(*args, env=None, timeout=120):
    return subprocess.run(
        HEDDLE + list(args),
        check=False,
        env=job_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_version_and_help():
    p = heddle("--version")
    assert p.returncode == 0 and p.stdout.strip() == "heddle 0.1.0"
    p = heddle("run", "--help")
    assert p.returncode == 0 and "usage: heddle run" in p.stdout and "--kill-grace" in p.stdout
    p = heddle()
    assert p.returncode == 2 and "usage: heddle" in p.stderr


def test_runs_python_code_modules_and_plain_programs():
    p = heddle("run", "-n", "2", "-c", "import heddle; c = heddle.init(); print(c.rank, c.size)")
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == ["[0] 0 2", "[1] 1 2"]
    p = heddle(
        "run",
        "-n2",
        "--",
        sys.executable,
        "-c",
        "import os; print(os.environ['HEDDLE_WORLD_SIZE'])",
    )
    assert p.returncode == 0 and sorted(p.stdout.splitlines()) == ["[0] 2", "[1] 2"], p.stderr
    p = heddle("run", "--workers=3", "--transport", "tcp", "-m", "heddle", "--version")
    assert p.returncode == 0 and p.stdout.count("heddle 0.1.0") == 3, p.stderr


def test_transport_flag_reaches_workers():
    code = "import os, heddle; heddle.init(); print(os.environ['HEDDLE_TRANSPORT'])"
    p = heddle("run", "-n", "2", "--transport", "tcp", "-c", code)
    assert p.returncode == 0 and sorted(p.stdout.splitlines()) == ["[0] tcp", "[1] tcp"], p.stderr


def test_security_flag_reaches_workers_and_tls_links_carry_the_job():
    code = (
        "import os, heddle; c = heddle.init(); "
        "import numpy as np; x = np.arange(100000, dtype=np.float64) * (c.rank + 1); "
        "y = c.allreduce(x); assert np.array_equal(y, np.arange(100000) * 3.0); "
        "print(os.environ['HEDDLE_SECURITY'])"
    )
    for mode in ("tls", "mac"):
        p = heddle("run", "-n", "2", "--transport", "tcp", "--security", mode, "-c", code)
        out = sorted(p.stdout.splitlines())
        assert p.returncode == 0 and out == [f"[0] {mode}", f"[1] {mode}"], p.stderr


def test_usage_errors_exit_2():
    p = heddle("run", "-n", "2")
    assert p.returncode == 2 and "no program given" in p.stderr
    p = heddle("run", "-n", "two", "x.py")
    assert p.returncode == 2 and "not a whole number" in p.stderr
    p = heddle("run", "--bogus", "x.py")
    assert p.returncode == 2 and "unknown option --bogus" in p.stderr
    p = heddle("run", "-n", "2", "--transport", "carrier-pigeon", "x.py")
    assert p.returncode == 2 and "HEDDLE_TRANSPORT" in p.stderr
    p = heddle("run", "-n", "2", "--security", "ssl", "x.py")
    assert p.returncode == 2 and "HEDDLE_SECURITY" in p.stderr and "tls, mac or none" in p.stderr
    p = heddle("run", "-n", "2", "x.py", env={"HEDDLE_TIMEOUTS": "3"})
    assert p.returncode == 2 and "unknown setting HEDDLE_TIMEOUTS" in p.stderr
    p = heddle("frobnicate")
    assert p.returncode == 2 and "unknown command" in p.stderr


def test_a_program_that_cannot_start_exits_1():
    p = heddle("run", "-n", "2", "/nonexistent/program")
    assert p.returncode == 1
    assert "heddle run: cannot start" in p.stderr and "/nonexistent/program" in p.stderr


def test_worker_exit_code_is_the_job_exit_code():
    p = heddle(
        "run",
        "-n",
        "3",
        "-c",
        "import os, sys, heddle; c = heddle.init(); sys.exit(7 if c.rank == 2 else 0)",
    )
    assert p.returncode == 7, p.stderr


def test_checkpoint_flags_reach_the_workers_sessions(tmp_path):
    code = (
        "from heddle.data import Session; c = Session().stream_checkpoints; "
        "print(c.interval, c.dir, c.job)"
    )
    ckpt = tmp_path / "ckpt"
    flags = ["--checkpoint-interval", "0.25", "--checkpoint-dir", str(ckpt)]
    p = heddle("run", "-n", "2", *flags, "-c", code)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == [f"[0] 0.25 {ckpt} python", f"[1] 0.25 {ckpt} python"]
    for bad in ("0", "-1", "nan", "inf", "1e9"):
        p = heddle("run", "-n", "1", "--checkpoint-interval", bad, "-c", "pass")
        assert p.returncode == 2 and f"--checkpoint-interval {bad}:" in p.stderr, (bad, p.stderr)
        assert "HEDDLE_CHECKPOINT_INTERVAL_S" in p.stderr, p.stderr
    p = heddle("run", "-n", "1", "--checkpoint-interval", "often", "-c", "pass")
    assert p.returncode == 2 and "--checkpoint-interval 'often' is not a number" in p.stderr
    p = heddle("run", "-n", "1", "--checkpoint-dir", str(ckpt), "-c", "pass")
    assert p.returncode == 2 and "--checkpoint-dir needs --checkpoint-interval" in p.stderr


def test_alignment_timeout_flag_reaches_the_workers_and_is_checked():
    code = "import os; print(os.environ['HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S'])"
    for value in ("0.005", "off", "0"):
        p = heddle("run", "-n", "1", "--alignment-timeout", value, "-c", code)
        assert p.returncode == 0 and p.stdout.strip() == f"[0] {value}", (value, p.stderr)
    for bad, why in (("-1", "must be 0 or more"), ("soon", "is not a number")):
        p = heddle("run", "-n", "1", "--alignment-timeout", bad, "-c", "pass")
        assert p.returncode == 2 and why in p.stderr, (bad, p.stderr)
    # A bad value given to the workers directly is refused by their sessions, named.
    env = {"HEDDLE_CHECKPOINT_INTERVAL_S": "1", "HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S": "x"}
    code = "from heddle.data import Session; Session()"
    p = heddle("run", "-n", "1", "-c", code, env=env)
    assert p.returncode != 0 and "HEDDLE_CHECKPOINT_ALIGNMENT_TIMEOUT_S" in p.stderr, p.stderr


def test_a_config_file_gives_defaults_the_command_line_and_environment_override(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(
        'workers = 3\ntransport = "tcp"\n\n[settings]\nHEDDLE_TIMEOUT_S = 77\n\n'
        '[resources]\nmemory = "200MiB"\n'
    )
    code = (
        "import os; e = os.environ; "
        "print(e['HEDDLE_WORLD_SIZE'], e['HEDDLE_TRANSPORT'], e['HEDDLE_TIMEOUT_S'], "
        "e['HEDDLE_TASK_MEMORY'])"
    )
    p = heddle("run", "--config", str(job), "-c", code)
    assert p.returncode == 0, p.stderr
    assert sorted(p.stdout.splitlines()) == [f"[{r}] 3 tcp 77 200MiB" for r in range(3)]
    # The command line wins over the file, the environment over its settings; the file
    # may also come from HEDDLE_CONFIG.
    env = {"HEDDLE_CONFIG": str(job), "HEDDLE_TIMEOUT_S": "55"}
    p = heddle("run", "-n", "1", "-c", code, env=env)
    assert p.returncode == 0 and p.stdout.strip() == "[0] 1 tcp 55 200MiB", p.stderr


def test_mistakes_in_a_config_file_exit_2_naming_file_line_and_key(tmp_path):
    job = tmp_path / "job.toml"
    for body, says in (
        ("workers = 2\nrestart = 1\n", "job.toml:2: unknown option `restart`; did you mean"),
        ("[settings]\nHEDDLE_TIMOUT_S = 5\n", "did you mean HEDDLE_TIMEOUT_S?"),
        ('[resources]\nmemory = "12 parsecs"\n', "[resources] memory = '12 parsecs': "),
        ('[resources]\nisolation = "vm"\n', "use auto, thread or process"),
        ("workers = [\n", "job.toml:1: not a valid config file"),
    ):
        job.write_text(body)
        p = heddle("run", "--config", str(job), "-c", "pass")
        assert p.returncode == 2 and says in p.stderr, (body, p.stderr)
    p = heddle("run", "--config", str(tmp_path / "missing.toml"), "-c", "pass")
    assert p.returncode == 2 and "cannot read the config file" in p.stderr, p.stderr
