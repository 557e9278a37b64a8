"""Exactly once under failures, from Python: examples/python/exactly_once.py runs under
``heddle run -n 3 --restarts 20`` while the test SIGKILLs a random worker at a random
moment of each of ten attempts; the job must still finish, and its committed output must
hold every input ID exactly once, with each KEY's counts exactly 1..n(KEY), computed here
independently of Heddle (``collections.Counter`` over the input files).

The input is several files of skewed sizes and keys (a few hot keys, a long tail), one
with CRLF line ends and one without a final newline. The source is paced (``--rate``) so
that the job cannot finish within the ten attempts' lifetimes however fast the machine:
every kill lands in a running job. Set ``HEDDLE_TEST_SEED`` to replay a run's choices.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import finish, job_env

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "python" / "exactly_once.py"
WORKERS = 3
KILLS = 10
#: Lines per second over all sources: the input lasts LINES / RATE = 13 s at the least,
#: more than the ten attempts live before their kills (at most ~1.3 s each).
RATE = 2000
LINES = 26_000
#: Longest a worker lives before it is killed, from when the test sees it (seconds).
MAX_LIFE = 1.2


def write_input(directory: Path, rng: random.Random) -> dict[str, str]:
    """Files of lines ``ID KEY``; returns each ID's key."""
    directory.mkdir()
    ids = rng.sample(range(10 * LINES), LINES)
    keys = [f"k{min(int(rng.paretovariate(1.1)), 300)}" for _ in ids]
    # Skewed file sizes: a few large files and several small ones.
    weights = [8, 1, 3, 1, 5, 1, 2]
    bounds = [0]
    for w in weights:
        bounds.append(bounds[-1] + LINES * w // sum(weights))
    bounds[-1] = LINES
    for n, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
        end = "\r\n" if n == 1 else "\n"
        text = "".join(f"{i} {k}{end}" for i, k in zip(ids[lo:hi], keys[lo:hi]))
        if n == 2:
            text = text.rstrip("\n")  # no final newline
        (directory / f"part-{n:02d}.txt").write_bytes(text.encode())
    return {str(i): k for i, k in zip(ids, keys)}


def workers_of(launcher: int) -> set[int]:
    """The launcher's child processes that run the example (its workers; the launcher
    has a helper process of its own), from /proc."""
    found: set[int] = set()
    for task in Path(f"/proc/{launcher}/task").glob("*"):
        try:
            children = [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            continue
        for pid in children:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if cmdline.split(b"\0")[1:2] == [str(EXAMPLE).encode()]:  # python EXAMPLE ...
                found.add(pid)
    return found


def new_workers(proc: subprocess.Popen, old: set[int], timeout: float = 60.0) -> list[int]:
    """The workers of the next attempt: all of its processes, none of an earlier one."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return []
        pids = workers_of(proc.pid)
        if len(pids) == WORKERS and not pids & old:
            return sorted(pids)
        time.sleep(0.02)
    proc.kill()
    raise AssertionError(f"the workers of the next attempt did not all start in {timeout} s")


def committed_rows(output: Path) -> list[list[str]]:
    """The ``ID KEY COUNT`` rows of the committed part files; nothing else may be left."""
    names = sorted(os.listdir(output))
    leftover = [n for n in names if not n.startswith("part-")]
    assert not leftover, f"files other than committed parts in the output: {leftover}"
    rows = []
    for name in names:
        for line in (output / name).read_text().splitlines():
            rows.append(line.split(" "))
    return rows


def check_exactly_once(rows: list[list[str]], key_of: dict[str, str]) -> None:
    assert all(len(r) == 3 for r in rows), [r for r in rows if len(r) != 3][:5]
    ids = collections.Counter(r[0] for r in rows)
    assert set(ids) == set(key_of), (
        f"{len(set(key_of) - set(ids))} input IDs missing, "
        f"{len(set(ids) - set(key_of))} unknown IDs in the output"
    )
    duplicated = {i: c for i, c in ids.items() if c != 1}
    assert not duplicated, f"IDs written more than once: {list(duplicated.items())[:10]}"
    wrong_key = [r for r in rows if key_of[r[0]] != r[1]]
    assert not wrong_key, f"rows with another key than their input line's: {wrong_key[:5]}"
    per_key = collections.Counter(key_of.values())
    counts: dict[str, list[int]] = collections.defaultdict(list)
    for _, key, n in rows:
        counts[key].append(int(n))
    for key, n in per_key.items():
        assert sorted(counts[key]) == list(range(1, n + 1)), (
            f"key {key}: counts are not exactly 1..{n}: "
            f"{sorted(collections.Counter(counts[key]).items())[:10]}"
        )


def test_exactly_once_through_ten_sigkills(tmp_path):
    seed = int(os.environ.get("HEDDLE_TEST_SEED", str(time.time_ns() % 1_000_000)))
    rng = random.Random(seed)
    key_of = write_input(tmp_path / "in", rng)
    output = tmp_path / "out"
    cmd = [
        *(sys.executable, "-m", "heddle", "run", "-n", str(WORKERS), "--restarts", "20"),
        str(EXAMPLE),
        *("--input", str(tmp_path / "in"), "--output", str(output)),
        *("--checkpoint-ms", "100", "--rate", str(RATE)),
    ]
    proc = subprocess.Popen(
        cmd,
        env=job_env({"HEDDLE_TIMEOUT_S": "60"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    seen: set[int] = set()
    killed = []
    try:
        while len(killed) < KILLS:
            pids = new_workers(proc, seen)
            if not pids:
                break  # the job ended: reported below
            seen.update(pids)
            time.sleep(rng.uniform(0.1, MAX_LIFE))
            victim = rng.choice(pids)
            try:
                os.kill(victim, signal.SIGKILL)
            except ProcessLookupError:
                continue  # its attempt ended meanwhile; the next one gets the kill
            killed.append(victim)
        code, out, err = finish(proc, timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    context = f"seed {seed}, {len(killed)} kills\n--- stdout\n{out}\n--- stderr\n{err[-4000:]}"
    assert len(killed) == KILLS, f"the job ended before {KILLS} kills: {context}"
    assert code == 0, context
    assert f"restarting the job: attempt {KILLS + 1} of at most 21" in err, context
    rows = committed_rows(output)
    try:
        check_exactly_once(rows, key_of)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{context}") from None
