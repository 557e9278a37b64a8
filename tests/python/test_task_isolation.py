"""heddle.task: Python compute vertices run as isolated processes forked from their worker
(``Resources(isolation="process")``, or ``"auto"`` with memory to enforce) give the same
records as threads (checked against ``collections.Counter``), run in another process,
keep their state across calls, and fail the job by name when they raise or outgrow their
memory contract."""

import collections
import os
import subprocess
import sys
import textwrap
import time

import pytest

import heddle
import heddle.task
from conftest import assert_all_ok, run_job
from heddle.task import DONE, MORE, Compute, Edge, Job, Resources, Source, TaskGraph

WORDS = "the quick brown fox jumps over the lazy dog and the cat sat on the mat".split()


@pytest.fixture(scope="module")
def comm():
    return heddle.init()


class Lines(Source):
    def __init__(self, index, count):
        self.index, self.left = index, count

    def next(self, ctx):
        n = self.left
        ctx.emit(" ".join(WORDS[(n * 7 + self.index + k) % len(WORDS)] for k in range(n % 9)))
        self.left -= 1
        return MORE if self.left else DONE


def reference(sources, count):
    words = collections.Counter()
    for index in range(sources):
        for n in range(count, 0, -1):
            words.update(WORDS[(n * 7 + index + k) % len(WORDS)] for k in range(n % 9))
    return words


class Split(Compute):
    """Words of each line as (word, 1), tagged with the process that split them."""

    def execute(self, ctx, line):
        for w in line.split():
            ctx.emit((w, (1, os.getpid())))


class Count(Compute):
    """Per-word counts kept in the task object (state across calls), emitted at the end."""

    def __init__(self):
        self.counts, self.pids = collections.Counter(), set()

    def execute(self, ctx, pair):
        word, (one, pid) = pair
        self.counts[word] += one
        self.pids.add(pid)

    def end_of_input(self, ctx):
        ctx.emit((dict(self.counts), sorted(self.pids), os.getpid()))


class Collect(Compute):
    def __init__(self, got):
        self.got = got

    def execute(self, ctx, record):
        self.got.append(record)


def word_count(comm, isolation, memory=0):
    got = []
    g = TaskGraph()
    src = g.source("lines", 2, lambda i: Lines(i, 300))
    split = g.compute("split", 2, lambda i: Split())
    count = g.compute("count", 2, lambda i: Count())
    sink = g.compute("collect", 1, lambda i: Collect(got))
    g.connect(src, split, Edge.direct())
    g.connect(split, count, Edge.hash())
    g.connect(count, sink, Edge.gather())
    for v in (split, count):
        g.resources(v, Resources(memory=memory, isolation=isolation))
    Job(comm, g).run()
    return [record for _task, record in got]


def totals(got):
    total = collections.Counter()
    for counts, _pids, _pid in got:
        total.update(counts)
    return total


@pytest.mark.parametrize("isolation,memory", [("process", 0), ("auto", 256 << 20)])
def test_isolated_processes_give_the_records_threads_give(comm, isolation, memory):
    want = reference(2, 300)
    threads = word_count(comm, "thread")
    processes = word_count(comm, isolation, memory)
    assert totals(threads) == want and totals(processes) == want
    me = os.getpid()
    # As threads every call ran in this process; as processes each instance in its own,
    # and the splitters' records came from theirs.
    assert all(pid == me and pids == [me] for _c, pids, pid in threads), threads
    counters = {pid for _c, _pids, pid in processes}
    splitters = {p for _c, pids, _pid in processes for p in pids}
    assert me not in counters | splitters and len(counters) == 2 and len(splitters) == 2


class Hog(Compute):
    def execute(self, ctx, x):
        import numpy as np

        block = np.ones(256 << 20, dtype=np.uint8)  # touched: 256 MiB resident
        ctx.emit(int(block.sum()))


