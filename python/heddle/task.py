"""heddle.task: task graphs whose tasks are Python objects, run by Heddle's task system.

Describe a graph of *source* tasks (they produce records) and *compute* tasks (they
execute the records they receive and may emit records of their own; a compute vertex
without outgoing edges is a sink), connect them with edges (dataflow operations), place
their instances on the workers with a scheduler, and run them — in batch or streaming
mode, once or in nested iterations. Every worker of the job runs the same program::

    import heddle
    from heddle.task import Compute, Edge, Job, Plan, Source, TaskGraph

    class Numbers(Source):
        def __init__(self, index):
            self.next_value, self.end = index * 50, index * 50 + 50
        def next(self, ctx):                     # emits a bounded slice per call
            while self.next_value < self.end and ctx.emitted < 1000:
                ctx.emit(self.next_value)
                self.next_value += 1
            return self.next_value < self.end    # True (MORE): call again; False (DONE)

    class Total(Compute):
        def __init__(self, index):
            self.total = 0
        def execute(self, ctx, x):
            self.total += x
        def end_of_input(self, ctx):
            print("total", self.total)

    comm = heddle.init()
    g = TaskGraph()
    numbers = g.source("numbers", 2, Numbers)    # factory(index) makes instance `index`
    total = g.compute("total", 1, Total)
    g.connect(numbers, total, Edge.hash())
    plan = Plan(g, comm)                         # round robin by default
    Job(comm, g, plan).run()

Task life cycle (DataCutter's): ``prepare(ctx)`` once, then ``next(ctx)`` (sources) or
``execute(ctx, record)`` (compute) as input arrives, ``tick(ctx)`` on timed activations,
``end_of_input(ctx)`` when every input of a pass has ended, ``close(ctx)`` once at the
end. Only ``next``/``execute`` are required; subclassing :class:`Source` or
:class:`Compute` is optional.

Records are Python objects: within a worker they pass between tasks as they are (direct
edges between co-located instances hand them over in memory); when they cross workers
they are pickled (protocol 5; ``None``, ``bool``, 64-bit ``int``, ``float``, ``str``,
``bytes`` and tuples of them use a compact encoding). What a compute task receives
depends on its incoming edges: the record itself; ``(task, record)`` from
:meth:`Edge.gather`; ``(key, value)`` from :meth:`Edge.keyed_reduce`; ``(key, [values])``
from :meth:`Edge.keyed_gather`. A task whose outgoing edges are keyed emits ``(key,
value)`` tuples. Keys are compared by a canonical encoding (see :mod:`heddle.data`).

Checkpoints (streaming jobs): ``Job(..., mode="streaming", checkpoint_interval=1.0,
checkpoint_dir="ckpt/")`` snapshots every task at aligned barriers; a task's state is
``ctx.state`` (any picklable object, ``None`` at first), which a job resumed from its last
complete checkpoint (after ``heddle run --restarts N``) finds restored before ``prepare``.
A source keeps its position there (what it emitted so far) and goes on from it; a task
with a ``committed(ctx, checkpoint)`` method hears when a checkpoint has completed on
every task (to publish output it staged, as a two-phase sink does)::

    class Counter(Source):
        def __init__(self, index):
            self.index = index
        def next(self, ctx):
            start = ctx.state or 0                    # restored after a failure
            for i in range(start, min(start + 100, 10_000)):
                ctx.emit(i)
            ctx.state = min(start + 100, 10_000)
            return ctx.state < 10_000

Tasks of a vertex marked :meth:`TaskGraph.collective` get a communicator of their own
(``ctx.comm()``, rank = instance index) for BSP collectives inside the task, e.g. an
allreduce in ``end_of_input``.

Blocking calls (planning with :meth:`WorkerSpec.discover`, :class:`Job` creation,
:meth:`Job.run`, :meth:`Job.iterate` ...) release the GIL while they wait; the Python
task methods take it back to run. An exception raised by a task ends the job on its
worker and is raised as itself by the call that ran the job.
"""

from __future__ import annotations

import abc
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Callable

