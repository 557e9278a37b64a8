"""Type stubs of ``heddle._heddle.task``: task graphs of Python tasks, their plans and
jobs (``heddle.task`` is the public API)."""

from collections.abc import Callable
from typing import Any, final

from typing_extensions import Self, TypeAlias

from heddle._heddle.comm import Comm

__all__ = [
    "Context",
    "Strategy",
    "Edge",
    "TaskGraph",
    "Plan",
    "Job",
    "StopHandle",
    "discover",
    "make_plan",
    "parse_bytes",
    "parse_cpus",
]

#: A worker as ``(rank, host, cpus, memory)`` (an alias of the stub only).
_WorkerTuple: TypeAlias = tuple[int, str, float, int]

@final
class Context:
    """What a task method receives as ``ctx``; valid only during that call."""

    def emit(self, record: Any) -> None:
        """Sends ``record`` on every outgoing edge of the task."""
    def emit_all(self, records: Any) -> None:
        """Emits every record of an iterable."""
    @property
    def emitted(self) -> int:
        """Records emitted in this call so far."""
    @property
    def name(self) -> str:
        """The vertex's name."""
    @property
    def index(self) -> int:
        """This instance's index among the vertex's instances."""
    @property
    def parallelism(self) -> int:
        """The vertex's number of instances."""
    @property
    def task(self) -> int:
        """The instance's task id (unique in the job)."""
    @property
    def worker(self) -> int:
        """Rank of the worker running the task."""
    @property
    def iteration(self) -> tuple[int, ...]:
        """The iteration counters, outermost first (empty outside iterations)."""
    @property
    def strategy(self) -> Strategy:
        """The current ``heddle.task.Strategy``."""
    def set_strategy(self, strategy: Strategy) -> None:
        """Changes when the task runs from now on."""
    def comm(self) -> Any:
        """The vertex's communicator (a ``heddle.Comm``); vertices marked collective only."""
    @property
    def state(self) -> Any:
        """The task's own picklable state (``None`` at first), checkpointed in streaming
        jobs; valid between calls too."""
    @state.setter
    def state(self, state: Any) -> None: ...
    @state.deleter
    def state(self) -> None: ...

@final
class Strategy:
    """When a task runs (see ``heddle.task.Strategy``)."""

    def __new__(
        cls, runs_on_data: bool = True, period_ms: float | None = None, max_runs: int | None = None
    ) -> Self: ...
    @staticmethod
    def on_data() -> Strategy:
        """Runs whenever input is waiting (the default)."""
    @staticmethod
    def periodic(period_ms: float) -> Strategy:
        """Runs every ``period_ms`` milliseconds only: input waits in the task's queue until
        the next run, which executes all of it and then calls ``tick``."""
    def every(self, period_ms: float) -> Strategy:
        """Also runs every ``period_ms`` milliseconds (``tick`` with no input waiting)."""
    def at_most(self, runs: int) -> Strategy:
        """Retires the task after ``runs`` activations."""
    @property
    def runs_on_data(self) -> bool:
        """Whether the task runs when input arrives."""
    @property
    def period_ms(self) -> float | None:
        """The period in milliseconds, if the task also runs on a timer."""
    @property
    def max_runs(self) -> int | None:
        """Activations after which the task retires, if limited."""
    def __eq__(self, value: object, /) -> bool: ...
    def __hash__(self) -> int: ...
    def __getnewargs__(self) -> tuple[bool, float | None, int | None]: ...

