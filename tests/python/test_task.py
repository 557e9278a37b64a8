"""heddle.task: task graphs of Python tasks, in a world of one (planning, strategies,
errors, the GIL) and in jobs of 2, 3 and 4 workers (tests/python/jobs/task_graphs.py
checks every result against a plain computation)."""

import operator
import os
import pickle
import signal
import threading
import time

import pytest

import heddle
from conftest import assert_all_ok, assert_gone, finish, popen_job, run_job, wait_for_pids
from heddle.task import (
    DONE,
    MORE,
    Compute,
    DataLocality,
    Edge,
    FirstFit,
    Job,
    Plan,
    Resources,
    RoundRobin,
    Source,
    Strategy,
    TaskGraph,
    WorkerSpec,
)


@pytest.fixture(scope="module")
def comm():
    return heddle.init()


class Numbers(Source):
    def __init__(self, start, end, per_call=50):
        self.value, self.end, self.per_call = start, end, per_call

    def next(self, ctx):
        stop = min(self.value + self.per_call, self.end)
        ctx.emit_all(range(self.value, stop))
        self.value = stop
        return MORE if self.value < self.end else DONE


class Probe(Compute):
    """Records what it executes; switches strategy after `switch_after` records."""

    def __init__(self, seen, switch=None):
        self.seen, self.switch, self.ticks = seen, switch, 0

    def execute(self, ctx, x):
        self.seen.append(x)
        if self.switch and len(self.seen) == self.switch[0]:
            ctx.set_strategy(self.switch[1])

    def tick(self, ctx):
        self.ticks += 1


def probe_job(comm, strategy, n=100, switch=None, source_strategy=None):
    seen = []
    g = TaskGraph()
    src = g.source("src", 1, lambda i: Numbers(0, n, 1 if source_strategy else 50))
    probe = g.compute("probe", 1, lambda i: Probe(seen, switch))
    g.connect(src, probe, Edge.direct())
    g.strategy(probe, strategy)
    if source_strategy:
        g.strategy(src, source_strategy)
    report = Job(comm, g).run()
    return seen, next(t for t in report.tasks if t.task == "probe[0]")


def test_a_graph_runs_and_reports(comm):
    got = []
    g = TaskGraph()
    src = g.source("numbers", 2, lambda i: Numbers(i * 50, i * 50 + 50))
    total = g.compute("total", 1, lambda i: Probe(got))
    g.connect(src, total, Edge.hash())
    report = Job(comm, g).run()
    assert sorted(got) == list(range(100))
    assert report.passes == 1 and report.job_s >= 0
    assert {t.task: t.emitted for t in report.tasks if t.task.startswith("numbers")} == {
        "numbers[0]": 50,
        "numbers[1]": 50,
    }
    assert [t.executed for t in report.tasks if t.task == "total[0]"] == [100]


def test_the_plan_prints_every_task_and_edge(comm):
    g = TaskGraph()
    a = g.source("a", 2, lambda i: Numbers(0, 0))
    b = g.compute("b", 2, lambda i: Probe([]))
    g.connect(a, b, Edge.direct())
    plan = Plan(g, comm)
    text = str(plan)
    assert "a[0] a[1] b[0] b[1]" in text and "Direct (chained in memory)" in text, text
    assert plan.vertices == [("a", "source", 2), ("b", "sink", 2)]
    assert plan.edges == [(0, 1, "Direct", True)]
    assert plan.workers == [[0, 0], [0, 0]] and plan.first_task == [0, 2]


def specs(caps):
    return [WorkerSpec(rank, host, cpu, mem) for rank, (host, cpu, mem) in enumerate(caps)]


def shapes(*vertices):
    g = TaskGraph()
    vs = []
    for name, p, res in vertices:
        v = g.source(name, p, lambda i: Numbers(0, 0))
        g.resources(v, res)
        vs.append(v)
    return g


def test_first_fit_packs_heterogeneous_workers_in_order():
    workers = specs([("a", 4.0, 8 << 30), ("b", 1.0, 1 << 30), ("c", 8.0, 64 << 30)])
    g = shapes(("big", 2, Resources(3.0, 4 << 30)), ("small", 3, Resources(1.0, 1 << 29)))
    assert Plan(g, workers, FirstFit()).workers == [[0, 2], [0, 1, 2]]


def test_data_locality_prefers_the_hosts_holding_the_input():
    workers = specs(
        [("a", 2.0, 1 << 30), ("b", 2.0, 1 << 30), ("c", 2.0, 1 << 30), ("b", 2.0, 1 << 30)]
    )
    g = shapes(("read", 3, Resources(1.0, 0, ("b",))), ("free", 2, Resources(1.0, 0)))
    assert Plan(g, workers, DataLocality()).workers == [[1, 3, 1], [0, 2]]
    assert Plan(g, workers, RoundRobin()).workers == [[0, 1, 2], [0, 1]]