from heddle._checkpoints import Interval, job_name, seconds
from heddle._heddle import comm as _comm, task as _task
from heddle._placement import (
    DataLocality as DataLocality,
    FirstFit as FirstFit,
    Resources as Resources,
    RoundRobin as RoundRobin,
    Scheduler as Scheduler,
    WorkerSpec as WorkerSpec,
)
from heddle._report import (
    CheckpointStats as CheckpointStats,
    ProcessUsage as ProcessUsage,
    Report as Report,
    TaskStats as TaskStats,
)
from heddle.bridge import task_factory
from heddle.comm import Comm

__all__ = [
    "MORE",
    "DONE",
    "Source",
    "Compute",
    "Context",
    "Edge",
    "Strategy",
    "Resources",
    "WorkerSpec",
    "RoundRobin",
    "FirstFit",
    "DataLocality",
    "Vertex",
    "TaskGraph",
    "Plan",
    "Job",
    "Report",
    "ProcessUsage",
    "TaskStats",
    "CheckpointStats",
    "StopHandle",
]

#: Returned by :meth:`Source.next`: more records remain, call again.
MORE = True
#: Returned by :meth:`Source.next`: this pass is over (``None`` means the same).
DONE = False

#: What task methods receive as ``ctx``: ``emit(record)``, ``emit_all(records)``,
#: ``emitted``, ``name``, ``index``, ``parallelism``, ``task``, ``worker``, ``iteration``,
#: ``strategy`` / ``set_strategy(s)``, ``comm()``. Valid only during the call, but for
#: ``state``: the task's own picklable state, checkpointed in streaming jobs.
Context = _task.Context
#: Ends a streaming job: ``stop()`` (from a task or another thread).
StopHandle = _task.StopHandle


class Source(abc.ABC):
    """Base class of source tasks (optional: any object with ``next(ctx)`` will do)."""

    def prepare(self, ctx: Context) -> None:
        """Called once, before anything else."""

    @abc.abstractmethod
    def next(self, ctx: Context) -> bool | None:
        """Emits the next records with ``ctx.emit``; a bounded slice per call (say a few
        thousand), so the executor can move them. Returns :data:`MORE` (``True``) to be
        called again, :data:`DONE` (``False`` or ``None``) when this pass is over."""

    def committed(self, ctx: Context, checkpoint: int) -> None:
        """Checkpoint ``checkpoint`` completed on every task (checkpointed jobs)."""

    def close(self, ctx: Context) -> None:
        """Called once, after the last pass."""


class Compute(abc.ABC):
    """Base class of compute (and sink) tasks (optional: any object with
    ``execute(ctx, record)`` will do)."""

    def prepare(self, ctx: Context) -> None:
        """Called once, before anything else."""

    @abc.abstractmethod
    def execute(self, ctx: Context, record: Any) -> None:
        """Executes one received record; may emit records with ``ctx.emit``."""

    def tick(self, ctx: Context) -> None:
        """A timed activation (a strategy with a period), after the waiting input."""

    def end_of_input(self, ctx: Context) -> None:
        """Every input has ended for this pass: emit results that need all of it."""

    def committed(self, ctx: Context, checkpoint: int) -> None:
        """Checkpoint ``checkpoint`` completed on every task (checkpointed jobs): output
        staged up to it may be published."""

    def close(self, ctx: Context) -> None:
        """Called once, after the last pass (or when the task retires)."""


#: When a task runs (Granules' scheduling strategies): when data arrives, every
#: ``period_ms`` milliseconds, at most ``max_runs`` times, or a combination::
#:
#:     Strategy.on_data()                        # every arriving record (the default)
#:     Strategy.periodic(20)                     # every 20 ms: the waiting input, then tick()
#:     Strategy.on_data().every(50).at_most(10)  # on data, also every 50 ms, 10 activations
#:
#: ``Strategy(runs_on_data=True, period_ms=None, max_runs=None)`` builds one from its parts
#: (checked: a period is a positive number of milliseconds; a strategy that does not run
#: on data needs one). A task may change its strategy while it runs
#: (``ctx.set_strategy``). A task that reaches ``max_runs`` retires: it closes, its outputs
#: end, and input arriving later is counted as discarded. Native (heddle-task's
#: ``Strategy``), so Rust and Python share one definition.
Strategy = _task.Strategy

#: How records move between the instances of two vertices (a dataflow operation):
#: ``Edge.direct()``, ``hash()``, ``partition(f)``, ``broadcast()``, ``reduce(f)``,
#: ``gather()``, ``keyed_reduce(f)``, ``keyed_gather()`` (see each method). Native
#: (heddle-task's ``Edge``), so Rust and Python share one set of operations.
Edge = _task.Edge


