"""Isolated Python tasks on every worker of the job: a word count whose splitters and
counters run as processes forked from their workers (one per instance), checked against
collections.Counter on the worker that gathers the counts."""

import collections
import json
import os
import traceback

import heddle
from heddle.task import DONE, MORE, Compute, Edge, Job, Resources, Source, TaskGraph

comm = heddle.init()
rank, size = comm.rank, comm.size
WORDS = "a bb a ccc bb a dd e a ff".split()
LINES = 400
failures = []
got = []


class Lines(Source):
    def __init__(self, index):
        self.index, self.left = index, LINES

    def next(self, ctx):
        n = self.left
        ctx.emit(" ".join(WORDS[(n + self.index + k) % len(WORDS)] for k in range(n % 7)))
        self.left -= 1
        return MORE if self.left else DONE


class Split(Compute):
    def execute(self, ctx, line):
        for w in line.split():
            ctx.emit((w, 1))


class Count(Compute):
    def __init__(self):
        self.counts = collections.Counter()

    def execute(self, ctx, pair):
        self.counts[pair[0]] += pair[1]

    def end_of_input(self, ctx):
        ctx.emit((os.getpid(), dict(self.counts)))


class Collect(Compute):
    def execute(self, ctx, record):
        got.append(record[1])


try:
    g = TaskGraph()
    src = g.source("lines", 2 * size, Lines)
    split = g.compute("split", 2 * size, lambda i: Split())
    count = g.compute("count", size, lambda i: Count())
    sink = g.compute("collect", 1, lambda i: Collect())
    g.connect(src, split, Edge.direct())
    g.connect(split, count, Edge.hash())
    g.connect(count, sink, Edge.gather())
    g.resources(split, Resources(isolation="process"))
    g.resources(count, Resources(memory="128MiB"))  # auto: a process, its memory enforced
    Job(comm, g).run()
    want = collections.Counter()
    for index in range(2 * size):
        for n in range(LINES, 0, -1):
            want.update(WORDS[(n + index + k) % len(WORDS)] for k in range(n % 7))
    total = collections.Counter()
    for _pid, counts in got:
        total.update(counts)
    mine = got != []
    if mine and total != want:
        failures.append(f"counts: got {dict(total)} want {dict(want)}")
    pids = {pid for pid, _ in got}
    if mine and (len(pids) != size or os.getpid() in pids):
        failures.append(f"counter processes: {pids} (this worker is {os.getpid()})")
    gathered = comm.allgather(len(got))
    if sorted(gathered) != [0] * (size - 1) + [size]:
        failures.append(f"gathered per worker: {gathered}")
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"ok": not failures, "checks": 3, "failures": failures}))
