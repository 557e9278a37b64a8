"""``DataSet.pipe``: records through bridged programs — the pure-Python SDK's reference
filter (sdk/python) and the C SDK's (sdk/c, built by ``make sdk-test-c``) — checked against
the same computation in Python, with text, numbers, numpy arrays and keyed records."""

from __future__ import annotations

import collections
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import heddle
from heddle.data import Session

ROOT = Path(__file__).resolve().parents[2]
PY_FILTER = [sys.executable, str(ROOT / "sdk/python/tests/reference_filter.py")]


@pytest.fixture(scope="module")
def s() -> Session:
    return Session(heddle.init(), partitions=3)


def upper(text: str) -> str:
    return "".join(c.upper() if "a" <= c <= "z" else c for c in text)


@pytest.mark.parametrize("transport", ["pipe", "fifo", "tcp", "unix"])
def test_text_matches_python(s: Session, transport: str) -> None:
    words = [f"word{i} é\tx" for i in range(2000)] + ["", "a" * 100_000]
    out = s.from_list(words).pipe(PY_FILTER, transport, args=["n="]).collect()
    assert out is not None
    finals = [w for w in out if w.startswith("n=")]
    rest = [w for w in out if not w.startswith("n=")]
    assert collections.Counter(rest) == collections.Counter(upper(w) for w in words)
    assert sum(int(f[2:]) for f in finals) == len(words) and len(finals) == 3


def test_numbers_and_numpy_arrays_cross_typed(s: Session) -> None:
    rows = [np.arange(i, i + 5, dtype=np.float64) for i in range(300)] + [2.5]
    out = s.from_list(rows).pipe(PY_FILTER).collect()
    assert out is not None
    sums = sorted(float(x[0]) for x in out if isinstance(x, np.ndarray))
    assert sums == sorted(float(np.sum(r)) for r in rows)
    assert all(
        isinstance(x, np.ndarray) and x.dtype == np.float64 for x in out if not isinstance(x, str)
    )


def test_keyed_records_keep_their_keys(s: Session) -> None:
    pairs = [(f"k{i % 7}", f"v{i}") for i in range(500)]
    out = s.from_list(pairs).pipe(PY_FILTER).collect()
    assert out is not None
    keyed = sorted(x for x in out if isinstance(x, tuple))
    assert keyed == sorted((k, upper(v)) for k, v in pairs)


def test_a_failing_filter_fails_the_job_with_its_error(s: Session) -> None:
    with pytest.raises(heddle.HeddleError) as e:
        s.from_list([str(i) for i in range(100)]).pipe(PY_FILTER, args=["n=", "3"]).collect()
    text = str(e.value)
    assert "record 3" in text and "asked to fail" in text and "status 2" in text, text


def test_a_missing_program_is_named(s: Session) -> None:
    with pytest.raises(heddle.HeddleError, match="no-such-filter-program"):
        s.from_list(["a"]).pipe("no-such-filter-program --x").collect()


def test_unsendable_records_are_refused_by_name(s: Session) -> None:
    with pytest.raises(Exception, match="cannot cross a bridge"):
        s.from_list([{"a": 1}]).pipe(PY_FILTER).collect()


