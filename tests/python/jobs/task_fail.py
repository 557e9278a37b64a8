"""A task of the last rank raises in the middle of a job: that worker fails with the
task's exception and the launcher stops the others (blocked in the job)."""

import _pids
import heddle
from heddle.task import Compute, Edge, Job, Source, TaskGraph

comm = heddle.init()
comm.barrier()
_pids.record(comm.rank)


class Numbers(Source):
    def __init__(self, i):
        self.i = i

    def next(self, ctx):
        ctx.emit_all(range(self.i * 100, self.i * 100 + 100))


class Fragile(Compute):
    def execute(self, ctx, x):
        if ctx.index == ctx.parallelism - 1 and x % 100 == 42:
            raise ValueError(f"boom: cannot take {x}")


g = TaskGraph()
g.connect(
    g.source("numbers", comm.size, Numbers),
    g.compute("fragile", comm.size, lambda i: Fragile()),
    Edge.direct(),
)
Job(comm, g).run()