class Chunks(Source):
    """Emits `count` records of 8 KiB."""

    def __init__(self, count):
        self.left = count

    def next(self, ctx):
        ctx.emit(bytes(8 << 10))
        self.left -= 1
        return MORE if self.left else DONE


def test_a_network_contract_holds_a_task_to_its_rate(comm):
    # 1 MiB of records at 512 KiB/s: 2 s at least (only an upper bound on the rate is
    # checked: a slower machine only sends slower).
    got = []
    g = TaskGraph()
    src = g.source("chunks", 1, lambda i: Chunks(128))
    g.resources(src, Resources(net_bytes_per_s="512KiB"))
    sink = g.compute("sink", 1, lambda i: Probe(got))
    g.connect(src, sink, Edge.hash())
    started = time.monotonic()
    Job(comm, g).run()
    elapsed = time.monotonic() - started
    assert len(got) == 128 and all(len(r) == 8 << 10 for r in got)
    assert (1 << 20) / elapsed <= 1.1 * (512 << 10), elapsed


def test_requests_take_amounts_and_refuse_nonsense():
    assert Resources(0.5, "200MiB").memory == 200 << 20
    assert Resources(memory="1.5GiB").memory == 3 << 29
    for bad, says in [
        ({"memory": "-1GiB"}, "negative"),
        ({"memory": "lots"}, "not an amount of bytes"),
        ({"memory": -5}, "at least 0"),
        ({"net_bytes_per_s": "fast"}, "not an amount of bytes"),
        ({"cpus": 0}, "above 0"),
        ({"cpus": float("nan")}, "above 0"),
    ]:
        with pytest.raises(ValueError, match=says):
            Resources(**bad)


def test_a_request_that_cannot_fit_names_the_task_and_the_shortfall():
    workers = specs([("a", 2.0, 1 << 30), ("b", 2.0, 1 << 30)])
    g = shapes(("train", 2, Resources(1.0, 3 << 30)))
    for scheduler in (FirstFit(), DataLocality(), RoundRobin()):
        with pytest.raises(heddle.PlanError, match=r"train\[0\].*memory"):
            Plan(g, workers, scheduler)


def graph_error(build):
    g = TaskGraph()
    build(g)
    with pytest.raises(heddle.GraphError) as e:
        g.validate()
    assert isinstance(e.value, ValueError)
    return str(e.value)


def test_malformed_graphs_are_refused_with_the_reason():
    def mismatch(g):
        g.connect(
            g.source("a", 2, lambda i: Numbers(0, 0)),
            g.compute("b", 3, lambda i: Probe([])),
            Edge.direct(),
        )

    assert "equal parallelism" in graph_error(mismatch)
    assert "'orphan' has no input" in graph_error(
        lambda g: g.compute("orphan", 1, lambda i: Probe([]))
    )
    assert "parallelism 0" in graph_error(lambda g: g.source("zero", 0, lambda i: Numbers(0, 0)))
    assert "names must be unique" in graph_error(
        lambda g: [g.source("x", 1, lambda i: Numbers(0, 0)) for _ in range(2)]
    )

    def into_source(g):
        a, b = g.source("a", 1, lambda i: Numbers(0, 0)), g.source("b", 1, lambda i: Numbers(0, 0))
        g.connect(a, b, Edge.direct())

    assert "leads into a source" in graph_error(into_source)

    def cycle(g):
        a = g.source("a", 1, lambda i: Numbers(0, 0))
        b, c = g.compute("b", 1, lambda i: Probe([])), g.compute("c", 1, lambda i: Probe([]))
        g.connect(a, b, Edge.direct()).connect(b, c, Edge.direct()).connect(c, b, Edge.direct())

    assert "cycle" in graph_error(cycle)

    def mixed_input(g):
        a = g.source("a", 1, lambda i: Numbers(0, 0))
        b = g.compute("b", 1, lambda i: Probe([]))
        g.connect(a, b, Edge.direct()).connect(a, b, Edge.gather())

    assert "one shape of record" in graph_error(mixed_input)

    def mixed_output(g):
        a = g.source("a", 1, lambda i: Numbers(0, 0))
        g.connect(a, g.compute("b", 1, lambda i: Probe([])), Edge.direct())
        g.connect(a, g.compute("c", 1, lambda i: Probe([])), Edge.keyed_gather())

    assert "keyed and plain outgoing edges" in graph_error(mixed_output)


def test_strategy_at_most_k_retires_the_task_and_counts_what_it_dropped(comm):
    seen, stats = probe_job(comm, Strategy.on_data().at_most(5))
    assert seen == [0, 1, 2, 3, 4]
    assert (stats.executed, stats.discarded) == (5, 95)


