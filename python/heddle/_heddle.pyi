"""Type stubs of the native core ``heddle._heddle`` (crates/heddle-python).

Use the public names from ``heddle`` / ``heddle.comm``; this module is their implementation.
"""

import builtins
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, final

from typing_extensions import Buffer, Self, TypeAlias, disjoint_base

# The module's own `__all__` (pyo3 lists every name it adds).
__all__ = [
    "__version__",
    "LoopCheckpoints",
    "HeddleError",
    "ConfigError",
    "ArgumentError",
    "CommError",
    "TimeoutError",
    "WorkerFailed",
    "LaunchError",
    "GraphError",
    "PlanError",
    "TaskError",
    "DataError",
    "JobAborted",
    "_error_mapping",
    "Op",
    "SUM",
    "PROD",
    "MAX",
    "MIN",
    "LAND",
    "LOR",
    "BAND",
    "BOR",
    "BXOR",
    "_decode_record",
    "Comm",
    "InPlace",
    "IN_PLACE",
    "init",
    "is_initialized",
    "abort_job_with",
    "pack_objects",
    "unpack_objects",
    "object_head",
    "parse_object_head",
    "bcast_head",
    "parse_bcast_head",
    "run_local",
    "check_setting",
    "Context",
    "Strategy",
    "Edge",
    "TaskGraph",
    "Plan",
    "Job",
    "StopHandle",
    "discover",
    "make_plan",
    "Session",
    "list_input_files",
    "DataSet",
    "OutputCommit",
    "write_parquet_part",
    "Stream",
]

__version__: Final[str]

# The exception classes of `heddle.errors` (documented there), made by this module.
class HeddleError(Exception): ...
class ConfigError(HeddleError, ValueError): ...
class ArgumentError(HeddleError, ValueError, TypeError): ...
class CommError(HeddleError): ...
class TimeoutError(CommError, builtins.TimeoutError): ...

class WorkerFailed(CommError):
    rank: int | None

class LaunchError(HeddleError): ...
class GraphError(HeddleError, ValueError): ...
class PlanError(HeddleError): ...
class TaskError(HeddleError): ...
class DataError(HeddleError): ...

class JobAborted(HeddleError):
    origin: int | None
    task: str | None
    kind: str | None

def _error_mapping() -> list[tuple[str, str, type[BaseException] | None]]:
    """``(layer, variant, class)`` for a sample of every variant of every layer's Rust
    error: the class it is raised as (``None``: the variant has no sample)."""

# Buffers (typing_extensions.Buffer): anything exporting a contiguous buffer, e.g. numpy
# arrays, bytearray, memoryview, array.array.
#: ``[buffer, counts]`` of the ``v`` collectives; counts in elements, one per rank (an alias
#: of the stub only, hence private).
_BufferSpec: TypeAlias = list[Any] | tuple[Any, Sequence[int]]

@final
class Op:
    """A reduction operator; use the module constants (``heddle.SUM``, ...)."""

    @property
    def name(self) -> str:
        """The operator's name, e.g. ``"SUM"``."""

SUM: Final[Op]
PROD: Final[Op]
MAX: Final[Op]
MIN: Final[Op]
LAND: Final[Op]
LOR: Final[Op]
BAND: Final[Op]
BOR: Final[Op]
BXOR: Final[Op]

@final
class InPlace:
    """The type of ``heddle.IN_PLACE``."""

IN_PLACE: Final[InPlace]

