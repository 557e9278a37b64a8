"""heddle.data streams: windows against plain Python windowing (tests/python/jobs/
windows_reference.py), late events, empty input, unicode keys, the sources and sinks,
stopping, exceptions and argument errors in a world of one (sources and sinks:
test_stream_io.py); and
tests/python/jobs/stream_ops.py on 2 and 3 workers."""

import collections
import operator
import random
import socket
import sys
import threading

import pytest

import heddle
from conftest import JOBS, assert_all_ok, assert_gone, run_job
from heddle.data import Session, StopHandle, Window, Windowed

sys.path.insert(0, str(JOBS))
from windows_reference import (
    as_tuples,
    count_windows,
    event_windows,
    plain_windows,
    session_windows,
)

UNICODE_KEYS = ["naïve", "日本語", "Ωmega", "emoji 🙂", "e\u0301", "\u00e9", "", "a\x00b"]


@pytest.fixture(scope="module")
def s():
    return Session(heddle.init())


def stamped(events):
    """``(key, (time, 1))`` records of ``(key, time)`` events, windowed by time, counted."""
    return [(k, (t, 1)) for k, t in events]


def later_and_sum(a, b):
    return (max(a[0], b[0]), a[1] + b[1])


def test_map_batches_on_a_stream_sees_every_record_once_in_bounded_batches(s):
    import numpy as np

    xs = list(range(1000))
    st = s.stream_from_list(xs)
    # numpy batches, in order in a world of one
    assert st.map_batches(lambda b: b * 2).collect() == [2 * x for x in xs]
    sizes = st.map_batches(lambda b: [len(b)], batch_size=64, batch_format="list").collect()
    assert sum(sizes) == 1000 and max(sizes) <= 64, sizes
    rows = s.stream_from_list([{"a": i, "b": float(i)} for i in range(10)]).map_batches(
        lambda cols: {"sum": cols["a"] + cols["b"]}
    )
    assert rows.collect() == [{"sum": 2.0 * i} for i in range(10)]
    pairs = st.map_batches(lambda b: np.stack([b, b % 7], axis=1), batch_size=100).collect()
    assert pairs == [(x, x % 7) for x in xs]
    with pytest.raises(ValueError, match="batch_format"):
        st.map_batches(len, batch_format="pandas")
    with pytest.raises(ValueError, match="batch_size"):
        st.map_batches(len, batch_size=0)
    with pytest.raises(ZeroDivisionError):
        st.map_batches(lambda b: 1 / 0).collect()


def test_map_batches_on_a_stream_hands_a_batch_over_after_its_delay(s):
    # 300 records at 1,000 a second, room for all in one batch: a 20 ms delay cuts them.
    sizes = (
        s.stream_generate(lambda i: i, rate=1000, limit=300)
        .map_batches(lambda b: [len(b)], batch_size=10**6, batch_format="list", max_delay=20)
        .collect()
    )
    assert sum(sizes) == 300 and len(sizes) >= 5, sizes


def test_record_wise_steps_match_plain_python(s):
    xs = list(range(100))
    st = s.stream_from_list(xs)
    assert st.map(lambda x: x * 2).filter(lambda x: x % 3 == 0).collect() == [
        x * 2 for x in xs if x * 2 % 3 == 0
    ]
    assert st.flat_map(lambda x: [x] * (x % 3)).collect() == [y for x in xs for y in [x] * (x % 3)]
    assert st.key_by(lambda x: x % 4).collect() == [(x % 4, x) for x in xs]
    assert sorted(st.union(s.stream_from_list(["a", "b"])).collect(), key=str) == sorted(
        [*xs, "a", "b"], key=str
    )


