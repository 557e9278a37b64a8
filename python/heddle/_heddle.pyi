"""Type stubs of the native core ``heddle._heddle`` (crates/heddle-python).

Use the public names from ``heddle`` / ``heddle.comm``; this module is their implementation.
"""

from typing import Any, Dict, Final, List, Optional, Sequence, Tuple, Union, final

from typing_extensions import Buffer as _Buffer

__version__: Final[str]

#: Anything exporting a contiguous buffer: numpy arrays, bytearray, memoryview, array.array.
Buffer = _Buffer
#: ``[buffer, counts]`` of the ``v`` collectives; counts in elements, one per rank.
BufferSpec = Union[List[Any], Tuple[Any, Sequence[int]]]

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

class Comm:
    """A group of ranks running the same program (the native base of ``heddle.Comm``)."""

    def __new__(cls, other: "Comm") -> "Comm": ...
    @property
    def rank(self) -> int:
        """This process's rank, ``0 .. size - 1``."""
    @property
    def size(self) -> int:
        """Number of ranks."""
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
    def Allreduce(self, sendbuf: Union[Buffer, InPlace], recvbuf: Buffer, op: Optional[Op] = None) -> None:
        """Element-wise reduction of every rank's ``sendbuf`` into ``recvbuf`` everywhere;
        ``sendbuf=IN_PLACE`` reduces ``recvbuf`` in place."""
    def Reduce(self, sendbuf: Union[Buffer, InPlace], recvbuf: Optional[Buffer], op: Optional[Op] = None, root: int = 0) -> None:
        """Element-wise reduction into ``recvbuf`` at ``root`` (``None`` elsewhere)."""
    def Reduce_scatter_block(self, sendbuf: Buffer, recvbuf: Buffer, op: Optional[Op] = None) -> None:
        """Reduction of ``size`` equal blocks; rank i receives block i."""
    def Bcast(self, buf: Buffer, root: int = 0) -> None:
        """Copies ``buf`` at ``root`` into ``buf`` on every rank."""
    def Gather(self, sendbuf: Union[Buffer, InPlace], recvbuf: Optional[Buffer], root: int = 0) -> None:
        """Every rank's ``sendbuf`` into ``recvbuf`` at ``root``, in rank order."""
    def Scatter(self, sendbuf: Optional[Buffer], recvbuf: Union[Buffer, InPlace], root: int = 0) -> None:
        """Block i of ``sendbuf`` at ``root`` into ``recvbuf`` of rank i."""
    def Allgather(self, sendbuf: Union[Buffer, InPlace], recvbuf: Buffer) -> None:
        """Every rank's ``sendbuf`` into ``recvbuf`` on every rank, in rank order."""
    def Alltoall(self, sendbuf: Union[Buffer, InPlace], recvbuf: Buffer) -> None:
        """Block j of rank i's ``sendbuf`` into block i of rank j's ``recvbuf``."""
    def Gatherv(self, sendbuf: Buffer, recvbuf: Optional[BufferSpec], root: int = 0) -> None:
        """Uneven gather: ``recvbuf = [buffer, counts]`` at ``root``."""
    def Allgatherv(self, sendbuf: Buffer, recvbuf: BufferSpec) -> None:
        """Uneven allgather: ``recvbuf = [buffer, counts]``."""
    def Scatterv(self, sendbuf: Optional[BufferSpec], recvbuf: Buffer, root: int = 0) -> None:
        """Uneven scatter: ``sendbuf = [buffer, counts]`` at ``root``."""
    def Alltoallv(self, sendbuf: BufferSpec, recvbuf: BufferSpec) -> None:
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
        recvbuf: Optional[Buffer] = None,
        source: Optional[int] = None,
        recvtag: Optional[int] = None,
    ) -> int:
        """Send and receive at once (one tag for both); returns elements received."""
    def _recv_bytes(self, source: int, tag: int = 0) -> bytes: ...
    def _split(self, color: Optional[int], key: int = 0) -> Optional["Comm"]: ...

def init() -> Comm:
    """Joins the job (or becomes a world of one); returns the native world communicator."""

def is_initialized() -> bool:
    """Whether ``init`` has joined the job in this process."""

def run_local(
    workers: int,
    command: List[str],
    env: Optional[List[Tuple[str, str]]] = None,
    init_timeout: float = 60.0,
    master_bind: str = "127.0.0.1:0",
    kill_grace: float = 2.0,
) -> int:
    """Runs ``command`` as ``workers`` local processes (``heddle run``); returns the exit code."""

