"""Trivial-task overhead with heddle.task: N independent tasks, each squaring its own
integer. A source vertex of N Python task instances, placed round robin on the workers —
instance i emits i * i once and is done — and a reduce edge summing the squares into one
task (on worker 0). Rank 0 checks the sum against the closed form and prints one JSON
line (the Rust ``tiny_tasks --via graph`` example's).

    heddle run -n 2 examples/python/tasks.py --tasks 10000

The clock starts once every worker has joined and covers building, planning and running
the tasks.
"""

from __future__ import annotations

import argparse
import json
import operator
import sys
import time

import heddle
from heddle.task import DONE, Compute, Edge, Job, Plan, Source, TaskGraph


class Square(Source):
    """Task i: emits i * i, once."""

    def __init__(self, index: int) -> None:
        self.i = index

    def next(self, ctx) -> bool:
        ctx.emit(self.i * self.i)
        return DONE


class Total(Compute):
    """Receives the reduced sum (one value) and keeps it in ``into``."""

    def __init__(self, into: list) -> None:
        self.into = into

    def execute(self, ctx, total: int) -> None:
        self.into.append(total)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", type=int, default=10_000, help="tasks in all")
    args = p.parse_args()
    if args.tasks < 1:
        p.error("--tasks must be at least 1")

    comm = heddle.init()
    comm.barrier()
    start = time.perf_counter()
    got: list = []
    g = TaskGraph()
    squares = g.source("square", args.tasks, Square)
    total = g.compute("total", 1, lambda _: Total(got))
    g.connect(squares, total, Edge.reduce(operator.add))
    Job(comm, g, Plan(g, comm)).run()
    job_s = comm.allreduce(time.perf_counter() - start, op=max)

    if comm.rank == 0:
        n = args.tasks
        want = (n - 1) * n * (2 * n - 1) // 6
        ok = got == [want]
        line = {
            "example": "tasks",
            "api": "python",
            "ok": ok,
            "tasks": n,
            "job_s": round(job_s, 4),
            "verify_s": 0.0,
            "detail": f"sum {got[0] if got else None}, want {want}",
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print(f"error: the sum of the squares is {got}, want {want}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
