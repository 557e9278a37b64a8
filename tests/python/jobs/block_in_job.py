"""Rank 0 blocks inside a job (a data action, or a task job with argv[2] == "task") whose
peers never join it: rank 1 sleeps in Python instead (until Ctrl-C or the launcher)."""

import sys
import time

import _pids
import heddle
from heddle.data import Session
from heddle.task import Compute, Edge, Job, Plan, Source, TaskGraph, WorkerSpec

comm = heddle.init()
session = Session(comm)
comm.barrier()
if comm.rank != 0:
    _pids.record(comm.rank)
    time.sleep(120)
elif sys.argv[2] == "task":

    class One(Source):
        def next(self, ctx):
            _pids.record(0)  # from inside the job, which then waits for rank 1
            ctx.emit(1)

    class Sink(Compute):
        def execute(self, ctx, x):
            pass

    g = TaskGraph()
    g.connect(
        g.source("one", comm.size, lambda i: One()),
        g.compute("sink", comm.size, lambda i: Sink()),
        Edge.hash(),
    )
    # Planned for given workers: discovering them would wait for rank 1 already.
    Job(comm, g, Plan(g, [WorkerSpec(r, "host", 1.0, 0) for r in range(comm.size)])).run()
else:
    session.range(0, 1000).map(lambda x: x == 0 and _pids.record(0)).count()
