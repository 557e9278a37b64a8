"""heddle.data streams on every worker of the job: windows against plain Python windowing
(windows_reference.py), with records and unicode keys crossing workers, late events,
empty input, stops, file output and an exception. argv[1]: a directory shared by the
ranks."""

import collections
import json
import operator
import sys
import traceback
from pathlib import Path

import heddle
from heddle.data import Session, Window
from windows_reference import (
    as_tuples,
    count_windows,
    event_windows,
    plain_windows,
    session_windows,
)

comm = heddle.init()
s = Session(comm)
shared = Path(sys.argv[1])
rank, size = comm.rank, comm.size
failures = []
checks = 0

KEYS = ["naïve", "日本語", "Ωmega", "emoji 🙂", "e\u0301", "\u00e9", "", "plain"]


def check(name, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{name}: got {str(got)[:300]} want {str(want)[:300]}")


def on_root(name, got, want):
    """collect() gives rank 0 the records and the others None."""
    check(name, as_tuples(got) if rank == 0 else got, want if rank == 0 else None)


def later_and_sum(a, b):
    return (max(a[0], b[0]), a[1] + b[1])


def total_late(stream):
    return comm.allreduce(stream.late_records())


try:
    # Event-time windows: each worker's share of the events is in order up to 2 ms, within
    # the out-of-orderness, so nothing is late whatever the interleaving of workers.
    events = [(KEYS[i % len(KEYS)], i // 3 + (0 if i % 7 == 0 else 2)) for i in range(6000)]
    records = [(k, (t, 1)) for k, t in events]
    plain = [(k, (t, 1), t) for k, t in events]
    for w_size, slide in [(100, 100), (100, 40)]:
        window = Window.tumbling(w_size) if w_size == slide else Window.sliding(w_size, slide)
        st = s.stream_from_list(records).window(
            window.event_time(out_of_orderness=50), later_and_sum, event_time=lambda v: v[0]
        )
        on_root(
            f"event-time {window!r}",
            st.collect(),
            plain_windows(plain, w_size, slide, later_and_sum),
        )
        check(f"nothing late {window!r}", total_late(st), 0)

    # Micro-batches on every worker: each record once, batches no larger than asked.
    sizes = (
        s.stream_from_list(list(range(5000)))
        .map_batches(lambda b: [(len(b), int(b.sum()))], batch_size=100)
        .collect()
    )
    check(
        "map_batches records",
        sum(n for n, _ in sizes) if rank == 0 else sizes,
        5000 if rank == 0 else None,
    )
    check(
        "map_batches sum",
        sum(t for _, t in sizes) if rank == 0 else None,
        sum(range(5000)) if rank == 0 else None,
    )
    check(
        "map_batches batch size",
        max(n for n, _ in sizes) <= 100 if rank == 0 else None,
        True if rank == 0 else None,
    )

    # Late events: one partition (rank 0's) keeps the events' order, so the watermark and
    # the late records are those of the plain reference.
    one = Session(comm, partitions=1)
    late_events = [
        ("k" if i % 3 else "ключ", t)
        for i, t in enumerate([1, 3, 12, 2, 30, 4, 16, 35, 9, 50, 33, 31, 70, 5])
    ]
    st = one.stream_from_list(late_events).window(
        Window.tumbling(10).event_time(5, 10), max, event_time=lambda t: t
    )
    want, late = event_windows([(k, t, t) for k, t in late_events], 10, 10, 5, 10, max)
    on_root("late events", st.collect(), want)
    check("late events counted", total_late(st), late)
    check("late events exist", late > 0, True)

    # Sessions: the out-of-orderness covers every time, so all sessions close at the end.
    session_events = [(KEYS[i % 3], (i * 37) % 400) for i in range(300)]
    st = s.stream_from_list(session_events).window(
        Window.session(6).event_time(10_000), operator.add, event_time=lambda t: t
    )
    on_root(
        "sessions",
        st.collect(),
        session_windows([(k, t, t) for k, t in session_events], 6, operator.add),
    )

    # Count windows: exact on one partition; on several, a key's records interleave, so
    # the same windows hold other values (same number and sizes).
    count_events = [(KEYS[i % 4], i) for i in range(400)]
    on_root(
        "tumbling count, one partition",
        one.stream_from_list(count_events).window(Window.tumbling_count(7), operator.add).collect(),
        count_windows(count_events, 7, 7, operator.add),
    )
    on_root(
        "sliding count, one partition",
        one.stream_from_list(count_events)
        .window(Window.sliding_count(4, 3), operator.add)
        .collect(),
        count_windows(count_events, 4, 3, operator.add),
    )
    got = s.stream_from_list(count_events).window(Window.tumbling_count(7), operator.add).collect()
    want = count_windows(count_events, 7, 7, operator.add)
    on_root(
        "tumbling count, spread",
        None if got is None else [(w.key, w.start, w.end, w.records) for w in got],
        sorted((k, a, b, n) for k, a, b, _, n, _ in want),
    )

    # Processing time: every generated record once, in aligned windows.
    got = (
        s.stream_generate(lambda i: (KEYS[i % 5], 1), rate=20_000, limit=3000)
        .window(Window.tumbling(20), operator.add)
        .collect()
    )
    if rank == 0:
        per_key = collections.Counter()
        for w in got:
            per_key[w.key] += w.value
        check(
            "processing time, every record once",
            per_key,
            collections.Counter({KEYS[k]: 600 for k in range(5)}),
        )
        check(
            "processing time, aligned",
            all(w.end - w.start == 20 and w.start % 20 == 0 for w in got),
            True,
        )

    # Record-wise steps and union across workers.
    xs = list(range(500))
    got = (
        s.stream_from_list(xs)
        .map(lambda x: x * 3)
        .filter(lambda x: x % 2 == 0)
        .union(s.stream_from_list(["x"] * 10))
        .collect()
    )
    if rank == 0:
        check(
            "map filter union",
            collections.Counter(got),
            collections.Counter([x * 3 for x in xs if x * 3 % 2 == 0] + ["x"] * 10),
        )

    # Empty input on every worker.
    empty = s.stream_from_list([]).window(
        Window.tumbling(10).event_time(), operator.add, event_time=lambda v: v
    )
    on_root("empty", empty.collect(), [])

    # Unbounded sources: each worker stops after its own records (no shuffle before the
    # sink), or after a time.
    seen = []
    s.stream_generate(lambda i: i).run(seen.append, max_records=2000)
    check(
        "max_records", len(seen) >= 2000 and all(x % size == rank % size for x in seen[:2000]), True
    )
    s.stream_generate(lambda i: i).run(timeout=0.2)

    # Lines written where the records are, one part per partition.
    out = shared / "lines"
    s.stream_from_list([f"{k} {i}" for i, k in enumerate(KEYS * 10)]).write_lines(out)
    comm.barrier()
    lines = [x for p in sorted(out.iterdir()) for x in p.read_text(encoding="utf-8").splitlines()]
    check("write_lines", sorted(lines), sorted(f"{k} {i}" for i, k in enumerate(KEYS * 10)))
    # A Python exception in a stream on several workers aborts the whole job: see
    # abort_data.py (test_jobs.py).
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"ok": not failures, "checks": checks, "failures": failures}))