@disjoint_base
class Comm:
    """A group of ranks running the same program (the native base of ``heddle.Comm``)."""

    def __new__(cls, other: Comm) -> Self: ...
    @property
    def rank(self) -> int:
        """This process's rank, ``0 .. size - 1``."""
    @property
    def size(self) -> int:
        """Number of ranks."""
    @property
    def attempt(self) -> int:
        """Which attempt of the job this is: 0, then 1, 2 ... after restarts."""
    @property
    def timeout(self) -> float:
        """Seconds a blocking call waits without progress (``HEDDLE_TIMEOUT_S``)."""
    def Get_rank(self) -> int:
        """This process's rank (mpi4py spelling)."""
    def Get_size(self) -> int:
        """Number of ranks (mpi4py spelling)."""
    def Barrier(self) -> None:
        """Waits until every rank has called it."""
    def barrier(self) -> None:
        """Waits until every rank has called it."""
    def Allreduce(self, sendbuf: Buffer | InPlace, recvbuf: Buffer, op: Op | None = None) -> None:
        """Element-wise reduction of every rank's ``sendbuf`` into ``recvbuf`` everywhere;
        ``sendbuf=IN_PLACE`` reduces ``recvbuf`` in place."""
    def Reduce(
        self, sendbuf: Buffer | InPlace, recvbuf: Buffer | None, op: Op | None = None, root: int = 0
    ) -> None:
        """Element-wise reduction into ``recvbuf`` at ``root`` (``None`` elsewhere)."""
    def Reduce_scatter_block(self, sendbuf: Buffer, recvbuf: Buffer, op: Op | None = None) -> None:
        """Reduction of ``size`` equal blocks; rank i receives block i."""
    def Reduce_scatter(
        self,
        sendbuf: Buffer,
        recvbuf: Buffer,
        recvcounts: Sequence[int] | None = None,
        op: Op | None = None,
    ) -> None:
        """Reduction of ``size`` blocks of ``recvcounts[i]`` elements; rank i receives
        block i (without ``recvcounts``, each rank's block is its ``recvbuf``'s size)."""
    def Bcast(self, buf: Buffer, root: int = 0) -> None:
        """Copies ``buf`` at ``root`` into ``buf`` on every rank."""
    def Gather(self, sendbuf: Buffer | InPlace, recvbuf: Buffer | None, root: int = 0) -> None:
        """Every rank's ``sendbuf`` into ``recvbuf`` at ``root``, in rank order."""
    def Scatter(self, sendbuf: Buffer | None, recvbuf: Buffer | InPlace, root: int = 0) -> None:
        """Block i of ``sendbuf`` at ``root`` into ``recvbuf`` of rank i."""
    def Allgather(self, sendbuf: Buffer | InPlace, recvbuf: Buffer) -> None:
        """Every rank's ``sendbuf`` into ``recvbuf`` on every rank, in rank order."""
    def Alltoall(self, sendbuf: Buffer | InPlace, recvbuf: Buffer) -> None:
        """Block j of rank i's ``sendbuf`` into block i of rank j's ``recvbuf``."""
    def Gatherv(self, sendbuf: Buffer, recvbuf: _BufferSpec | None, root: int = 0) -> None:
        """Uneven gather: ``recvbuf = [buffer, counts]`` at ``root``."""
    def Allgatherv(self, sendbuf: Buffer, recvbuf: _BufferSpec) -> None:
        """Uneven allgather: ``recvbuf = [buffer, counts]``."""
    def Scatterv(self, sendbuf: _BufferSpec | None, recvbuf: Buffer, root: int = 0) -> None:
        """Uneven scatter: ``sendbuf = [buffer, counts]`` at ``root``."""
    def Alltoallv(self, sendbuf: _BufferSpec, recvbuf: _BufferSpec) -> None:
        """Uneven all-to-all: ``[buffer, counts]`` on both sides."""
    def Send(self, buf: Buffer, dest: int, tag: int = 0) -> None:
        """Sends ``buf`` to ``dest``; returns once the data has left ``buf``."""
    def Recv(self, buf: Buffer, source: int, tag: int = 0) -> int:
        """Receives into ``buf``; returns the number of elements received."""
    def Sendrecv(
        self,
        sendbuf: Buffer,
        dest: int,
        sendtag: int = 0,
        recvbuf: Buffer | None = None,
        source: int | None = None,
        recvtag: int | None = None,
    ) -> int:
        """Send and receive at once (one tag for both); returns elements received."""
    def _recv_bytes(self, source: int, tag: int = 0) -> bytes: ...
    def _split(self, color: int | None, key: int = 0) -> Comm | None: ...

def init() -> Comm:
    """Joins the job (or becomes a world of one); returns the native world communicator."""

def is_initialized() -> bool:
    """Whether ``init`` has joined the job in this process."""

# --- the framing of pickled objects (heddle.comm's lowercase calls; comm_objects.rs) -----

def pack_objects(
    pickled: Sequence[tuple[Buffer, Sequence[Buffer]]],
) -> tuple[bytearray, list[int]]:
    """Packs ``(pickle, out-of-band buffers)`` pairs into one bytearray of self-describing
    blocks; returns it and each block's size."""

