"""heddle.task on every worker of the job: graphs of Python tasks against plain Python
computations — keyed counts over chained and shuffled edges, every edge kind in both
modes, iterations with collectives inside tasks, a streaming job stopped by a task."""

import collections
import json
import traceback

import heddle
from heddle.task import DONE, MORE, Compute, Edge, Job, Plan, Source, Strategy, TaskGraph

comm = heddle.init()
rank, size = comm.rank, comm.size
failures = []
checks = 0


def check(name, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{name}: got {str(got)[:300]} want {str(want)[:300]}")


class Numbers(Source):
    """Instance i of p emits its share of 0 .. n - 1, `per_call` per call."""

    def __init__(self, index, parallelism, n, per_call=100):
        self.next_value = n * index // parallelism
        self.end = n * (index + 1) // parallelism
        self.per_call = per_call

    def next(self, ctx):
        stop = min(self.next_value + self.per_call, self.end)
        ctx.emit_all(range(self.next_value, stop))
        self.next_value = stop
        return MORE if self.next_value < self.end else DONE


class Keyed(Compute):
    def __init__(self, keys):
        self.keys = keys

    def execute(self, ctx, x):
        ctx.emit((x % self.keys, 1))


class Collect(Compute):
    """Keeps what it receives; the instances of this worker share `into`."""

    def __init__(self, into):
        self.into = into

    def execute(self, ctx, x):
        self.into.append(x)


def everywhere(local):
    """Every worker's list, concatenated, on every worker."""
    return [x for part in comm.allgather(local) for x in part]


try:
    # numbers -> (direct, chained) keyed -> keyed_reduce -> collect, 1-3 instances per worker.
    n, keys = 10_000, 37
    for per in (1, 2, 3):
        p = size * per
        got = []
        g = TaskGraph()
        # Factories bind this iteration's values (p=p, got=got): a job may call them late.
        src = g.source("numbers", p, lambda i, p=p: Numbers(i, p, n))
        key = g.compute("key", p, lambda i: Keyed(keys))
        sink = g.compute("collect", p, lambda i, got=got: Collect(got))
        g.connect(src, key, Edge.direct())
        g.connect(key, sink, Edge.keyed_reduce(lambda a, b: a + b))
        plan = Plan(g, comm)
        check("direct edge chained", plan.edges[0][3], True)
        Job(comm, g, plan).run()
        total = everywhere(got)
        check(
            f"keyed counts ({per} per worker)",
            sorted(total),
            sorted(collections.Counter(x % keys for x in range(n)).items()),
        )

    # Every edge kind in both modes.
    for mode in ("batch", "streaming"):
        part, bcast, red, gat, grp = [], [], [], [], []
        g = TaskGraph()
        a = g.source("a", size, lambda i: Numbers(i, size, size * 100, per_call=7))
        s1 = g.compute("part", size, lambda i, part=part: Collect(part))
        s2 = g.compute("bcast", size, lambda i, bcast=bcast: Collect(bcast))
        s3 = g.compute("reduce", 1, lambda i, red=red: Collect(red))
        s4 = g.compute("gather", 1, lambda i, gat=gat: Collect(gat))
        hashed = g.compute("hashed", size, lambda i: Keyed(5))
        s5 = g.compute("keyed_gather", size, lambda i, grp=grp: Collect(grp))
        g.connect(a, s1, Edge.partition(lambda x: -x))  # negative: Python's modulo
        g.connect(a, s2, Edge.broadcast())
        g.connect(a, s3, Edge.reduce(lambda x, y: x + y))
        g.connect(a, s4, Edge.gather())
        g.connect(a, hashed, Edge.hash())
        g.connect(hashed, s5, Edge.keyed_gather())
        report = Job(comm, g, mode=mode).run()
        every = list(range(size * 100))
        check(f"partition ({mode})", sorted(everywhere(part)), every)
        check(f"broadcast ({mode})", sorted(everywhere(bcast)), sorted(every * size))
        reduced = everywhere(red)
        if mode == "batch":
            check("batch reduce is one total", reduced, [sum(every)])
        else:
            # The i-th output combines the i-th record of every source.
            check("streaming reduce outputs add up", sum(reduced), sum(every))
        gathered = everywhere(gat)
        check(f"gather ({mode})", sorted(x for _, x in gathered), every)
        check(f"gather tags ({mode})", all(task == x // 100 for task, x in gathered), True)
        groups = everywhere(grp)
        merged = collections.defaultdict(int)
        for k, vs in groups:
            merged[k] += sum(vs)
        check(
            f"keyed_gather ({mode})", dict(merged), dict(collections.Counter(x % 5 for x in every))
        )
        emitted = sum(t.emitted for t in report.tasks if t.task.startswith("a["))
        check(f"report counts ({mode})", sum(comm.allgather(emitted)), size * 100)

    # Iterations: tasks keep state across passes and allreduce in end_of_input.
    class PerPass(Source):
        def __init__(self, i):
            self.pass_ = None

        def next(self, ctx):
            if self.pass_ != ctx.iteration:
                self.pass_, self.value = ctx.iteration, 1
            ctx.emit_all(range(self.value, min(self.value + 3, 11)))
            self.value = min(self.value + 3, 11)
            return self.value <= 10

    log = []

    class Accumulate(Compute):
        def __init__(self, i):
            self.state = 0

        def prepare(self, ctx):
            self.comm = ctx.comm()

        def execute(self, ctx, x):
            self.state += x

        def end_of_input(self, ctx):
            log.append((list(ctx.iteration), ctx.comm().allreduce(self.state), self.comm.size))

    g = TaskGraph()
    src = g.source("src", size, PerPass)
    acc = g.compute("acc", size, Accumulate)
    g.connect(src, acc, Edge.direct())
    g.collective(acc)
    job = Job(comm, g)
    job.iterate([2, 3])
    report = job.close()
    check("passes", report.passes, 6)
    check(
        "iterations with an allreduce in the task",
        log,
        [([k // 3, k % 3], 55 * (k + 1) * size, size) for k in range(6)],
    )

    # Streaming: endless sources until a sink stops the job; nothing sent is lost.
    class Endless(Source):
        def __init__(self, i):
            self.value = i << 40

        def next(self, ctx):
            ctx.emit_all(range(self.value, self.value + 64))
            self.value += 64
            return MORE

    seen = []
    handle = []

    class StopAfter(Compute):
        def execute(self, ctx, x):
            seen.append(x)
            if len(seen) == 2000:
                handle[0].stop()

    g = TaskGraph()
    src = g.source("endless", size, Endless)
    sink = g.compute("sink", size, lambda i: StopAfter())
    g.connect(src, sink, Edge.direct())  # each worker's sink stops its own sources
    job = Job(comm, g, mode="streaming")
    handle.append(job.stop_handle())
    report = job.run()
    emitted = sum(t.emitted for t in report.tasks if t.task.startswith("endless"))
    check(
        "streaming: every emitted record arrived once",
        (len(seen), len(set(seen))),
        (emitted, emitted),
    )
    check("streaming: ran until stopped", len(seen) >= 2000, True)

    # A periodic sink runs on a timer with the waiting input.
    got, ticks = [], []

    class Periodic(Compute):
        def execute(self, ctx, x):
            got.append(x)

        def tick(self, ctx):
            ticks.append(ctx.strategy.period_ms)

    g = TaskGraph()
    src = g.source("src", size, lambda i: Numbers(i, size, 50 * size, per_call=5))
    per = g.compute("per", size, lambda i: Periodic())
    g.connect(src, per, Edge.direct())
    g.strategy(per, Strategy.periodic(5))
    Job(comm, g).run()
    check("periodic: every record, in order", got, list(range(50 * rank, 50 * rank + 50)))
    check("periodic: ticks", len(ticks) >= 1 and set(ticks) == {5.0}, True)
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"ok": not failures, "checks": checks, "failures": failures}))
