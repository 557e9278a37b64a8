"""Rank 0 blocks inside a job (a data action, or a task job with argv[2] == "task") whose
peers never join it: rank 1 sleeps in Python instead (until Ctrl-C or the launcher)."""

import sys
import time

import _pids

import heddle
from heddle.data import Session
from heddle.task import Compute, Edge, Job, Source, TaskGraph

comm = heddle.init()
session = Session(comm)
comm.barrier()
_pids.record(comm.rank)
if comm.rank != 0:
    time.sleep(120)
elif sys.argv[2] == "task":

    class One(Source):
        def next(self, ctx):
            ctx.emit(1)

    class Sink(Compute):
        def execute(self, ctx, x):
            pass

    g = TaskGraph()
    g.connect(g.source("one", comm.size, lambda i: One()), g.compute("sink", comm.size, lambda i: Sink()), Edge.hash())
    Job(comm, g).run()
else:
    session.range(0, 1000).count()
