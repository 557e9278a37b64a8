"""The launcher's progress bar: drawn on a terminal (a pseudo-terminal here) with the stage,
the records done of the known total (the bytes read, for a text file), the rate and the
time left; never drawn into a pipe or with ``--progress never``."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys

from conftest import JOB_TIMEOUT, JOBS, job_env

RECORDS = 6_000_000


def run(*flags: str, terminal: bool, job: tuple[str, ...] = ()) -> tuple[int, str, str]:
    cmd = [sys.executable, "-m", "heddle", "run", "-n", "2", "--dashboard", "off"]
    # Reports five times a second, so that a short job shows a rate.
    cmd += ["--heartbeat-interval", "0.2", *flags]
    cmd += list(job) or [str(JOBS / "progress_count.py"), str(RECORDS)]
    if not terminal:
        p = subprocess.run(
            cmd, check=False, env=job_env(), capture_output=True, text=True, timeout=JOB_TIMEOUT
        )
        return p.returncode, p.stdout, p.stderr
    leader, follower = pty.openpty()
    p = subprocess.Popen(cmd, env=job_env(), stdout=subprocess.PIPE, stderr=follower, text=True)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the last writer closed the terminal
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    out, _ = p.communicate(timeout=JOB_TIMEOUT)
    return p.returncode, out, seen.decode(errors="replace")


def test_a_batch_job_on_a_terminal_shows_its_stage_records_rate_and_eta():
    code, out, err = run(terminal=True)
    assert code == 0 and f'"count": {RECORDS // 2}' in out, err
    assert re.search(r"stage \d+: generate#0 → map#1 → filter#2", err), err
    # The known total, a bar, a rate and the time left, as the job went.
    total = f"{RECORDS:,}"
    bars = [line for line in re.split(r"[\r\n]", err) if f"/{total} records" in line]
    assert bars, err
    assert any(re.search(r"\[[=> ]{30}\]", b) for b in bars), bars
    assert any(re.search(r"[\d.]+ [KM]?/s, ETA ", b) for b in bars), bars


def test_a_text_file_job_shows_the_bytes_read_of_the_file(tmp_path):
    path = tmp_path / "lines.txt"
    lines = 2_000_000
    with open(path, "w") as f:
        for i in range(lines // 4):
            f.write(f"w{i} alpha\nbeta gamma\r\n\nlast of four {i}\n")
    size = path.stat().st_size
    code, out, err = run(terminal=True, job=(str(JOBS / "progress_lines.py"), str(path)))
    assert code == 0 and f'"count": {lines}' in out, err
    assert re.search(r"stage \d+: text_file#0 → map#\d+", err), err
    # indicatif's binary units: the file's size as the total.
    total = f"{size / 2**20:.2f} MiB"
    bars = [line for line in re.split(r"[\r\n]", err) if f"/{total}" in line]
    assert bars, (total, err)
    assert any(re.search(r"\[[=> ]{30}\]", b) for b in bars), bars
    assert any(re.search(r"[\d.]+ [KM]iB/s, ETA ", b) for b in bars), bars


def test_no_bar_into_a_pipe_or_with_progress_never():
    code, _, err = run(terminal=False)
    assert code == 0 and "records" not in err, err
    code, _, err = run("--progress", "never", terminal=True)
    assert code == 0 and "records" not in err and "stage" not in err, err
