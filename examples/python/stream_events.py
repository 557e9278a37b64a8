"""Streaming keyed windowed count over event-time files with heddle.data's Stream: ``ts_ms,key``
CSV events are counted per key in tumbling event-time windows (10 s by default), with a
watermark trailing the largest timestamp seen by 5 s; each window's counts come out as the
watermark passes its end (late events are dropped and counted). The Rust
``stream_events`` example's job.

The events are replayed with ``Session.stream_from_list`` (heddle.data has no stream source
of a directory of files): every worker reads and parses all the files inside the clock, and
its partition streams its share of them in order. Each record is ``(key, ts)``; the window
keeps the latest timestamp (``max``) and the count is the window's ``records``. Rank 0 then
checks every (window, key) count against a plain count of the files (after the clock) and
prints one JSON line; ``--output DIR`` writes the counts as ``window,key,count`` lines
(window = start in ms / window length), one part file per worker.

    heddle run -n 2 examples/python/stream_events.py --input events/ --output /tmp/counts
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import operator
import sys
import time
from pathlib import Path

import heddle
from heddle.data import Session, Window


def input_files(spec: str) -> list:
    """A file, a directory's files (name order, hidden and ``_`` files skipped) or a glob."""
    p = Path(spec)
    if p.is_dir():
        return sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith((".", "_")))
    if p.exists():
        return [p]
    files = sorted(Path(f) for f in glob.glob(spec))
    if not files:
        sys.exit(f"error: --input {spec}: no such file, directory or glob match")
    return files


def read_events(files: list) -> list:
    """Every event of ``files`` in order, as ``(key, ts_ms)``."""
    events = []
    for f in files:
        for n, line in enumerate(f.read_bytes().splitlines()):
            if not line:
                continue
            ts, _, key = line.partition(b",")
            try:
                events.append((int(key), int(ts)))
            except ValueError:
                sys.exit(f"error: {f} line {n + 1}: expected `ts_ms,key`, got {line!r}")
    return events


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--input",
        required=True,
        help="the events: a file, a directory or a glob of `ts_ms,key` lines",
    )
    p.add_argument("--window-ms", type=int, default=10_000, help="window length in ms")
    p.add_argument(
        "--out-of-order-ms",
        type=int,
        default=5_000,
        help="how far out of order events may come (the watermark's lag)",
    )
    p.add_argument(
        "--output",
        type=Path,
        help="write `window,key,count` lines here (part-NNNNN.csv per worker)",
    )
    args = p.parse_args()
    if args.window_ms < 1:
        p.error("--window-ms must be at least 1")

    comm = heddle.init()
    s = Session(comm)
    files = input_files(args.input)
    size = args.window_ms
    counts = {}

    def keep(w) -> None:
        # The latest result of each (window, key) wins, as in an update-mode sink.
        counts[(w.start // size, w.key)] = w.records

    comm.barrier()
    start = time.perf_counter()
    events = read_events(files)
    window = Window.tumbling(size).event_time(out_of_orderness=args.out_of_order_ms)
    stream = s.stream_from_list(events).window(window, max, event_time=operator.pos)
    stream.run(keep)
    job_s = comm.allreduce(time.perf_counter() - start, op=max)

    verify = time.perf_counter()
    total = comm.allreduce(sum(counts.values()))
    late = comm.allreduce(stream.late_records())
    if args.output:
        args.output.mkdir(parents=True, exist_ok=True)
        with open(args.output / f"part-{comm.rank:05d}.csv", "w") as f:
            f.writelines(f"{w},{k},{c}\n" for (w, k), c in counts.items())
    parts = comm.gather(list(counts.items()), root=0)
    if comm.rank == 0:
        results = sum(len(part) for part in parts)
        got = dict(pair for part in parts for pair in part)
        want = collections.Counter((t // size, k) for k, t in read_events(files))
        differ = sum(1 for k, c in want.items() if got.get(k) != c) + sum(
            1 for k in got if k not in want
        )
        ok = differ == 0 and results == len(got) and late == 0
        detail = (
            f"{total} events, {len(got)} (window, key) counts equal"
            if ok
            else f"{differ} (window, key) counts differ, {results} results for {len(got)} (window, "
            "key) pairs, "
            f"{late} late events dropped"
        )
        line = {
            "example": "stream_events",
            "api": "python",
            "ok": ok,
            "events": total,
            "windows": len(got),
            "late": late,
            "job_s": round(job_s, 3),
            "verify_s": round(time.perf_counter() - verify, 3),
            "detail": detail,
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print(f"error: the window counts are wrong: {detail}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
