"""Type stubs of ``heddle._heddle.comm``: the native communicator, the reduction
operators and the framing of pickled objects (``heddle.comm`` is the public API)."""

from collections.abc import Sequence
from typing import Any, Final, final

from typing_extensions import Buffer, Self, TypeAlias, disjoint_base

__all__ = [
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
    "Request",
    "isend",
    "irecv",
    "irecv_bytes",
    "probe",
    "waitall",
    "waitany",
    "world_ranks",
    "self_comm",
    "shadow_comm",
]

# Buffers (typing_extensions.Buffer): anything exporting a contiguous buffer, e.g. numpy
# arrays, bytearray, memoryview, array.array.
#: ``[buffer, counts]``, ``[buffer, (counts, displs)]`` or ``[buffer, counts, displs]`` of
#: the ``v`` collectives; counts and displacements in elements, one per rank (an alias of
#: the stub only, hence private).
_BufferSpec: TypeAlias = (
    list[Any]
    | tuple[Any, Sequence[int]]
    | tuple[Any, tuple[Sequence[int], Sequence[int]]]
    | tuple[Any, Sequence[int], Sequence[int]]
)

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
    def hosts(self) -> list[int]:
        """The host of each world rank: equal numbers mean the same host (shared memory
        between them)."""
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
    def Scan(self, sendbuf: Buffer | InPlace, recvbuf: Buffer, op: Op | None = None) -> None:
        """Inclusive prefix reduction: rank r's ``recvbuf`` gets ranks 0..r combined."""
    def Exscan(self, sendbuf: Buffer | InPlace, recvbuf: Buffer, op: Op | None = None) -> None:
        """Exclusive prefix reduction: rank r's ``recvbuf`` gets ranks 0..r-1 combined
        (rank 0's is left holding its ``sendbuf``)."""
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
        """Uneven gather: ``recvbuf = [buffer, counts]`` (or with displacements) at ``root``."""
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

def abort_job_with(kind: str, message: str, task: str | None = None) -> bool: ...

# --- non-blocking point-to-point (heddle.MPI's requests; comm_requests.rs) ----------------

_Status: TypeAlias = tuple[int, int, int]

@final
class Request:
    """A non-blocking send or receive under way; holds its buffer until dropped."""

    def wait(self) -> _Status | None:
        """Blocks until finished; ``(source, tag, bytes)`` for a receive, else ``None``."""
    def test(self) -> bool:
        """Moves the links once; whether it has finished."""
    @property
    def done(self) -> bool: ...
    def status(self) -> _Status | None: ...
    def cancel(self) -> bool:
        """Cancels a receive no message has started to match; whether it did."""
    @property
    def cancelled(self) -> bool: ...
    def take_bytes(self) -> bytearray | None:
        """The message of a finished ``irecv_bytes`` (once)."""
    def release(self) -> None:
        """Releases the buffer of a finished request."""

# ``buf``: any object with the buffer protocol (numpy arrays included, which the type
# checker does not see as ``Buffer``).
def isend(comm: Comm, buf: Any, dest: int, tag: int = 0, sync: bool = False) -> Request:
    """Starts sending ``buf`` to ``dest`` (``sync``: finished once a receive matched it)."""

def irecv(comm: Comm, buf: Any, source: int | None = None, tag: int | None = None) -> Request:
    """Starts receiving into ``buf`` (``None``: any source or tag)."""

def irecv_bytes(comm: Comm, source: int | None = None, tag: int | None = None) -> Request:
    """Starts receiving a message of any length."""

def probe(
    comm: Comm, source: int | None = None, tag: int | None = None, block: bool = True
) -> _Status | None:
    """``(source, tag, bytes)`` of the next matching message, without receiving it."""

def waitall(reqs: list[Request]) -> list[_Status | None]:
    """Waits for every request."""

def waitany(reqs: list[Request]) -> int | None:
    """Waits for one unfinished request; its index (``None``: all had finished)."""

def world_ranks(comm: Comm) -> list[int]:
    """The world ranks of the members, in rank order."""

def self_comm(comm: Comm) -> Comm:
    """A communicator of this process alone, made without communicating."""

def shadow_comm(comm: Comm) -> Comm:
    """The same ranks in a context of their own, made without communicating."""