def test_a_task_changes_its_strategy_while_running(comm):
    seen, stats = probe_job(comm, Strategy.on_data(), switch=(10, Strategy.on_data().at_most(15)))
    assert seen == list(range(15)) and stats.discarded == 85


def test_strategy_periodic_runs_on_a_timer_with_the_waiting_input(comm):
    seen, stats = probe_job(comm, Strategy.periodic(20), n=20, source_strategy=Strategy.periodic(5))
    assert seen == list(range(20)) and stats.ticks >= 1
    g = TaskGraph()
    with pytest.raises(heddle.ArgumentError, match="period"):
        g.strategy(g.source("s", 1, lambda i: None), Strategy(False, None, None))


def test_an_exception_in_a_task_is_raised_as_itself(comm):
    class Fragile(Compute):
        def execute(self, ctx, x):
            if x == 42:
                raise KeyError(f"cannot take {x}")

    g = TaskGraph()
    g.connect(
        g.source("src", 1, lambda i: Numbers(0, 100, 10)),
        g.compute("fragile", 1, lambda i: Fragile()),
        Edge.hash(),
    )
    with pytest.raises(KeyError, match="cannot take 42"):
        Job(comm, g).run()
    g = TaskGraph()
    g.connect(
        g.source("src", 1, lambda i: Numbers(0, 10)),
        g.compute("no_execute", 1, lambda i: object()),
        Edge.direct(),
    )
    with pytest.raises(heddle.ArgumentError, match="execute"):
        Job(comm, g).run()
    g = TaskGraph()
    g.connect(
        g.source("src", 1, lambda i: Numbers(0, 10)),
        g.compute("p", 1, lambda i: Probe([])),
        Edge.partition(lambda x: "not an int"),
    )
    with pytest.raises(TypeError):
        Job(comm, g).run()


def test_the_context_is_valid_only_during_its_call(comm):
    kept = []

    class Keep(Compute):
        def execute(self, ctx, x):
            kept.append(ctx)
            assert (ctx.name, ctx.index, ctx.parallelism, ctx.worker, ctx.iteration) == (
                "keep",
                0,
                1,
                0,
                (),
            )

        def end_of_input(self, ctx):
            with pytest.raises(heddle.GraphError, match="not marked collective"):
                ctx.comm()

    g = TaskGraph()
    g.connect(
        g.source("src", 1, lambda i: Numbers(0, 3)),
        g.compute("keep", 1, lambda i: Keep()),
        Edge.direct(),
    )
    Job(comm, g).run()
    with pytest.raises(heddle.ArgumentError, match="outside the task call"):
        kept[0].emit(1)


def test_a_collective_vertex_needs_one_instance_per_worker(comm):
    g = TaskGraph()
    acc = g.compute("acc", 2, lambda i: Probe([]))
    g.connect(g.source("src", 2, lambda i: Numbers(0, 1)), acc, Edge.direct())
    g.collective(acc)
    with pytest.raises(heddle.GraphError, match="'acc' has 2 instances on one worker"):
        Job(comm, g)


def test_a_job_releases_the_gil_while_it_waits(comm):
    # The sink runs every 10 ms only; between its calls the job loop waits without the
    # GIL, so another Python thread keeps running during the job (measured from the
    # task's prepare to its close, both inside the job).
    progress = [0]
    marks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            progress[0] += 1

    class Marked(Probe):
        def prepare(self, ctx):
            marks.append(progress[0])

        def close(self, ctx):
            marks.append(progress[0])

    seen = []
    g = TaskGraph()
    src = g.source("src", 1, lambda i: Numbers(0, 20, 1))
    probe = g.compute("probe", 1, lambda i: Marked(seen))
    g.connect(src, probe, Edge.direct())
    g.strategy(probe, Strategy.periodic(10)).strategy(src, Strategy.periodic(10))
    t = threading.Thread(target=spin)
    t.start()
    try:
        Job(comm, g).run()
    finally:
        stop.set()
        t.join(timeout=10)
    assert seen == list(range(20))
    assert marks[1] - marks[0] > 100_000, marks


@pytest.mark.parametrize("n", [2, 3, 4])
def test_task_graphs_on_workers(n):
    job = run_job(n, "task_graphs.py")
    assert_all_ok(job, n)
    assert all(rep["checks"] >= 26 for rep in job.reports.values()), job.reports


def test_an_exception_in_a_task_fails_the_job_and_stops_the_others(piddir):
    job = run_job(3, "task_fail.py", str(piddir))
    assert job.returncode == 1, job
    assert "ValueError: boom: cannot take 242" in job.stdout + job.stderr
    assert "heddle: rank 2 exited with status 1; stopping the other" in job.stderr
    assert_gone([int(f.read_text()) for f in piddir.glob("*.pid")])


