"""What workers offer to task placement, run under ``heddle run -n 2 --cpus-per-worker
--memory-per-worker``: rank 0 prints every worker's offer, then the error of a plan whose
task asks for more memory than any worker offers."""

import heddle
from heddle.task import DONE, FirstFit, Plan, Resources, Source, TaskGraph, WorkerSpec


class Nothing(Source):
    def next(self, ctx):
        return DONE


def main() -> None:
    comm = heddle.init()
    workers = WorkerSpec.discover(comm)
    g = TaskGraph()
    v = g.source("train", 2, lambda i: Nothing())
    g.resources(v, Resources(0.25, 2 << 30))
    try:
        Plan(g, workers, FirstFit())
        outcome = "planned"
    except heddle.PlanError as e:
        outcome = str(e)
    if comm.rank == 0:
        for w in workers:
            print(f"worker {w.rank} cpus={w.cpus} memory={w.memory}")
        print(outcome)


main()