def unpack_objects(
    blocks: Buffer, sizes: Sequence[int]
) -> list[tuple[memoryview, list[memoryview]]]:
    """The ``(pickle, [buffers])`` of each block, as memoryviews of ``blocks``."""

def object_head(pickle: Buffer, buffers: Sequence[Buffer]) -> bytes:
    """The head of an object sent point to point (its buffers follow it)."""

def parse_object_head(head: Buffer) -> tuple[memoryview, list[int]]:
    """The pickle of a received head and the lengths of the buffers that follow it."""

def bcast_head(pickle: Buffer, buffers: Sequence[Buffer]) -> bytearray:
    """The head a root broadcasts: the buffers' lengths, then the pickle."""

def parse_bcast_head(head: Buffer, n: int) -> tuple[memoryview, list[int]]:
    """The pickle of a received broadcast head of ``n`` buffers, and their lengths."""

def run_local(
    workers: int,
    command: list[str],
    env: list[tuple[str, str]] | None = None,
    init_timeout: float = 60.0,
    master_bind: str = "127.0.0.1:0",
    kill_grace: float = 2.0,
    restarts: int = 0,
    heartbeat_interval: float | None = None,
    heartbeat_timeout: float | None = None,
) -> int:
    """Runs ``command`` as ``workers`` local processes (``heddle run``); returns the exit code."""

def check_setting(name: str, value: str) -> None:
    """Checks ``value`` of the ``HEDDLE_*`` setting ``name`` as workers would; raises
    ``ConfigError`` naming the variable, the value and what is valid."""

# --- task graphs (heddle.task is the public API) ---------------------------------------

#: A worker as ``(rank, host, cpu, memory)`` (an alias of the stub only).
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
    def set_resources(self, v: int, cpu: float, memory: int, hosts: list[str]) -> None: ...
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
    """Every worker of ``comm`` with its host, cpu and memory share (collective)."""

def make_plan(graph: TaskGraph, workers: list[_WorkerTuple], scheduler: str) -> Plan:
    """Plans ``graph`` with the scheduler named ``round_robin``, ``first_fit`` or
    ``data_locality``."""

# --- data sets (heddle.data is the public API) -----------------------------------------

@final
class LoopCheckpoints:
    """Checkpoints of pickled loop state (see ``heddle.data.LoopCheckpoints``)."""

    def __new__(cls, session: Session, dir: str, every: int, job: str) -> Self: ...
    def resume(self) -> tuple[int, bytes] | None: ...
    def completed(self, iteration: int, state: bytes) -> bool: ...

@final
class Session:
    """The native data session (see ``heddle.data.Session``)."""

    def __new__(
        cls,
        comm: Comm,
        partitions: int | None = None,
        memory_budget: int | None = None,
        spill_dirs: list[str] | None = None,
        checkpoint_interval: float | None = None,
        checkpoint_dir: str | None = None,
        job: str | None = None,
    ) -> Self: ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def partitions(self) -> int: ...
    @property
    def stream_checkpoints(self) -> tuple[str, str, float | None] | None:
        """``(dir, job, interval in seconds or None)`` of its streams' checkpoints."""
    def range(self, start: int, end: int) -> DataSet: ...
    def from_list(self, records: Any) -> DataSet: ...
    def generate(self, n: int, f: Any) -> DataSet: ...
    def text_file(self, path: str) -> DataSet: ...
    def text_blocks(self, path: str, block_bytes: int, binary: bool = False) -> DataSet: ...
    def read_csv(self, path: str, header: bool, skip_malformed: bool = False) -> DataSet: ...
    def read_json_lines(self, path: str, skip_malformed: bool = False) -> DataSet: ...
    def read_parquet(self, path: str, columns: list[str] | None = None) -> DataSet: ...
    def skipped_rows(self) -> int: ...