@pytest.mark.parametrize("what", ["task", "data"])
def test_ctrl_c_in_a_worker_blocked_in_a_job_ends_the_job(what, piddir):
    """The job is aborted on rank 0, which raises KeyboardInterrupt there (uncaught: the
    worker ends by SIGINT), and the launcher stops the others."""
    proc = popen_job(2, "block_in_job.py", str(piddir), what)
    pids = wait_for_pids(piddir, 2, proc)
    time.sleep(0.5)  # rank 0 wrote its pid from inside the job; let it reach the wait
    os.kill(pids[0], signal.SIGINT)
    code, out, err = finish(proc)
    assert code == 130, (code, out, err)
    assert "[0] KeyboardInterrupt" in err, err
    assert "heddle: rank 0 was killed by signal 2 (SIGINT)" in err, err
    assert_gone(list(pids.values()))


def test_strategy_and_edge_are_the_native_declarations():
    # One definition, in Rust: heddle.task's classes are the extension's.
    assert Strategy is heddle._heddle.task.Strategy and Edge is heddle._heddle.task.Edge
    s = Strategy.on_data().every(50).at_most(10)
    assert (s.runs_on_data, s.period_ms, s.max_runs) == (True, 50.0, 10)
    assert s == Strategy(True, 50, 10) and hash(s) == hash(Strategy(True, 50, 10))
    assert Strategy.periodic(20) == Strategy(runs_on_data=False, period_ms=20)
    assert pickle.loads(pickle.dumps(s)) == s
    assert repr(Strategy.periodic(2.5)) == (
        "Strategy(runs_on_data=False, period_ms=2.5, max_runs=None)"
    )
    for bad in (lambda: Strategy.periodic(0), lambda: Strategy.on_data().every(float("nan"))):
        with pytest.raises(heddle.ArgumentError, match="positive number of milliseconds"):
            bad()
    add = operator.add
    kinds = [
        (Edge.direct(), "direct", None),
        (Edge.hash(), "hash", None),
        (Edge.partition(abs), "partition", abs),
        (Edge.broadcast(), "broadcast", None),
        (Edge.reduce(add), "reduce", add),
        (Edge.gather(), "gather", None),
        (Edge.keyed_reduce(add), "keyed_reduce", add),
        (Edge.keyed_gather(), "keyed_gather", None),
    ]
    assert [(e.kind, e.func) for e, _, _ in kinds] == [(k, f) for _, k, f in kinds]
    with pytest.raises(heddle.ArgumentError, match=r"Edge\.reduce takes a function, not int"):
        Edge.reduce(3)


def test_a_task_sees_the_strategy_it_was_given(comm):
    seen = []

    class Look(Compute):
        def execute(self, ctx, x):
            seen.append(ctx.strategy)

    g = TaskGraph()
    look = g.compute("look", 1, lambda i: Look())
    g.connect(g.source("src", 1, lambda i: Numbers(0, 1)), look, Edge.direct())
    g.strategy(look, Strategy.on_data().at_most(3))
    Job(comm, g).run()
    assert seen == [Strategy(True, None, 3)]


def test_workers_offer_what_heddle_run_says_and_a_plan_names_the_shortfall():
    options = ("--cpus-per-worker", "0.5", "--memory-per-worker", "1GiB")
    p = run_job(2, "offers.py", options=options, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.splitlines() == [
        f"[0] worker 0 cpus=0.5 memory={1 << 30}",
        f"[0] worker 1 cpus=0.5 memory={1 << 30}",
        "[0] cannot place the task graph: task train[0] does not fit: short by 1 GiB of "
        "memory (asks 2 GiB, at most 1 GiB free on a worker)",
    ], p.stdout + p.stderr


def test_a_bad_offer_setting_is_refused_before_anything_starts():
    p = run_job(2, "offers.py", options=("--memory-per-worker", "lots"), timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "--memory-per-worker: `lots` is not an amount of bytes" in p.stderr, p.stderr


def test_expected_usage_is_planned_and_checked(comm):
    g = TaskGraph()
    src = g.source("numbers", 1, lambda i: Numbers(0, 10))
    parse = g.compute("parse", 1, lambda i: Probe([]))
    g.connect(src, parse, Edge.direct())
    g.resources(parse, Resources(memory="64MiB", expected={"execute": 1e6}))
    text = str(Plan(g, comm))
    assert "vertex parse: expects 1000000 execute calls/s an instance" in text, text
    assert "its channel costs about 0.206 cores more than a thread's" in text, text
    g.resources(parse, Resources(expected={"run": 10}))
    with pytest.raises(heddle.GraphError, match="vertex 'parse' expects calls of 'run'"):
        Plan(g, comm)
    with pytest.raises(ValueError, match="a mapping of method to calls per second"):
        Resources(expected={"execute": "often"})
