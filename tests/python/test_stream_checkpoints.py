"""Checkpoints of Python streams and streaming task jobs in a world of one: keyed state
(``Stream.map_with_state``) against a plain Python reference, with and without
checkpoints; runs stopped, then failing, then resumed from the same checkpoint directory
give every record exactly once in the committed output; ``Session.stream_text``; task
state (``ctx.state``) restored after a stop; and the errors: a checkpoint directory of
another job or stream, bad arguments. The same under real failures (SIGKILLed workers)
is test_exactly_once.py."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

import heddle
from heddle.data import Checkpoints, Session, StopHandle
from heddle.task import Compute, Edge, Job, Source, TaskGraph

TOTAL = 20_000
KEYS = 7
#: A key's state is dropped after this many records (its count starts again).
DROP_AFTER = 1000


def key_of(i: int) -> str:
    return f"k{i * i % KEYS}"


def count_step(key, value, state):
    """The state function under test: a running ``[count, total]`` per key (a list, so
    it is pickled), dropped every DROP_AFTER records."""
    n, total = state if state is not None else [0, 0]
    n, total = n + 1, total + value
    return f"{value} {key} {n} {total}", (None if n == DROP_AFTER else [n, total])


def reference(records) -> list[str]:
    """``count_step`` over ``(key, value)`` records with a plain dict."""
    states: dict = {}
    out = []
    for key, value in records:
        line, states[key] = count_step(key, value, states.get(key))
        if states[key] is None:
            del states[key]
        out.append(line)
    return out


def committed_lines(output: Path) -> list[str]:
    """The lines of the committed parts (hidden files are parts in progress)."""
    names = sorted(n for n in os.listdir(output) if not n.startswith("."))
    assert all(n.startswith("part-00000-") for n in names), names
    return [line for n in names for line in (output / n).read_text().splitlines()]


def test_map_with_state_matches_a_plain_reference():
    records = [(key_of(i), i) for i in range(5000)]
    s = Session(heddle.init())
    assert s.stream_checkpoints is None
    got = s.stream_from_list(records).map_with_state(count_step).collect()
    assert got == reference(records)


def test_map_with_state_errors_are_clear():
    s = Session(heddle.init())
    with pytest.raises(heddle.ArgumentError, match=r"must return a pair \(output, new_state\)"):
        s.stream_from_list([("a", 1)]).map_with_state(lambda k, v, st: v).collect()
    with pytest.raises(heddle.ArgumentError, match="needs \\(key, value\\) pairs"):
        s.stream_from_list([1]).map_with_state(count_step).collect()
    with pytest.raises(ZeroDivisionError):
        s.stream_from_list([("a", 1)]).map_with_state(lambda k, v, st: (1 / 0, st)).collect()


def run_counts(
    tmp: Path, stop_at: int | None = None, raise_at: int | None = None, rate: int | None = None
) -> None:
    """``count_step`` over TOTAL generated records (``rate`` a second at most) into
    ``tmp/out``, checkpointed in ``tmp/ckpt`` every 20 ms; the source stops itself at
    ``stop_at``, the state function raises at ``raise_at``."""
    s = Session(heddle.init(), checkpoint_interval=0.02, checkpoint_dir=tmp / "ckpt", job="counts")
    assert s.stream_checkpoints == Checkpoints(str(tmp / "ckpt"), "counts", 0.02)
    stop = StopHandle()

    def make(i):
        if i == stop_at:
            stop.stop()
        return (key_of(i), i)

    def step(key, value, state):
        if raise_at is not None and value >= raise_at:
            raise RuntimeError(f"failing at record {value}")
        return count_step(key, value, state)

    records = s.stream_generate(make, rate=rate, limit=TOTAL)
    records.map_with_state(step).write_lines(tmp / "out", stop=stop)


def test_stopped_failed_and_resumed_runs_write_each_record_once(tmp_path):
    want = reference([(key_of(i), i) for i in range(TOTAL)])
    # Stopped at record 3000: its sources end (at most one slice later), and the last
    # checkpoint commits what went through.
    run_counts(tmp_path, stop_at=3000)
    first = committed_lines(tmp_path / "out")
    assert 3000 <= len(first) < TOTAL and first == want[: len(first)]
    # Resumed, then failing at record 8000 (paced: checkpoints complete meanwhile, or
    # not): the output stays what checkpoints committed.
    with pytest.raises(RuntimeError, match="failing at record 8000"):
        run_counts(tmp_path, raise_at=8000, rate=20_000)
    second = committed_lines(tmp_path / "out")
    assert len(first) <= len(second) < 8000 and second == want[: len(second)]
    # Resumed again, to the end: every record once, every count as without failures.
    run_counts(tmp_path)
    assert committed_lines(tmp_path / "out") == want
    assert not [f for f in os.listdir(tmp_path / "out") if f.startswith(".")]


def test_checkpoints_of_another_job_or_stream_are_refused(tmp_path):
    run_counts(tmp_path, stop_at=100)
    ckpt = tmp_path / "ckpt"
    other = Session(heddle.init(), checkpoint_interval=0.02, checkpoint_dir=ckpt, job="other")
    stream = other.stream_generate(lambda i: (key_of(i), i), limit=10)
    with pytest.raises(heddle.DataError, match="another job") as e:
        stream.map_with_state(count_step).write_lines(tmp_path / "other-out")
    assert str(ckpt) in str(e.value)
    # The same job name with another stream (no keyed state): refused, naming the file.
    same = Session(heddle.init(), checkpoint_dir=ckpt, job="counts")
    with pytest.raises(heddle.DataError, match="another graph") as e:
        same.stream_generate(lambda i: i, limit=10).write_lines(tmp_path / "plain-out")
    assert str(ckpt) in str(e.value)


def test_a_checkpointed_sink_resumes_its_directory_only(tmp_path):
    s = Session(heddle.init(), checkpoint_dir=tmp_path / "ckpt", job="sink")
    assert s.stream_checkpoints == Checkpoints(str(tmp_path / "ckpt"), "sink", None)
    lines = s.stream_from_list(["a", "b"])
    with pytest.raises(heddle.ArgumentError, match='mode="overwrite"'):
        lines.write_lines(tmp_path / "out", mode="overwrite")
    lines.write_lines(tmp_path / "out")  # only the last checkpoint, at the end
    assert committed_lines(tmp_path / "out") == ["a", "b"]
    # Committed output of a run whose checkpoints are gone is not mixed with a new run's.
    fresh = Session(heddle.init(), checkpoint_dir=tmp_path / "ckpt2", job="sink")
    with pytest.raises(heddle.DataError, match="committed output of an earlier run"):
        fresh.stream_from_list(["c"]).write_lines(tmp_path / "out")


def test_checkpoint_arguments_and_environment(tmp_path, monkeypatch):
    comm = heddle.init()
    for bad in (0, -1.0, float("nan"), float("inf")):
        with pytest.raises(heddle.ArgumentError, match="checkpoint_interval must be a positive"):
            Session(comm, checkpoint_interval=bad)
    with pytest.raises(TypeError, match="checkpoint_interval must be a number"):
        Session(comm, checkpoint_interval="1")  # type: ignore[arg-type]
    with pytest.raises(heddle.ArgumentError, match="must name the job"):
        Session(comm, checkpoint_dir=tmp_path, job="a/b")
    # heddle run --checkpoint-interval 0.5 --checkpoint-dir D (the job: the script's name)
    monkeypatch.setenv("HEDDLE_CHECKPOINT_INTERVAL_S", "0.5")
    monkeypatch.setenv("HEDDLE_CHECKPOINT_DIR", str(tmp_path / "env"))
    found = Session(comm).stream_checkpoints
    assert found is not None and (found.dir, found.interval) == (str(tmp_path / "env"), 0.5)
    assert Session(comm, checkpoint_interval=2, job="j").stream_checkpoints == Checkpoints(
        str(tmp_path / "env"), "j", 2.0
    )
    monkeypatch.delenv("HEDDLE_CHECKPOINT_DIR")
    found = Session(comm, job="mine").stream_checkpoints
    assert found is not None and Path(found.dir).name == "mine", found
    monkeypatch.setenv("HEDDLE_CHECKPOINT_INTERVAL_S", "0")
    with pytest.raises(heddle.ConfigError, match="HEDDLE_CHECKPOINT_INTERVAL_S"):
        Session(comm)


def test_stream_text_reads_every_line_of_every_file(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"1 x\r\n2 y\r\n")
    (tmp_path / "b.txt").write_bytes(b"3 x\n\n4 z")  # an empty line, no final newline
    (tmp_path / ".hidden").write_bytes(b"never\n")
    s = Session(heddle.init())
    assert s.stream_text(tmp_path).collect() == ["1 x", "2 y", "3 x", "", "4 z"]
    assert s.stream_text(tmp_path / "b.txt", rate=1e6).collect() == ["3 x", "", "4 z"]
    with pytest.raises(heddle.ArgumentError, match="rate must be a positive number"):
        s.stream_text(tmp_path, rate=0)
    with pytest.raises(heddle.DataError, match="missing: No such file"):
        s.stream_text(tmp_path / "missing")


# --- task jobs ---------------------------------------------------------------------------

TASK_TOTAL = 5000


class Numbers(Source):
    """0 .. TASK_TOTAL - 1, 100 per call, its position in ``ctx.state``; stops the job
    once past ``stop_at``."""

    stop_at: int | None = None
    stop: StopHandle | None = None

    def __init__(self, index: int) -> None:
        pass

    def next(self, ctx):
        at = ctx.state or 0
        end = min(at + 100, TASK_TOTAL)
        ctx.emit_all(range(at, end))
        ctx.state = end
        if Numbers.stop is not None and Numbers.stop_at is not None and end >= Numbers.stop_at:
            Numbers.stop.stop()
        return end < TASK_TOTAL


SEEN: list[int] = []
COMMITS: list[int] = []
FINAL: list[tuple[int, int]] = []


class Sum(Compute):
    """Counts and sums what it receives in ``ctx.state``."""

    def __init__(self, index: int) -> None:
        pass

    def execute(self, ctx, x):
        n, total = ctx.state or (0, 0)
        ctx.state = (n + 1, total + x)
        SEEN.append(x)

    def committed(self, ctx, checkpoint):
        COMMITS.append(checkpoint)

    def close(self, ctx):
        FINAL.append(ctx.state)


def run_task_job(ckpt: Path, stop_at: int | None):
    comm = heddle.init()
    g = TaskGraph()
    numbers = g.source("numbers", 1, Numbers)
    total = g.compute("sum", 1, Sum)
    g.connect(numbers, total, Edge.hash())
    job = Job(comm, g, mode="streaming", checkpoint_interval=0.02, checkpoint_dir=ckpt, job="t")
    Numbers.stop, Numbers.stop_at = job.stop_handle(), stop_at
    return job.run()


def test_task_state_is_restored_from_the_last_checkpoint(tmp_path):
    SEEN.clear()
    report = run_task_job(tmp_path, stop_at=1000)
    assert 1000 <= len(SEEN) < TASK_TOTAL and SEEN == list(range(len(SEEN)))
    assert FINAL[-1] == (len(SEEN), sum(SEEN)) and COMMITS and report.checkpoints[-1].last
    first = len(SEEN)
    report = run_task_job(tmp_path, stop_at=None)
    assert SEEN == list(range(TASK_TOTAL)), f"resumed at {SEEN[first]} after {first}"
    assert FINAL[-1] == (TASK_TOTAL, sum(range(TASK_TOTAL)))
    assert [c.checkpoint for c in report.checkpoints] == sorted(
        c.checkpoint for c in report.checkpoints
    )
    with pytest.raises(heddle.ArgumentError, match="streaming"):
        Job(heddle.init(), TaskGraph(), mode="batch", checkpoint_dir=tmp_path)


def test_task_state_that_does_not_pickle_fails_the_job(tmp_path):
    class Unpicklable(Numbers):
        def next(self, ctx):
            ctx.state = lambda: None
            ctx.emit(1)
            return False

    comm = heddle.init()
    g = TaskGraph()
    g.connect(g.source("bad", 1, Unpicklable), g.compute("sum", 1, Sum), Edge.direct())
    job = Job(comm, g, mode="streaming", checkpoint_dir=tmp_path, job="bad")
    with pytest.raises(TypeError, match="does not pickle") as e:
        job.run()
    assert "ctx.state" in str(e.value)
    assert collections.Counter(os.listdir(tmp_path))["stream-000000000001.ckpt"] == 0