@final
class DataSet:
    """The native data set (see ``heddle.data.DataSet``)."""

    def map(self, f: Any) -> DataSet: ...
    def flat_map(self, f: Any) -> DataSet: ...
    def filter(self, f: Any) -> DataSet: ...
    def key_by(self, f: Any) -> DataSet: ...
    def map_partitions(self, f: Any) -> DataSet: ...
    def union(self, other: DataSet) -> DataSet: ...
    def repartition(self) -> DataSet: ...
    def reduce_by_key(self, f: Any) -> DataSet: ...
    def aggregate_by_key(self, zero: Any, seq: Any, comb: Any) -> DataSet: ...
    def group_by_key(self) -> DataSet: ...
    def join(self, other: DataSet) -> DataSet: ...
    def left_join(self, other: DataSet) -> DataSet: ...
    def full_outer_join(self, other: DataSet) -> DataSet: ...
    def distinct(self) -> DataSet: ...
    def words(self) -> DataSet: ...
    def sort(self, key_bytes: int | None = None) -> DataSet: ...
    def value_counts(self) -> DataSet: ...
    def sort_by_key(self) -> DataSet: ...
    def cache(self) -> DataSet: ...
    def iterate(
        self,
        max: int,
        step: Any,
        done: Any,
        checkpoint_dir: str | None = None,
        checkpoint_every: int = 1,
        job: str | None = None,
    ) -> tuple[DataSet, int]: ...
    def explain(self) -> str: ...
    def collect(self) -> list[Any] | None: ...
    def collect_all(self) -> list[Any]: ...
    def count(self) -> int: ...
    def reduce(self, f: Any) -> Any: ...
    def for_each(self, f: Any) -> None: ...
    def for_each_partition(self, f: Any) -> None: ...
    def write_text(self, dir: str, mode: str = "errorifexists") -> None: ...
    def write_json_lines(self, dir: str, mode: str = "errorifexists") -> None: ...
    def write_csv(self, dir: str, mode: str = "errorifexists") -> None: ...

@final
class Stream:
    """The native stream (see ``heddle.data.Stream``)."""

    @staticmethod
    def from_list(session: Session, records: Any) -> Stream: ...
    @staticmethod
    def generate(
        session: Session, f: Any, rate: int | None = None, limit: int | None = None
    ) -> Stream: ...
    @staticmethod
    def socket_text(session: Session, addr: str) -> Stream: ...
    @staticmethod
    def follow_file(session: Session, path: str, end_marker: str | None = None) -> Stream: ...
    @staticmethod
    def text_files(session: Session, path: str, rate: float | None = None) -> Stream: ...
    @staticmethod
    def redis_stream(
        session: Session, url: str, key: str, after: str = "0", end_field: str | None = None
    ) -> Stream: ...
    def map(self, f: Any) -> Stream: ...
    def flat_map(self, f: Any) -> Stream: ...
    def map_chunks(self, max_records: int, max_delay_ms: int, f: Any) -> Stream: ...
    def filter(self, f: Any) -> Stream: ...
    def key_by(self, f: Any) -> Stream: ...
    def union(self, other: Stream) -> Stream: ...
    def map_with_state(self, f: Any) -> Stream: ...
    def window(
        self,
        kind: str,
        size: int,
        slide: int,
        event: tuple[int, int] | None,
        reduce: Any,
        event_time: Any | None = None,
    ) -> Stream: ...
    def late_records(self) -> int: ...
    def run(
        self,
        f: Any | None = None,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None: ...
    def write_lines(
        self,
        dir: str,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
        mode: str = "errorifexists",
    ) -> None: ...
    def write_parts(
        self,
        dir: str,
        f: Any,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
        mode: str = "errorifexists",
    ) -> None: ...
    def write_socket(
        self,
        addr: str,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None: ...
    def write_redis(
        self,
        url: str,
        key: str,
        stop: StopHandle | None = None,
        timeout: float | None = None,
        max_records: int | None = None,
    ) -> None: ...

def list_input_files(path: str) -> list[str]:
    """The files a path names (a file, a directory's files, a glob's matches), sorted."""

@final
class OutputCommit:
    """Commits the part files of one write of a data set (see ``DataSet.write_parquet``)."""

    def __new__(
        cls, session: Session, directory: str, mode: str = "errorifexists", suffix: str = ""
    ) -> Self: ...
    def temp_path(self, index: int) -> str: ...
    def finish(self, written: list[int], failed: bool) -> None: ...

def write_parquet_part(records: Iterable[Any], path: str, partition: int) -> None:
    """Writes the records of partition ``partition`` as the Parquet file ``path``, the
    column types inferred as ``pyarrow.Table.from_pylist`` infers them; raises ``DataError``
    naming the record, column and type of a value that does not fit (no file is made)."""

def abort_job_with(kind: str, message: str, task: str | None = None) -> bool: ...
def _decode_record(data: bytes, key: bool = False) -> Any: ...
