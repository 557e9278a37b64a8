"""Type stubs of the native core ``heddle._heddle`` (crates/heddle-python).

Use the public names from ``heddle`` / ``heddle.comm``; this module is their implementation.
"""

from typing import Any, Final, List, Optional, Sequence, Tuple, Union, final

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