@dataclass(frozen=True)
class Vertex:
    """A vertex of a :class:`TaskGraph` (returned by ``source`` and ``compute``)."""

    id: int
    name: str


class TaskGraph:
    """A graph of Python tasks: vertices made with :meth:`source` and :meth:`compute`,
    connected with :meth:`connect`."""

    def __init__(self) -> None:
        self._native = _task.TaskGraph()
        self._vertices: list[Vertex] = []

    def _add(
        self, name: str, source: bool, parallelism: int, factory: Callable[[int], Any]
    ) -> Vertex:
        if not callable(factory):
            raise TypeError(
                f"the factory of vertex {name!r} must be callable (index -> task object)"
            )
        v = Vertex(self._native.add_vertex(str(name), source, int(parallelism), factory), str(name))
        self._vertices.append(v)
        return v

    def source(self, name: str, parallelism: int, factory: Callable[[int], Any]) -> Vertex:
        """A source vertex of ``parallelism`` instances; ``factory(i)`` makes instance ``i``
        (a class whose constructor takes the index works)."""
        return self._add(name, True, parallelism, factory)

    def compute(self, name: str, parallelism: int, factory: Callable[[int], Any]) -> Vertex:
        """A compute vertex (a sink if nothing connects from it) of ``parallelism``
        instances; ``factory(i)`` makes instance ``i``."""
        return self._add(name, False, parallelism, factory)

    def bridge(
        self,
        name: str,
        parallelism: int,
        command: str | Sequence[str],
        *,
        transport: str = "pipe",
        args: Sequence[str] = (),
        credits: int = 64,
        max_record: int = 64 << 20,
        timeout: float = 60.0,
        policy: str | None = None,
    ) -> Vertex:
        """A vertex of ``parallelism`` instances, each the program ``command`` — a filter
        written with a bridge SDK in C, C++, Java, Go or Python (see :mod:`heddle.bridge`)
        — started before the first record, fed each record and ended (its ``finalize``) at
        the end of the input; its results are the vertex's output. ``args`` go to the
        filter's ``init``; ``transport`` is ``"pipe"``, ``"fifo"``, ``"tcp"``, ``"unix"`` or
        ``"shm"``; ``policy`` switches it by rules (see :class:`heddle.bridge.Bridge`)."""
        factory = task_factory(command, transport, args, credits, max_record, timeout, policy)
        return self._add(name, False, parallelism, factory)

    def connect(self, from_: Vertex, to: Vertex, edge: Edge) -> TaskGraph:
        """Connects ``from_``'s output to ``to``'s input through ``edge``."""
        self._native.connect(from_.id, to.id, edge)
        return self

    def strategy(self, vertex: Vertex, strategy: Strategy) -> TaskGraph:
        """Sets the strategy the instances of ``vertex`` start with."""
        self._native.set_strategy(vertex.id, strategy)
        return self

    def resources(self, vertex: Vertex, resources: Resources) -> TaskGraph:
        """Sets the resources each instance of ``vertex`` requests, and where it runs
        (``resources.isolation``: a compute vertex may run as isolated processes)."""
        self._native.set_resources(
            vertex.id,
            float(resources.cpus),
            int(resources.memory),
            list(resources.hosts),
            int(resources.net_bytes_per_s),
            int(resources.io_bytes_per_s),
            resources.isolation,
            resources.rates(),
        )
        return self

    def collective(self, vertex: Vertex) -> TaskGraph:
        """Gives the instances of ``vertex`` a communicator of their own (``ctx.comm()``,
        rank = instance index) for collectives inside the tasks; needs at most one
        instance of the vertex per worker."""
        self._native.set_collective(vertex.id)
        return self

    def validate(self) -> None:
        """Checks the graph as planning would; raises :class:`heddle.GraphError`."""
        self._native.validate()

    @property
    def vertices(self) -> list[Vertex]:
        """The vertices, in the order they were added."""
        return list(self._vertices)