@final
class Edge:
    """How records move between the instances of two vertices (see ``heddle.task.Edge``)."""

    @staticmethod
    def direct() -> Edge:
        """Instance i to instance i (equal parallelism). Between instances on one worker
        the records pass in memory, as Python objects (chaining)."""
    @staticmethod
    def hash() -> Edge:
        """Each record to the instance a hash of its canonical encoding picks (equal
        records, equal instance, on every worker)."""
    @staticmethod
    def partition(partitioner: Callable[[Any], int]) -> Edge:
        """Each record to instance ``partitioner(record) % parallelism``."""
    @staticmethod
    def broadcast() -> Edge:
        """Every record to every downstream instance."""
    @staticmethod
    def reduce(reducer: Callable[[Any, Any], Any]) -> Edge:
        """All records combined with ``reducer`` (associative, commutative) into one value
        per downstream instance (in streaming mode: running values)."""
    @staticmethod
    def gather() -> Edge:
        """Every record to every downstream instance as ``(task, record)``, ``task`` being
        the sending instance's task id."""
    @staticmethod
    def keyed_reduce(reducer: Callable[[Any, Any], Any]) -> Edge:
        """``(key, value)`` records grouped by key, values combined with ``reducer``
        (combined on the sending worker first in batch mode)."""
    @staticmethod
    def keyed_gather() -> Edge:
        """``(key, value)`` records grouped by key: ``(key, [values])`` per key."""
    @property
    def kind(self) -> str:
        """The operation's name: ``"direct"``, ``"hash"``, ``"keyed_reduce"`` ..."""
    @property
    def func(self) -> Callable[..., Any] | None:
        """The partitioner or reducer, for the edges that take one."""

@final
class TaskGraph:
    """The description of a graph of Python tasks (see ``heddle.task.TaskGraph``)."""

    def __new__(cls) -> Self: ...
    def add_vertex(self, name: str, source: bool, parallelism: int, factory: Any) -> int: ...
    def connect(self, from_: int, to: int, edge: Edge) -> None: ...
    def set_strategy(self, v: int, strategy: Strategy) -> None: ...
    def get_strategy(self, v: int) -> Strategy: ...
    def set_resources(
        self,
        v: int,
        cpu: float,
        memory: int,
        hosts: list[str],
        net_bytes_per_s: int = 0,
        io_bytes_per_s: int = 0,
        isolation: str = "auto",
        expected: list[tuple[str, float]] = ...,
    ) -> None: ...
    def set_collective(self, v: int) -> None: ...
    def validate(self) -> None: ...

@final
class Plan:
    """Where every task instance runs (see ``heddle.task.Plan``)."""

    @property
    def workers(self) -> list[list[int]]: ...
    @property
    def first_task(self) -> list[int]: ...
    @property
    def vertices(self) -> list[tuple[str, str, int]]: ...
    @property
    def edges(self) -> list[tuple[int, int, str, bool]]: ...
    @property
    def world(self) -> list[_WorkerTuple]: ...

@final
class StopHandle:
    """Ends a streaming job or a stream run."""

    def __new__(cls) -> Self:
        """A handle not stopped yet."""
    def stop(self) -> None:
        """Asks the job to end: its sources end their output and the job drains."""

@final
class Job:
    """This worker's task instances of a plan (see ``heddle.task.Job``)."""

    def __new__(
        cls,
        comm: Comm,
        graph: TaskGraph,
        plan: Plan,
        streaming: bool = False,
        budget_bytes: int | None = None,
        batch_bytes: int | None = None,
        checkpoint_interval: float | None = None,
        checkpoint_dir: str | None = None,
        job: str | None = None,
    ) -> Self: ...
    def run(self) -> dict[str, Any]: ...
    def iterate(self, counts: list[int]) -> None: ...
    def one_pass(self, iteration: list[int]) -> None: ...
    def close(self) -> dict[str, Any]: ...
    def stop_handle(self) -> StopHandle: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def mode(self) -> str: ...
    @property
    def rank(self) -> int: ...

def discover(comm: Comm) -> list[_WorkerTuple]:
    """Every worker of ``comm`` with its host and what it offers: its share of the host's
    cores and memory (machine, control groups, Slurm) or ``heddle run --cpus-per-worker
    --memory-per-worker`` (collective)."""

def parse_bytes(text: str) -> int:
    """Bytes in an amount such as ``"200MiB"``; ``ValueError`` saying what is wrong."""

def parse_cpus(text: str) -> float:
    """Cores in ``text`` (positive); ``ValueError`` saying what is wrong."""

def make_plan(graph: TaskGraph, workers: list[_WorkerTuple], scheduler: str) -> Plan:
    """Plans ``graph`` with the scheduler named ``round_robin``, ``first_fit`` or
    ``data_locality``."""
