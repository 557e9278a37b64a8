"""Trivial-task overhead with heddle.futures: N calls of a squaring function submitted one
by one from rank 0 (``executor.submit``), their results gathered and summed — what Ray's
``f.remote`` and Dask's ``client.submit`` do. Rank 0 is the driver; the other ranks run the
tasks. Rank 0 checks the sum against the closed form and prints one JSON line.

    heddle run -n 3 examples/python/futures_tasks.py --tasks 10000     # 2 workers

``--map CHUNK`` submits them with ``executor.map(..., chunksize=CHUNK)`` instead. The clock
starts once every worker has joined and the executor is up.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import heddle
from heddle.futures import CommExecutor


def square(i: int) -> int:
    return i * i


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=10_000, help="tasks in all")
    p.add_argument("--map", type=int, default=0, metavar="CHUNK", help="use map(chunksize=CHUNK)")
    args = p.parse_args()
    if args.tasks < 1:
        p.error("--tasks must be at least 1")
    comm = heddle.init()
    with CommExecutor(comm, root=0) as executor:
        if executor is None:
            return 0
        start = time.perf_counter()
        if args.map:
            total = sum(executor.map(square, range(args.tasks), chunksize=args.map))
        else:
            futures = [executor.submit(square, i) for i in range(args.tasks)]
            total = sum(f.result() for f in futures)
        job_s = time.perf_counter() - start
    n = args.tasks
    want = (n - 1) * n * (2 * n - 1) // 6
    ok = total == want
    line = {
        "example": "futures_tasks",
        "api": "python",
        "ok": ok,
        "tasks": n,
        "job_s": round(job_s, 4),
        "verify_s": 0.0,
        "us_per_task": round(job_s / n * 1e6, 2),
        "detail": f"sum {total}, want {want}",
        "workers": comm.size - 1,
    }
    print(json.dumps(line))
    if not ok:
        print(f"error: the sum of the squares is {total}, want {want}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
