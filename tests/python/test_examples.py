"""The Python examples (examples/python/wordcount.py, kmeans.py, tasks.py,
stream_window.py, sort.py, stream_events.py) under ``heddle run``: each checks itself
against a plain Python reference and prints the Rust examples' JSON line; their generated
datasets match the Rust examples' (when those are built)."""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_job

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "python"
RUST = ROOT / "target" / "release" / "examples"
HEDDLE = ROOT / "target" / "release" / "heddle"
sys.path.insert(0, str(EXAMPLES))
import common  # noqa: E402


def report(job, example):
    assert job.returncode == 0, job
    rep = job.reports[0]
    assert rep["example"] == example and rep["api"] == "python" and rep["ok"] is True, job
    return rep


@pytest.mark.parametrize("n, counting", [(2, "native"), (3, "native"), (2, "python")])
def test_wordcount_on_generated_text(n, counting, tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    flags = ["--python", "--block-bytes", "100000"] if counting == "python" else []
    rep = report(
        run_job(
            n,
            str(EXAMPLES / "wordcount.py"),
            "--generate",
            "--megabytes",
            "2",
            "--seed",
            "5",
            *flags,
            env=env,
        ),
        "wordcount",
    )
    text = (tmp_path / "heddle-words-2mb-seed5.txt").read_text()
    assert rep["words"] == len(text.split()) and rep["workers"] == n and rep["counting"] == counting
    assert set(rep) == {"example", "api", "counting", "ok", "words", "distinct", "job_s", "workers"}


def test_wordcount_input_and_output(tmp_path):
    (tmp_path / "in.txt").write_text("the cat  the dog\n\nand\tthe end\n" * 100)
    out = tmp_path / "out"
    rep = report(
        run_job(
            2,
            str(EXAMPLES / "wordcount.py"),
            "--input",
            str(tmp_path / "in.txt"),
            "--output",
            str(out),
        ),
        "wordcount",
    )
    assert (rep["words"], rep["distinct"]) == (700, 5)
    lines = [x for p in sorted(out.iterdir()) for x in p.read_text().splitlines()]
    assert sorted(lines) == sorted(["the\t300", "cat\t100", "dog\t100", "and\t100", "end\t100"])


def test_generated_text_is_the_rust_examples(tmp_path):
    rust = RUST / "wordcount"
    if not rust.exists():
        pytest.skip("the Rust examples are not built (make build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    env["TMPDIR"] = str(tmp_path)
    done = subprocess.run(
        [str(rust), "--generate", "--megabytes", "1", "--seed", "9"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done
    common.generate_words(tmp_path / "python.txt", 1, 9)
    assert (tmp_path / "python.txt").read_bytes() == (
        tmp_path / "heddle-words-1mb-seed9.txt"
    ).read_bytes()


@pytest.mark.parametrize("n", [2, 3])
def test_kmeans_on_generated_points(n, tmp_path):
    rep = report(
        run_job(
            n,
            str(EXAMPLES / "kmeans.py"),
            "--generate",
            "--points",
            "30000",
            "--k",
            "8",
            "--iterations",
            "6",
            "--output",
            str(tmp_path),
        ),
        "kmeans",
    )
    assert (rep["points"], rep["k"], rep["iterations"], rep["workers"]) == (30000, 8, 6, n)
    assert rep["max_center_error"] < 1e-6
    assert np.loadtxt(tmp_path / "centers.csv", delimiter=",", skiprows=1).shape == (8, 2)


@pytest.mark.parametrize("fmt", ["csv", "npy"])
def test_kmeans_reads_csv_and_npy(fmt, tmp_path):
    pts = common.points(4, 0, 5000)
    path = tmp_path / f"points.{fmt}"
    if fmt == "npy":
        np.save(path, pts)
    else:
        np.savetxt(path, pts, delimiter=",", header="x,y", comments="", fmt="%.17g")
    rep = report(
        run_job(
            2, str(EXAMPLES / "kmeans.py"), "--input", str(path), "--k", "5", "--iterations", "4"
        ),
        "kmeans",
    )
    assert rep["points"] == 5000


def test_generated_points_are_the_rust_examples(tmp_path):
    rust = RUST / "kmeans"
    if not rust.exists():
        pytest.skip("the Rust examples are not built (make build)")
    args = ["--generate", "--points", "20000", "--seed", "3", "--k", "6", "--iterations", "3"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    done = subprocess.run(
        [str(rust), *args, "--output", str(tmp_path / "rust")],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done
    report(
        run_job(1, str(EXAMPLES / "kmeans.py"), *args, "--output", str(tmp_path / "python")),
        "kmeans",
    )
    rust_centers = np.loadtxt(tmp_path / "rust" / "centers.csv", delimiter=",", skiprows=1)
    python_centers = np.loadtxt(tmp_path / "python" / "centers.csv", delimiter=",", skiprows=1)
    assert np.abs(rust_centers - python_centers).max() < 1e-9


@pytest.mark.parametrize("n, tasks", [(1, 1), (2, 1), (2, 500), (3, 7)])
def test_tasks_sum_their_squares(n, tasks):
    rep = report(run_job(n, str(EXAMPLES / "tasks.py"), "--tasks", str(tasks)), "tasks")
    assert (rep["tasks"], rep["workers"]) == (tasks, n)
    want = sum(i * i for i in range(tasks))
    assert rep["detail"] == f"sum {want}, want {want}"


STREAM_KEYS = {
    "example",
    "api",
    "ok",
    "records",
    "windows",
    "job_s",
    "records_per_s",
    "records_per_s_per_worker",
    "latency_p50_ms",
    "latency_p99_ms",
    "workers",
}


def window_counts(path):
    """``(start, end, word) -> count`` of a ``windows.tsv``."""
    rows = (line.split("\t") for line in path.read_text(encoding="utf-8").splitlines())
    return {(int(a), int(b), w): int(n) for a, b, w, n in rows}


@pytest.mark.parametrize("n", [2, 3])
def test_stream_window_on_generated_events(n, tmp_path):
    rep = report(
        run_job(
            n,
            str(EXAMPLES / "stream_window.py"),
            "--generate",
            "--events",
            "30000",
            "--rate",
            "20000",
            "--seed",
            "4",
            "--output",
            str(tmp_path),
        ),
        "stream_window",
    )
    assert (rep["records"], rep["workers"]) == (30000, n) and set(rep) == STREAM_KEYS
    assert sum(window_counts(tmp_path / "windows.tsv").values()) == 30000


def test_stream_window_on_a_file(tmp_path):
    lines = [
        " ".join(["the", "naïve", "日本語", f"w{i % 7}", "the"][: 1 + i % 5]) for i in range(400)
    ]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    rep = report(
        run_job(
            2,
            str(EXAMPLES / "stream_window.py"),
            "--input",
            str(tmp_path / "in.txt"),
            "--window-ms",
            "7",
            "--output",
            str(tmp_path / "out"),
        ),
        "stream_window",
    )
    want = {}
    for i, line in enumerate(lines):
        for w in line.split():
            key = (i - i % 7, i - i % 7 + 7, w)
            want[key] = want.get(key, 0) + 1
    assert window_counts(tmp_path / "out" / "windows.tsv") == want
    assert (rep["records"], rep["windows"]) == (sum(want.values()), len(want))


def test_stream_window_matches_the_rust_example(tmp_path):
    rust = RUST / "stream_window"
    if not rust.exists():
        pytest.skip("the Rust examples are not built (make build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEDDLE_")}
    (tmp_path / "in.txt").write_text("".join(f"a{i % 3} b{i % 5} c\n" for i in range(300)))
    for args, name in [
        (["--input", str(tmp_path / "in.txt")], "file"),
        (["--generate", "--events", "20000", "--seed", "6"], "generated"),
    ]:
        done = subprocess.run(
            [str(rust), *args, "--output", str(tmp_path / "rust" / name)],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done
        report(
            run_job(
                2,
                str(EXAMPLES / "stream_window.py"),
                *args,
                "--output",
                str(tmp_path / "python" / name),
            ),
            "stream_window",
        )
    # Line times: the same windows. Clock times: the same words drawn, counted alike.
    assert window_counts(tmp_path / "rust" / "file" / "windows.tsv") == window_counts(
        tmp_path / "python" / "file" / "windows.tsv"
    )
    per_word = []
    for side in ("rust", "python"):
        totals = {}
        for (_, _, w), count in window_counts(
            tmp_path / side / "generated" / "windows.tsv"
        ).items():
            totals[w] = totals.get(w, 0) + count
        per_word.append(totals)
    assert per_word[0] == per_word[1]


def _records(n: int, seed: int) -> bytes:
    """``n`` 101-byte lines: a 10-byte key (with repeats), 90 bytes, a newline."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(b"ABCDEFGHIJ", np.uint8)
    rec = np.empty((n, 101), np.uint8)
    rec[:, :10] = alphabet[rng.integers(0, len(alphabet), size=(n, 10))]
    rec[:, 3:10] = ord("k")  # few distinct keys: equal keys across partitions
    rec[:, 10:100] = rng.integers(ord("a"), ord("z") + 1, size=(n, 90), dtype=np.uint8)
    rec[:, 100] = ord("\n")
    return rec.tobytes()


@pytest.mark.parametrize("n, sorting", [(2, "native"), (3, "native"), (2, "python"), (3, "python")])
def test_sort_writes_records_in_key_order(n, sorting, tmp_path):
    """Natively: 101-byte lines (with a tiny memory budget, so runs spill); with
    --python: raw 100-byte records."""
    data = _records(20_000, seed=n)
    src = tmp_path / "records.txt"
    src.write_bytes(data)
    out = tmp_path / "sorted"
    flags = (
        ["--python", "--block-bytes", str(101 * 997)]
        if sorting == "python"
        else ["--mem-budget", "100000"]
    )
    rep = report(
        run_job(n, str(EXAMPLES / "sort.py"), "--input", str(src), "--output", str(out), *flags),
        "sort",
    )
    assert (
        rep["records"] == 20_000
        and rep["workers"] == n
        and rep["partitions"] == n
        and rep["sorting"] == sorting
    )
    parts = sorted(p for p in out.iterdir() if p.name.startswith("part-"))
    assert [p.name for p in parts] == [f"part-{i:05d}" for i in range(n)]
    # The native writer commits its parts with a _SUCCESS marker (the --python path writes
    # its own part files).
    assert (out / "_SUCCESS").exists() == (sorting == "native")
    got = b"".join(p.read_bytes() for p in parts)
    stride = 100 if sorting == "python" else 101
    records = [data[i : i + 100] for i in range(0, len(data), 101)]
    out_records = [got[i : i + 100] for i in range(0, len(got), stride)]
    assert len(got) == stride * len(records)
    if stride == 101:
        assert got[100::101] == b"\n" * len(records)
    assert [r[:10] for r in out_records] == sorted(r[:10] for r in records)
    assert sorted(out_records) == sorted(records)


@pytest.mark.parametrize("n", [2, 3])
def test_stream_events_counts_event_time_windows(n, tmp_path):
    rng = np.random.default_rng(11)
    events = 30_000
    ts = (
        np.arange(events, dtype=np.int64) * 5
        + 1_700_000_000_000
        - rng.integers(0, 2_000, size=events)
    )
    keys = rng.integers(0, 50, size=events)
    src = tmp_path / "events"
    src.mkdir()
    for i in range(3):
        lo, hi = events * i // 3, events * (i + 1) // 3
        (src / f"part-{i:05d}.csv").write_text(
            "".join(f"{t},{k}\n" for t, k in zip(ts[lo:hi].tolist(), keys[lo:hi].tolist()))
        )
    (src / "_COMPLETE").write_text("")
    out = tmp_path / "counts"
    rep = report(
        run_job(n, str(EXAMPLES / "stream_events.py"), "--input", str(src), "--output", str(out)),
        "stream_events",
    )
    assert rep["events"] == events and rep["late"] == 0 and rep["workers"] == n
    got = {}
    for part in out.iterdir():
        for line in part.read_text().splitlines():
            w, k, c = map(int, line.split(","))
            got[(w, k)] = c
    want = {}
    for t, k in zip(ts.tolist(), keys.tolist()):
        want[(t // 10_000, k)] = want.get((t // 10_000, k), 0) + 1
    assert got == want and rep["windows"] == len(want)


def _mixed_input(path: Path) -> Path:
    """Dense short-token text with CRLF lines, tabs, non-ASCII words and no final newline."""
    import random

    rng = random.Random(7)
    vocab = ["the", "a", "of", "Alpha", "beta", "GAMMA", "δέλτα", "über", "ok", "x", "Hello"]
    lines = []
    for i in range(5000):
        words = [
            rng.choice(vocab) + (str(rng.randint(0, 30)) if rng.random() < 0.3 else "")
            for _ in range(rng.randint(0, 10))
        ]
        lines.append("\t".join(words) if i % 13 == 0 else " ".join(words))
    path.write_text("\r\n".join(lines[:50]) + "\n" + "\n".join(lines[50:]))
    return path


@pytest.mark.parametrize("program", ["rust", "python"])
def test_mixed_language_pipeline_counts_like_python(program, tmp_path):
    text = _mixed_input(tmp_path / "in.txt")
    out = tmp_path / "out"
    if program == "rust":
        cmd = [str(ROOT / "target/release/examples/mixed_pipeline")]
    else:
        cmd = [sys.executable, str(ROOT / "examples/python/mixed_pipeline.py")]
    r = subprocess.run(
        [str(HEDDLE), "run", "-n", "2", "--", *cmd, "--input", str(text), "--output", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1].split("] ", 1)[1])
    assert summary["ok"] is True
    counts: collections.Counter[str] = collections.Counter()
    for line in text.read_bytes().split(b"\n"):
        for w in line.decode().split():
            w = "".join(c.lower() if "A" <= c <= "Z" else c for c in w)
            if len(w) >= 3:
                counts[w] += 1
    got = {}
    for part in out.glob("part-*"):
        for line in part.read_text().splitlines():
            word, n = line.rsplit(" ", 1)
            got[word] = int(n)
    assert got == dict(counts)
    assert not list(out.glob(".*tmp*")), "no temporary part is left behind"