def test_the_c_sdk_filter_gives_the_same_results(s: Session, tmp_path: Path) -> None:
    build = tmp_path / "c-build"
    if shutil.which("cmake") is None:
        pytest.fail("cmake is missing: `make sdk-deps` installs it")
    subprocess.run(
        ["cmake", "-S", str(ROOT / "sdk/c"), "-B", str(build), "-DHEDDLE_BRIDGE_TESTS=ON"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["cmake", "--build", str(build), "--target", "reference_filter", "-j2"],
        check=True,
        capture_output=True,
    )
    words = [f"Mixed Case {i}" for i in range(1000)]
    out = (
        s.from_list(words)
        .pipe(
            [
                str(build / "reference_filter"),
            ],
            "unix",
            args=["c="],
        )
        .collect()
    )
    assert out is not None
    rest = [w for w in out if not w.startswith("c=")]
    assert collections.Counter(rest) == collections.Counter(upper(w) for w in words)


# --- heddle.bridge.Bridge and TaskGraph.bridge ------------------------------------------


def test_a_bridge_by_hand_answers_switches_and_reports() -> None:
    from heddle.bridge import Bridge

    b = Bridge(PY_FILTER, transport="unix", args=["n="], credits=4)
    got: list = []
    for i in range(50):
        got += b.send(f"w{i}")
        if i == 20:
            assert b.switch("fifo") > 0 and b.transport == "fifo"
        if i == 30:
            b.switch("pipe")
    assert b.status()["records_in"] == 50
    got += b.finish()
    assert got == [f"W{i}" for i in range(50)] + ["n=50"]
    d = b.diagnostics()
    assert d["records_sent"] == 50 and d["records_received"] == 51 and len(d["switches_s"]) == 2


def test_a_bridge_abort_stops_the_filter() -> None:
    from heddle.bridge import Bridge

    b = Bridge(PY_FILTER)
    b.send("x")
    assert b.abort("test") == "exited with status 3"


class _Words:
    def __init__(self, i: int) -> None:
        self.words = [f"w{j}" for j in range(i, 300, 2)]

    def next(self, ctx) -> bool:
        ctx.emit_all(self.words)
        return False


class _Collect:
    def __init__(self, got: list) -> None:
        self.got = got

    def execute(self, ctx, record) -> None:
        self.got.append(record)


def test_a_task_graph_vertex_is_a_bridged_filter() -> None:
    from heddle.task import Edge, Job, TaskGraph

    got: list = []
    g = TaskGraph()
    src = g.source("words", 2, _Words)
    up = g.bridge("upper", 2, PY_FILTER, transport="tcp", args=["n="])
    sink = g.compute("collect", 1, lambda i: _Collect(got))
    g.connect(src, up, Edge.direct())
    g.connect(up, sink, Edge.hash())
    Job(heddle.init(), g).run()
    words = sorted(w for w in got if not w.startswith("n="))
    assert words == sorted(f"W{j}" for j in range(300))
    assert sorted(int(w[2:]) for w in got if w.startswith("n=")) == [150, 150]


def test_a_failing_bridge_vertex_fails_the_job() -> None:
    from heddle.task import Edge, Job, TaskGraph

    g = TaskGraph()
    src = g.source("words", 2, _Words)
    up = g.bridge("upper", 2, PY_FILTER, args=["n=", "4"])
    sink = g.compute("collect", 1, lambda i: _Collect([]))
    g.connect(src, up, Edge.direct())
    g.connect(up, sink, Edge.hash())
    with pytest.raises(heddle.HeddleError, match="record 4"):
        Job(heddle.init(), g).run()


def test_a_policy_switches_the_transport_by_record_size() -> None:
    from heddle.bridge import Bridge

    b = Bridge(PY_FILTER, policy="record_bytes > 4KiB -> shm", credits=8)
    got: list = []
    for i in range(200):
        got += b.send(f"w{i}")
    assert b.transport == "pipe"
    for i in range(200):
        got += b.send(bytes([i % 256]) * 10_000)
    assert b.transport == "shm"
    reasons = b.diagnostics()["switch_reasons"]
    assert len(reasons) == 1 and "record_bytes" in reasons[0], reasons
    got += b.finish()
    assert got[:200] == [f"W{i}" for i in range(200)]
    assert got[200:400] == [bytes([i % 256]) * 10_000 for i in range(200)]


def test_a_bad_policy_is_refused_naming_the_rule() -> None:
    from heddle.bridge import Bridge

    with pytest.raises(heddle.HeddleError, match="unknown metric `latency`"):
        Bridge(PY_FILTER, policy="latency > 5 -> shm")


@pytest.mark.parametrize("transport", ["shm"])
def test_pipe_over_shared_memory(s: Session, transport: str) -> None:
    words = [f"w{i}" for i in range(3000)]
    out = s.from_list(words).pipe(PY_FILTER, transport, args=["n="]).collect()
    assert out is not None
    assert sorted(w for w in out if not w.startswith("n=")) == sorted(upper(w) for w in words)