# --- task graphs (heddle.task is the public API) ---------------------------------------

#: A worker as ``(rank, host, cpu, memory)``.
WorkerTuple = Tuple[int, str, float, int]

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
    def iteration(self) -> Tuple[int, ...]:
        """The iteration counters, outermost first (empty outside iterations)."""
    @property
    def strategy(self) -> Any:
        """The current ``heddle.task.Strategy``."""
    def set_strategy(self, strategy: Any) -> None:
        """Changes when the task runs from now on."""
    def comm(self) -> Any:
        """The vertex's communicator (a ``heddle.Comm``); vertices marked collective only."""

@final
class TaskGraph:
    """The description of a graph of Python tasks (see ``heddle.task.TaskGraph``)."""

    def __init__(self) -> None: ...
    def add_vertex(self, name: str, source: bool, parallelism: int, factory: Any) -> int: ...
    def connect(self, from_: int, to: int, kind: str, func: Optional[Any] = None) -> None: ...
    def set_strategy(self, v: int, on_data: bool, period_ms: Optional[float] = None, max_runs: Optional[int] = None) -> None: ...
    def get_strategy(self, v: int) -> Tuple[bool, Optional[float], Optional[int]]: ...
    def set_resources(self, v: int, cpu: float, memory: int, hosts: List[str]) -> None: ...
    def set_collective(self, v: int) -> None: ...
    def validate(self) -> None: ...

@final
class Plan:
    """Where every task instance runs (see ``heddle.task.Plan``)."""

    @property
    def workers(self) -> List[List[int]]: ...
    @property
    def first_task(self) -> List[int]: ...
    @property
    def vertices(self) -> List[Tuple[str, str, int]]: ...
    @property
    def edges(self) -> List[Tuple[int, int, str, bool]]: ...
    @property
    def world(self) -> List[WorkerTuple]: ...

@final
class StopHandle:
    """Ends a streaming job or a stream run."""

    def __init__(self) -> None:
        """A handle not stopped yet."""
    def stop(self) -> None:
        """Asks the job to end: its sources end their output and the job drains."""

@final
class Job:
    """This worker's task instances of a plan (see ``heddle.task.Job``)."""

    def __init__(
        self, comm: Comm, graph: TaskGraph, plan: Plan, streaming: bool = False, budget_bytes: Optional[int] = None, batch_bytes: Optional[int] = None
    ) -> None: ...
    def run(self) -> Dict[str, Any]: ...
    def iterate(self, counts: List[int]) -> None: ...
    def one_pass(self, iteration: List[int]) -> None: ...
    def close(self) -> Dict[str, Any]: ...
    def stop_handle(self) -> StopHandle: ...
    @property
    def plan(self) -> Plan: ...
    @property
    def mode(self) -> str: ...
    @property
    def rank(self) -> int: ...

def discover(comm: Comm) -> List[WorkerTuple]:
    """Every worker of ``comm`` with its host, cpu and memory share (collective)."""

def make_plan(graph: TaskGraph, workers: List[WorkerTuple], scheduler: str) -> Plan:
    """Plans ``graph`` with the scheduler named ``round_robin``, ``first_fit`` or ``data_locality``."""

# --- data sets (heddle.data is the public API) -----------------------------------------