class Plan:
    """Where every task instance runs: ``Plan(graph, comm)`` discovers the workers of
    ``comm`` (collective); ``Plan(graph, [WorkerSpec, ...])`` plans for given workers.
    Deterministic: every worker computes the same plan. ``print(plan)`` shows it."""

    def __init__(
        self,
        graph: TaskGraph,
        workers: Comm | Sequence[WorkerSpec],
        scheduler: Scheduler = RoundRobin(),
    ) -> None:
        specs = WorkerSpec.discover(workers) if isinstance(workers, _comm.Comm) else list(workers)
        self._native = _task.make_plan(
            graph._native,
            [(w.rank, w.host, float(w.cpus), int(w.memory)) for w in specs],
            scheduler.name,
        )

    @classmethod
    def _wrap(cls, native: Any) -> Plan:
        p = cls.__new__(cls)
        p._native = native
        return p

    @property
    def workers(self) -> list[list[int]]:
        """For each vertex, the worker (index into :attr:`world`) of each instance."""
        return self._native.workers

    @property
    def vertices(self) -> list[tuple[str, str, int]]:
        """``(name, kind, parallelism)`` of each vertex; kind is source, compute or sink."""
        return self._native.vertices

    @property
    def edges(self) -> list[tuple[int, int, str, bool]]:
        """``(from, to, kind, chained)`` of each edge (chained: records pass in memory)."""
        return self._native.edges

    @property
    def first_task(self) -> list[int]:
        """Task id of instance 0 of each vertex (instance i has ``first + i``)."""
        return self._native.first_task

    @property
    def world(self) -> list[WorkerSpec]:
        """The workers planned for."""
        return [WorkerSpec(*w) for w in self._native.world]

    def __str__(self) -> str:
        return str(self._native)

    def __repr__(self) -> str:
        return repr(self._native)


class Job:
    """This worker's task instances of a plan (collective: every worker creates the job
    with the same graph and plan). ``mode`` is ``"batch"`` (tasks end when their input
    ends) or ``"streaming"`` (long-running, until :meth:`StopHandle.stop`). The plan
    defaults to ``Plan(graph, comm)``.

    A streaming job run once (:meth:`run`) checkpoints every ``checkpoint_interval``
    seconds into ``checkpoint_dir`` when either is given (the directory defaults to
    ``heddle-checkpoints-<uid>/<job>`` in the temp directory; without an interval only a
    last checkpoint is taken, when the sources end), and resumes from the newest complete
    checkpoint of job ``job`` (default: the script's name) that it finds there: see the
    module's notes on ``ctx.state``. Unlike data sessions it does not read
    ``HEDDLE_CHECKPOINT_INTERVAL_S``: a task graph's sources replay only if written to."""

    def __init__(
        self,
        comm: Comm,
        graph: TaskGraph,
        plan: Plan | None = None,
        mode: str = "batch",
        budget_bytes: int | None = None,
        batch_bytes: int | None = None,
        checkpoint_interval: Interval = None,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        job: str | None = None,
    ) -> None:
        if mode not in ("batch", "streaming"):
            raise ValueError(f"mode must be 'batch' or 'streaming', not {mode!r}")
        if plan is None:
            plan = Plan(graph, comm)
        self._native = _task.Job(
            comm,
            graph._native,
            plan._native,
            mode == "streaming",
            budget_bytes,
            batch_bytes,
            seconds(checkpoint_interval),
            None if checkpoint_dir is None else os.fspath(checkpoint_dir),
            job_name(job),
        )

    def run(self) -> Report:
        """Runs the graph once: prepare, one pass, close."""
        return Report._from(self._native.run())

    def iterate(self, counts: Iterable[int]) -> None:
        """Runs nested loops of passes, ``counts = [outer, inner, ...]``; tasks keep their
        state across passes and see the counters in ``ctx.iteration``. May be called again
        to continue; :meth:`close` ends the job."""
        self._native.iterate([int(c) for c in counts])

    def run_pass(self, iteration: Sequence[int] = ()) -> None:
        """Runs one pass with the iteration counters ``iteration``."""
        self._native.one_pass([int(i) for i in iteration])

    def close(self) -> Report:
        """Closes every task (once) and reports."""
        return Report._from(self._native.close())

    def stop_handle(self) -> StopHandle:
        """A handle that ends a streaming job (``stop()``, from a task or another thread)."""
        return self._native.stop_handle()

    @property
    def plan(self) -> Plan:
        """The plan the job runs."""
        return Plan._wrap(self._native.plan)

    @property
    def mode(self) -> str:
        """``"batch"`` or ``"streaming"``."""
        return self._native.mode