def test_event_time_tumbling_and_sliding_windows_match_plain_windows(s):
    # Times slightly out of order, within the out-of-orderness: nothing is late.
    events = [(f"k{i % 5}", i // 3 + (0 if i % 7 == 0 else 2)) for i in range(3000)]
    for size, slide in [(100, 100), (100, 40), (7, 3)]:
        window = Window.sliding(size, slide) if size != slide else Window.tumbling(size)
        got = (
            s.stream_from_list(stamped(events))
            .window(
                window.event_time(out_of_orderness=50), later_and_sum, event_time=lambda v: v[0]
            )
            .collect()
        )
        want = plain_windows(((k, (t, 1), t) for k, t in events), size, slide, later_and_sum)
        assert as_tuples(got) == want, (size, slide)


def test_late_events_update_their_window_within_the_lateness_and_are_dropped_after(s):
    events = [(1, 1), (1, 3), (1, 12), (1, 2), (1, 30), (1, 4), (1, 16), (1, 35)]
    st = s.stream_from_list(events).window(
        Window.tumbling(10).event_time(5, 10), max, event_time=lambda t: t
    )
    got = st.collect()
    # (1,30) moves the watermark to 25: [0,10) and [10,20) fire. (1,4) is past [0,10)'s
    # lateness (10 + 10 <= 25): dropped. (1,16) is late for [10,20) but within its
    # lateness: the window fires again, updated. The end fires [30,40).
    assert [(w.start, w.end, w.records, w.update) for w in got] == [
        (0, 10, 3, False),
        (10, 20, 1, False),
        (10, 20, 2, True),
        (30, 40, 2, False),
    ]
    assert st.late_records() == 1
    want, late = event_windows([(k, t, t) for k, t in events], 10, 10, 5, 10, max)
    assert (as_tuples(got), late) == (want, 1)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_out_of_order_events_against_a_plain_watermark(s, seed):
    rng = random.Random(seed)
    events = [(rng.choice("abc"), max(0, i + rng.randint(-40, 5))) for i in range(1, 600)]
    dropped = 0
    for size, slide, ooo, lateness in [(20, 20, 5, 15), (30, 10, 0, 0), (25, 5, 10, 30)]:
        st = s.stream_from_list(stamped(events))
        windowed = st.window(
            Window.sliding(size, slide).event_time(ooo, lateness),
            later_and_sum,
            event_time=lambda v: v[0],
        )
        got = as_tuples(windowed.collect())
        want, late = event_windows(
            ((k, (t, 1), t) for k, t in events), size, slide, ooo, lateness, later_and_sum
        )
        assert got == want, (size, slide, ooo, lateness)
        assert windowed.late_records() == late, (size, slide, ooo, lateness)
        dropped += late
    assert dropped > 0 and any(w[5] for w in got)  # some records late, some windows updated


def test_count_windows_match_plain_count_windows(s):
    events = [("ключ" if i % 3 else "key", i) for i in range(200)]
    for size, slide in [(7, 7), (4, 2), (3, 5)]:
        window = Window.tumbling_count(size) if size == slide else Window.sliding_count(size, slide)
        got = s.stream_from_list(events).window(window, operator.add).collect()
        assert as_tuples(got) == count_windows(events, size, slide, operator.add), (size, slide)


def test_session_windows_split_at_gaps(s):
    times = [1, 3, 8, 30, 33, 70, 71, 72, 200, 5, 40]
    events = [(k, t) for t in times for k in ("x", "y") if (t + len(k)) % 2 or k == "x"]
    got = (
        s.stream_from_list(events)
        .window(Window.session(10).event_time(1000), max, event_time=lambda t: t)
        .collect()
    )
    assert as_tuples(got) == session_windows(((k, t, t) for k, t in events), 10, max)


def test_processing_time_windows_count_every_record_once(s):
    got = (
        s.stream_generate(lambda i: (i % 4, 1), rate=20_000, limit=4000)
        .window(Window.tumbling(20), operator.add)
        .collect()
    )
    assert sum(w.value for w in got) == sum(w.records for w in got) == 4000
    assert all(w.end - w.start == 20 and w.start % 20 == 0 and not w.update for w in got)
    per_key = collections.Counter()
    for w in got:
        per_key[w.key] += w.value
    assert per_key == dict.fromkeys(range(4), 1000)


def test_unicode_keys_meet_in_their_windows(s):
    events = [(UNICODE_KEYS[i % len(UNICODE_KEYS)], i % 50) for i in range(800)]
    got = (
        s.stream_from_list(stamped(events))
        .window(Window.tumbling(25).event_time(50), later_and_sum, event_time=lambda v: v[0])
        .collect()
    )
    assert as_tuples(got) == plain_windows(
        ((k, (t, 1), t) for k, t in events), 25, 25, later_and_sum
    )
    assert {w.key for w in got} == set(UNICODE_KEYS)  # "é" composed and decomposed stay two keys


def test_empty_input(s, tmp_path):
    empty = s.stream_from_list([])
    windowed = empty.window(Window.tumbling(10).event_time(), operator.add, event_time=lambda v: v)
    assert windowed.collect() == [] and windowed.late_records() == 0
    assert empty.window(Window.tumbling_count(3), operator.add).collect() == []
    assert s.stream_generate(lambda i: i, limit=0).collect() == []
    empty.write_lines(tmp_path / "out")
    assert (tmp_path / "out" / "_SUCCESS").exists()
    assert all(f.read_text() == "" for f in (tmp_path / "out").iterdir())
    seen = []
    empty.run(seen.append)
    assert seen == []


def test_results_are_windowed_named_tuples(s):
    (w,) = (
        s.stream_from_list([("k", 5)])
        .window(Window.tumbling(10).event_time(), operator.add, event_time=lambda v: v)
        .collect()
    )
    assert isinstance(w, Windowed) and w == Windowed("k", 0, 10, 5, 1, False)
    key, start, end, value, records, update = w
    assert (key, start, end, value, records, update) == ("k", 0, 10, 5, 1, False)


def test_unbounded_streams_stop(s):
    # After a number of records reaching the sink (records already on their way still come).
    seen = []
    s.stream_generate(lambda i: i).run(seen.append, max_records=1000)
    assert len(seen) >= 1000 and seen[:1000] == list(range(1000))
    # After a time.
    s.stream_generate(lambda i: i).run(timeout=0.2)
    # By a handle, from the sink or from another thread.
    stop = StopHandle()
    s.stream_generate(lambda i: i).run(lambda x: x == 500 and stop.stop(), stop=stop)
    stop = StopHandle()
    timer = threading.Timer(0.1, stop.stop)
    timer.start()
    s.stream_generate(lambda i: i, rate=1000).run(stop=stop)
    timer.join()
    # A handle that is stopped already ends the run at once.
    stopped = StopHandle()
    stopped.stop()
    s.stream_generate(lambda i: i).run(stop=stopped)


def test_exceptions_in_functions_are_raised_as_themselves(s):
    finite = s.stream_from_list(list(range(100)))
    with pytest.raises(ValueError, match="bad 37"):
        finite.map(lambda x: x if x != 37 else (_ for _ in ()).throw(ValueError("bad 37"))).run()
    with pytest.raises(ZeroDivisionError):
        finite.filter(lambda x: 1 / (x - 5)).collect()
    with pytest.raises(TypeError):
        finite.flat_map(lambda x: x).run()  # an int is not iterable
    with pytest.raises(KeyError):
        finite.map(lambda x: (x % 2, x)).window(Window.tumbling_count(2), lambda a, b: {}[a]).run()
    with pytest.raises(RuntimeError, match="sink"):
        finite.run(lambda x: (_ for _ in ()).throw(RuntimeError("sink")))
    with pytest.raises(heddle.ArgumentError, match=r"\(key, value\) pairs"):
        finite.window(Window.tumbling_count(2), operator.add).run()
    with pytest.raises(
        heddle.ArgumentError, match="event_time must return a timestamp in milliseconds"
    ):
        finite.map(lambda x: (x, x)).window(
            Window.tumbling(5).event_time(), operator.add, event_time=lambda v: v / 2
        ).run()
    # Unbounded sources stop at the exception, even when nothing reaches the sink any more.
    with pytest.raises(ZeroDivisionError):
        s.stream_generate(lambda i: 1 // (i - 300)).run()
    with pytest.raises(ZeroDivisionError):
        s.stream_generate(lambda i: i).filter(lambda x: 1 // (x - 300) and False).run()
    assert finite.collect() == list(range(100))  # still usable


def test_argument_errors_say_what_to_do(s, tmp_path):
    pairs = s.stream_from_list([("k", 1)])
    with pytest.raises(ValueError, match="at least 1 ms"):
        Window.tumbling(0)
    with pytest.raises(ValueError, match="at least 1"):
        Window.sliding_count(3, 0)
    with pytest.raises(TypeError, match="milliseconds"):
        Window.session("10ms")
    with pytest.raises(ValueError, match="count records and have no clock"):
        Window.tumbling_count(3).event_time()
    with pytest.raises(ValueError, match="give event_time=f"):
        pairs.window(Window.tumbling(10).event_time(), operator.add)
    with pytest.raises(ValueError, match=r"use Window.tumbling\(10\).event_time"):
        pairs.window(Window.tumbling(10), operator.add, event_time=lambda v: v)
    with pytest.raises(heddle.ArgumentError, match="rate must be at least 1"):
        s.stream_generate(lambda i: i, rate=0)
    with pytest.raises(heddle.ArgumentError, match="max_records must be at least 1"):
        pairs.run(max_records=0)
    with pytest.raises(
        heddle.ArgumentError, match="timeout must be a non-negative number of seconds"
    ):
        pairs.run(timeout=-1)
    with pytest.raises(heddle.ArgumentError, match="different sessions"):
        pairs.union(Session(heddle.init()).stream_from_list([]))
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(heddle.DataError, match=f"tcp://127.0.0.1:{port}"):
        s.socket_text(("127.0.0.1", port)).run()
    with pytest.raises(heddle.DataError, match=f"tcp://127.0.0.1:{port}"):
        pairs.write_socket(f"127.0.0.1:{port}")
    (tmp_path / "file").write_text("")
    with pytest.raises(heddle.DataError, match="file"):
        pairs.write_lines(tmp_path / "file" / "out")
    assert (
        repr(Window.sliding(100, 40).event_time(5, 10))
        == "Window.sliding(100, 40).event_time(5, 10)"
    )


def test_write_lines_commits_at_the_end_with_the_save_modes(s, tmp_path):
    out = tmp_path / "out"

    def lines() -> list[str]:
        return sorted(line for f in out.glob("part-*") for line in f.read_text().splitlines())

    s.stream_from_list(["a", "b"]).write_lines(out)
    assert lines() == ["a", "b"] and (out / "_SUCCESS").exists()
    with pytest.raises(heddle.ArgumentError, match="already holds"):
        s.stream_from_list(["c"]).write_lines(out)
    assert lines() == ["a", "b"]
    s.stream_from_list(["c"]).write_lines(out, mode="append")
    assert lines() == ["a", "b", "c"]
    s.stream_from_list(["d"]).write_lines(out, mode="overwrite")
    assert lines() == ["d"]

    def boom(x: str) -> str:
        raise ValueError("no " + x)

    with pytest.raises(ValueError, match="no e"):
        s.stream_from_list(["e"]).map(boom).write_lines(out, mode="overwrite")
    assert lines() == ["d"] and not list(out.glob("_temporary*"))
    with pytest.raises(heddle.ArgumentError, match="mode"):
        s.stream_from_list(["f"]).write_lines(out, mode="replace")


@pytest.mark.parametrize("n", [2, 3])
def test_streams_on_workers(n, tmp_path):
    job = run_job(n, "stream_ops.py", str(tmp_path))
    assert_all_ok(job, n)
    assert job.reports[0]["checks"] >= 19 and all(
        rep["checks"] >= 16 for rep in job.reports.values()
    ), job.reports


def test_an_exception_in_an_unbounded_stream_fails_its_worker_and_stops_the_others(piddir):
    job = run_job(3, "stream_fail.py", str(piddir))
    assert job.returncode == 1, job
    assert "ValueError: boom: cannot take 15002" in job.stdout + job.stderr
    assert "heddle: rank 2 exited with status 1; stopping the other" in job.stderr
    assert_gone([int(f.read_text()) for f in piddir.glob("*.pid")])


def test_write_parts_writes_what_f_returns(s, tmp_path):
    records = [{"id": i, "v": f"x{i}"} for i in range(20)]
    out = tmp_path / "parts"

    def row(r: dict) -> bytes | str | None:
        if r["id"] % 5 == 4:
            return None  # nothing for this record
        return f"{r['id']}\t{r['v']}\n" if r["id"] % 2 else f"{r['id']}\t{r['v']}\n".encode()

    s.stream_from_list(records).write_parts(out, row)
    got = b"".join(f.read_bytes() for f in sorted(out.glob("part-*")))
    want = "".join(f"{r['id']}\t{r['v']}\n" for r in records if r["id"] % 5 != 4).encode()
    assert sorted(got.splitlines()) == sorted(want.splitlines())
    assert (out / "_SUCCESS").exists()
    with pytest.raises(TypeError, match="bytes, str or None, not int"):
        s.stream_from_list([1]).write_parts(out, lambda r: r, mode="overwrite")
    assert sorted(b"".join(f.read_bytes() for f in out.glob("part-*")).splitlines()) == sorted(
        want.splitlines()
    )