@final
class Session:
    """The native data session (see ``heddle.data.Session``)."""

    def __init__(self, comm: Comm, partitions: Optional[int] = None, memory_budget: Optional[int] = None, spill_dirs: Optional[List[str]] = None) -> None: ...
    @property
    def rank(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def partitions(self) -> int: ...
    def range(self, start: int, end: int) -> "DataSet": ...
    def from_list(self, records: Any) -> "DataSet": ...
    def generate(self, n: int, f: Any) -> "DataSet": ...
    def text_file(self, path: str) -> "DataSet": ...
    def text_blocks(self, path: str, block_bytes: int, binary: bool = False) -> "DataSet": ...
    def read_csv(self, path: str, header: bool, skip_malformed: bool = False) -> "DataSet": ...
    def read_json_lines(self, path: str, skip_malformed: bool = False) -> "DataSet": ...
    def skipped_rows(self) -> int: ...

@final
class DataSet:
    """The native data set (see ``heddle.data.DataSet``)."""

    def map(self, f: Any) -> "DataSet": ...
    def flat_map(self, f: Any) -> "DataSet": ...
    def filter(self, f: Any) -> "DataSet": ...
    def key_by(self, f: Any) -> "DataSet": ...
    def map_partitions(self, f: Any) -> "DataSet": ...
    def union(self, other: "DataSet") -> "DataSet": ...
    def repartition(self) -> "DataSet": ...
    def reduce_by_key(self, f: Any) -> "DataSet": ...
    def aggregate_by_key(self, zero: Any, seq: Any, comb: Any) -> "DataSet": ...
    def group_by_key(self) -> "DataSet": ...
    def join(self, other: "DataSet") -> "DataSet": ...
    def left_join(self, other: "DataSet") -> "DataSet": ...
    def full_outer_join(self, other: "DataSet") -> "DataSet": ...
    def distinct(self) -> "DataSet": ...
    def words(self) -> "DataSet": ...
    def sort(self, key_bytes: Optional[int] = None) -> "DataSet": ...
    def value_counts(self) -> "DataSet": ...
    def sort_by_key(self) -> "DataSet": ...
    def cache(self) -> "DataSet": ...
    def iterate(self, max: int, step: Any, done: Any) -> Tuple["DataSet", int]: ...
    def explain(self) -> str: ...
    def collect(self) -> Optional[List[Any]]: ...
    def collect_all(self) -> List[Any]: ...
    def count(self) -> int: ...
    def reduce(self, f: Any) -> Any: ...
    def for_each(self, f: Any) -> None: ...
    def for_each_partition(self, f: Any) -> None: ...
    def write_text(self, dir: str, mode: str = ...) -> None: ...
    def write_json_lines(self, dir: str, mode: str = ...) -> None: ...
    def write_csv(self, dir: str, mode: str = ...) -> None: ...

@final
class Stream:
    """The native stream (see ``heddle.data.Stream``)."""

    @staticmethod
    def from_list(session: Session, records: Any) -> "Stream": ...
    @staticmethod
    def generate(session: Session, f: Any, rate: Optional[int] = None, limit: Optional[int] = None) -> "Stream": ...
    @staticmethod
    def socket_text(session: Session, addr: str) -> "Stream": ...
    @staticmethod
    def follow_file(session: Session, path: str, end_marker: Optional[str] = None) -> "Stream": ...
    @staticmethod
    def redis_stream(session: Session, url: str, key: str, after: str = "0", end_field: Optional[str] = None) -> "Stream": ...
    def map(self, f: Any) -> "Stream": ...
    def flat_map(self, f: Any) -> "Stream": ...
    def map_chunks(self, max_records: int, max_delay_ms: int, f: Any) -> "Stream": ...
    def filter(self, f: Any) -> "Stream": ...
    def key_by(self, f: Any) -> "Stream": ...
    def union(self, other: "Stream") -> "Stream": ...
    def window(self, kind: str, size: int, slide: int, event: Optional[Tuple[int, int]], reduce: Any, event_time: Optional[Any] = None) -> "Stream": ...
    def late_records(self) -> int: ...
    def run(self, f: Optional[Any] = None, stop: Optional[StopHandle] = None, timeout: Optional[float] = None, max_records: Optional[int] = None) -> None: ...
    def write_lines(self, dir: str, stop: Optional[StopHandle] = None, timeout: Optional[float] = None, max_records: Optional[int] = None, mode: str = "errorifexists") -> None: ...
    def write_socket(self, addr: str, stop: Optional[StopHandle] = None, timeout: Optional[float] = None, max_records: Optional[int] = None) -> None: ...
    def write_redis(self, url: str, key: str, stop: Optional[StopHandle] = None, timeout: Optional[float] = None, max_records: Optional[int] = None) -> None: ...

def list_input_files(path: str) -> List[str]:
    """The files a path names (a file, a directory's files, a glob's matches), sorted."""

class OutputCommit:
    def __init__(self, session: Session, directory: str, mode: str = ..., suffix: str = ...) -> None: ...
    def temp_path(self, index: int) -> str: ...
    def finish(self, written: List[int], failed: bool) -> None: ...

def abort_job_with(kind: str, message: str, task: Optional[str] = ...) -> bool: ...
def _decode_record(data: bytes, key: bool = ...) -> Any: ...