def test_a_task_over_its_memory_contract_fails_the_job_by_name(comm):
    got = []
    g = TaskGraph()
    src = g.source("one", 1, lambda i: Lines(0, 1))
    hog = g.compute("hog", 1, lambda i: Hog())
    sink = g.compute("collect", 1, lambda i: Collect(got))
    g.connect(src, hog, Edge.direct())
    g.connect(hog, sink, Edge.direct())
    g.resources(hog, Resources(memory="64MiB"))
    started = time.monotonic()
    with pytest.raises(heddle.HeddleError) as failed:
        Job(comm, g).run()
    text = str(failed.value)
    assert "hog[0]" in text and "memory contract of 64 MiB" in text, text
    assert time.monotonic() - started < 10 and got == []
    # The worker and its next job are untouched.
    assert totals(word_count(comm, "process")) == reference(2, 300)


class Fails(Compute):
    def execute(self, ctx, line):
        raise ValueError(f"refusing {line!r} in {os.getpid()}")


def test_an_exception_in_an_isolated_task_fails_the_job_naming_it(comm):
    g = TaskGraph()
    src = g.source("one", 1, lambda i: Lines(0, 2))
    bad = g.compute("fails", 1, lambda i: Fails())
    g.connect(src, bad, Edge.direct())
    g.resources(bad, Resources(isolation="process"))
    with pytest.raises(heddle.HeddleError, match=r"fails\[0\].*ValueError: refusing"):
        Job(comm, g).run()


def test_what_an_isolated_task_prints_is_not_lost(tmp_path):
    script = tmp_path / "prints.py"
    script.write_text(
        textwrap.dedent(
            """
            import heddle
            from heddle.task import Compute, Edge, Job, Resources, TaskGraph, Source, DONE

            class One(Source):
                def next(self, ctx):
                    ctx.emit("x")
                    return DONE

            class Say(Compute):
                def execute(self, ctx, x):
                    print("said from the isolated process", x)

            g = TaskGraph()
            say = g.compute("say", 1, lambda i: Say())
            g.connect(g.source("one", 1, lambda i: One()), say, Edge.direct())
            g.resources(say, Resources(isolation="process"))
            Job(heddle.init(), g).run()
            """
        )
    )
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=True
    )
    assert "said from the isolated process x" in out.stdout, out


def test_isolation_is_refused_where_it_cannot_apply():
    with pytest.raises(ValueError, match="isolation='sandbox'"):
        Resources(isolation="sandbox")
    g = TaskGraph()
    src = g.source("src", 1, lambda i: Lines(0, 1))
    with pytest.raises(heddle.GraphError, match=r"'src'.*it is a source"):
        g.resources(src, Resources(isolation="process"))


@pytest.mark.parametrize("n", [2, 3])
def test_isolated_tasks_on_workers(n):
    job = run_job(n, "task_isolation.py")
    assert_all_ok(job, n)


HOLDER = """
import sys, time
import heddle
import heddle.task
from heddle.task import DONE, Compute, Edge, Job, Resources, Source, TaskGraph

class One(Source):
    def next(self, ctx):
        ctx.emit(1)
        return DONE

class Sleep(Compute):
    def execute(self, ctx, x):
        print("holding", flush=True)
        time.sleep(60)

g = TaskGraph()
hold = g.compute("hold", 1, lambda i: Sleep())
g.connect(g.source("one", 1, lambda i: One()), hold, Edge.direct())
g.resources(hold, Resources(memory=int(sys.argv[1]), isolation="thread"))
Job(heddle.init(), g).run()
"""


def test_a_job_beside_one_holding_the_memory_is_refused_naming_it(comm, monkeypatch, tmp_path):
    memory = heddle.task.WorkerSpec.discover(comm)[0].memory * 6 // 10
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    env = {**os.environ, "HEDDLE_ADMISSION": "queue"}
    holder = subprocess.Popen(
        [sys.executable, str(script), str(memory)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "holding\n"
        monkeypatch.setenv("HEDDLE_ADMISSION", "refuse")
        g = TaskGraph()
        src = g.source("one", 1, lambda i: Lines(0, 1))
        want = g.compute("wants", 1, lambda i: Split())
        g.connect(src, want, Edge.direct())
        g.resources(want, Resources(memory=memory, isolation="thread"))
        with pytest.raises(heddle.PlanError, match=r"not admitted.*wants\[0\].*holds"):
            Job(comm, g).run()
    finally:
        holder.kill()
        holder.wait()
