"""How fast an isolated Python task is ready: forked from its worker (which has heddle
and numpy imported: the worker is its own fork server) against a fresh interpreter
importing the same. One worker (a world of one), jobs of one record through an echo
vertex placed as a thread or a process; a process's start is what its job reports
(``TaskStats.process.start_s``: groups made, forked, moved into the groups, first call
answered), and ``confine_s`` the part spent on the groups.

Starts are measured back to back and spaced (``--gap-ms`` apart): on cgroup v1 the first
move into a group after a quiet spell waits for an RCU grace period (see
docs/resources.md). Usage: ``python benches/python/bench_isolation_start.py [--repeat N]
[--gap-ms MS] [--json]``; exits non-zero if a job's records are wrong.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import numpy  # noqa: F401  (imported, as a Python worker with numpy has it)

import heddle
from heddle.task import DONE, Compute, Edge, Job, Resources, Source, TaskGraph


class One(Source):
    def next(self, ctx):
        ctx.emit(41)
        return DONE


class Echo(Compute):
    def execute(self, ctx, x):
        ctx.emit(x + 1)


class Keep(Compute):
    def __init__(self, got):
        self.got = got

    def execute(self, ctx, x):
        self.got.append(x)


def one_job(comm, isolation: str, memory: int) -> tuple[float, float, float]:
    """(job seconds, start seconds, confine seconds) of one job of one record."""
    got: list[int] = []
    g = TaskGraph()
    src = g.source("one", 1, lambda i: One())
    echo = g.compute("echo", 1, lambda i: Echo())
    keep = g.compute("keep", 1, lambda i: Keep(got))
    g.connect(src, echo, Edge.direct())
    g.connect(echo, keep, Edge.direct())
    g.resources(echo, Resources(memory=memory, isolation=isolation))
    started = time.perf_counter()
    report = Job(comm, g).run()
    job_s = time.perf_counter() - started
    if got != [42]:
        sys.exit(f"{isolation}: the echo gave {got}, not [42]")
    usage = next(t.process for t in report.tasks if t.task == "echo[0]")
    if (usage is None) != (isolation == "thread"):
        sys.exit(f"{isolation}: the echo ran {'as a thread' if usage is None else 'in a process'}")
    return job_s, usage.start_s if usage else 0.0, usage.confine_s if usage else 0.0


def fresh_interpreter() -> float:
    """Seconds until a new interpreter that imported heddle and numpy says it is ready."""
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", "import heddle, numpy, sys; sys.stdout.write('ready')"],
        capture_output=True,
        text=True,
        check=True,
    )
    if out.stdout != "ready":
        sys.exit(f"the fresh interpreter said {out.stdout!r}")
    return time.perf_counter() - started


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--gap-ms", type=float, default=100.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    comm = heddle.init()
    rows: dict[str, list[tuple[float, float, float]]] = {}
    kinds = [
        ("thread", "thread", 0, 0.0),
        (f"process, {args.gap_ms:g} ms after the last", "process", 64 << 20, args.gap_ms / 1e3),
        ("process, right after another", "process", 64 << 20, 0.0),
    ]
    for _ in range(args.repeat):
        for name, isolation, memory, gap in kinds:
            time.sleep(gap)
            rows.setdefault(name, []).append(one_job(comm, isolation, memory))
        fresh = fresh_interpreter()
        rows.setdefault("fresh interpreter (import heddle, numpy)", []).append((fresh, fresh, 0))

    def med(name: str, k: int) -> float:
        return statistics.median(r[k] for r in rows[name]) * 1e3

    summary = {
        name: {"job_ms": med(name, 0), "start_ms": med(name, 1), "confine_ms": med(name, 2)}
        for name in rows
    }
    with open("/sys/kernel/rcu_expedited") as f:
        expedited = f.read().strip() == "1"
    if args.json:
        print(json.dumps({"repeat": args.repeat, "rcu_expedited": expedited, "rows": summary}))
        return 0
    print(f"| placement (median of {args.repeat}) | ready, ms | of it confining, ms | job, ms |")
    print("|---|---:|---:|---:|")
    for name, r in summary.items():
        print(f"| {name} | {r['start_ms']:.2f} | {r['confine_ms']:.2f} | {r['job_ms']:.2f} |")
    cold = summary["fresh interpreter (import heddle, numpy)"]["start_ms"]
    for name in list(summary)[1:3]:
        print(f"{name}: {cold / summary[name]['start_ms']:.1f}x faster than a fresh interpreter")
    print(f"/sys/kernel/rcu_expedited = {int(expedited)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
