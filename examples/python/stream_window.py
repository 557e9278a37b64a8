"""Streaming windowed word count with heddle.data: words stream in — generated events
stamped with the clock (``--generate``, paced with ``--rate``) or the words of a file
(``--input``, one ms per line) — and are counted per word in tumbling event-time windows,
each window's counts coming out as the watermark passes its end. Rank 0 checks the counts
against a plain Python count of the same events and prints one JSON line (the Rust
``stream_window`` example's) with throughput and the latency of window results (from a
window's end to its result).

    heddle run -n 2 examples/python/stream_window.py --generate --events 1000000
    heddle run -n 2 examples/python/stream_window.py --generate --rate 100000 --events 1000000
    heddle run -n 2 examples/python/stream_window.py --input words.txt --output /tmp/win

``--generate`` draws the Rust example's words: event i is word rank ``u * u * 100000`` of
the splitmix64 draw ``u`` seeded with ``seed ^ i * 0x9E3779B97F4A7C15``.
"""

from __future__ import annotations

import argparse
import collections
import json
import operator
import os
import sys
import time
from pathlib import Path

import numpy as np

import heddle
from heddle.data import Session, Window

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

MASK = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def word_rank(seed: int, i: int) -> int:
    """The vocabulary rank of generated event ``i`` (the Rust example's draw, one at a time)."""
    z = ((seed ^ (i * GAMMA & MASK)) + GAMMA) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    u = ((z ^ (z >> 31)) >> 11) / float(1 << 53)
    return int(u * u * common.VOCABULARY)


def reference_ranks(seed: int, events: int) -> collections.Counter:
    """The generated events' word ranks counted, computed apart from the stream (numpy)."""
    counts: collections.Counter = collections.Counter()
    for start in range(0, events, 1 << 20):
        i = np.arange(start, min(events, start + (1 << 20)), dtype=np.uint64)
        z = common._mix((np.uint64(seed) ^ (i * common._GAMMA)) + common._GAMMA)
        u = (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
        ranks, n = np.unique((u * u * common.VOCABULARY).astype(np.int64), return_counts=True)
        counts.update(dict(zip(ranks.tolist(), n.tolist())))
    return counts


def file_events(path: Path) -> list:
    """``(word, (line, 1))`` for every word of the file: its line number is its time (ms)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        sys.exit(f"error: cannot read --input {path}: {e.strerror}")
    return [(w, (n, 1)) for n, words in enumerate(text.splitlines()) for w in words.split()]


def later_and_sum(a: tuple, b: tuple) -> tuple:
    """Reduces ``(latest time, count)`` values."""
    return (a[0] if a[0] > b[0] else b[0], a[1] + b[1])


def check(args, results: list, late: int) -> bool:
    """Every event counted once, in the window of its time: against a plain count."""
    size = args.window_ms
    if late or len({(r[0], r[2]) for r in results}) != len(results):
        return False
    if not all(r[1] - r[0] == size and r[0] % size == 0 and r[0] <= r[4] < r[1] for r in results):
        return False
    if args.generate:
        per_word: collections.Counter = collections.Counter()
        for r in results:
            per_word[r[2]] += r[3]
        return per_word == reference_ranks(args.seed, args.events)
    want: collections.Counter = collections.Counter()
    for n, words in enumerate(args.input.read_text(encoding="utf-8").splitlines()):
        for w in words.split():
            want[(n - n % size, w)] += 1
    return collections.Counter({(r[0], r[2]): r[3] for r in results}) == want


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--input",
        type=Path,
        help="stream the words of this text file (timestamps: one ms per line)",
    )
    p.add_argument(
        "--generate",
        action="store_true",
        help="generate events instead, stamped with the clock when made",
    )
    p.add_argument("--events", type=int, default=2_000_000, help="events to generate in all")
    p.add_argument("--rate", type=int, help="events per second per worker (unpaced if absent)")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated words")
    p.add_argument("--window-ms", type=int, default=10, help="window length in ms")
    p.add_argument(
        "--output",
        type=Path,
        help="write the window results (start<TAB>end<TAB>word<TAB>count) here",
    )
    args = p.parse_args()
    if (args.input is None) == (not args.generate):
        p.error("give --input FILE or --generate")

    comm = heddle.init()
    s = Session(comm)
    if args.generate:
        seed = args.seed
        events = s.stream_generate(
            lambda i: (word_rank(seed, i), (time.time_ns() // 1_000_000, 1)),
            rate=args.rate,
            limit=args.events,
        )
    else:
        events = s.stream_from_list(file_events(args.input))
    window = Window.tumbling(args.window_ms).event_time(0, 0)
    counts = events.window(window, later_and_sum, event_time=operator.itemgetter(0))

    # Each result: the window, the word, its count, its latest event time, and how long
    # after the window's end it came out (ms).
    local = []

    def keep(w) -> None:
        local.append((w.start, w.end, w.key, w.value[1], w.value[0], time.time() * 1000 - w.end))

    comm.barrier()
    start = time.perf_counter()
    counts.run(keep)
    job_s = comm.allreduce(time.perf_counter() - start, op=max)
    late = comm.allreduce(counts.late_records())
    parts = comm.gather(local, root=0)

    if comm.rank == 0:
        results = [r for part in parts for r in part]
        records = sum(r[3] for r in results)
        ok = check(args, results, late)
        lags = sorted(r[5] for r in results)
        pct = lambda q: lags[min(int(len(lags) * q), len(lags) - 1)] if lags else 0.0  # noqa: E731
        if args.output:
            args.output.mkdir(parents=True, exist_ok=True)
            words = common.vocabulary(args.seed) if args.generate else None
            rows = sorted((r[0], r[1], words[r[2]] if words else r[2], r[3]) for r in results)
            (args.output / "windows.tsv").write_text(
                "".join(f"{a}\t{b}\t{w}\t{n}\n" for a, b, w, n in rows)
            )
        rate = records / job_s if job_s > 0 else 0.0
        line = {
            "example": "stream_window",
            "api": "python",
            "ok": ok,
            "records": records,
            "windows": len(results),
            "job_s": round(job_s, 3),
            "records_per_s": round(rate),
            "records_per_s_per_worker": round(rate / comm.size),
            "latency_p50_ms": round(pct(0.5), 2),
            "latency_p99_ms": round(pct(0.99), 2),
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print(
                "error: the window counts differ from a plain count of the events", file=sys.stderr
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
