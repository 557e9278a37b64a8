"""mpi4py's communicators for ``heddle.MPI``: ``Comm`` and ``Intracomm`` around a native
``heddle.comm.Comm``, with the structure calls (ranks, groups, ``Dup``, ``Split``,
``Split_type``, ``Create``, ``Compare``, ``Free``); point-to-point and collective calls
come from the ``p2p`` and ``collectives`` mixins. ``COMM_NULL`` holds no native
communicator: every call on it raises ``MPI.Exception(ERR_COMM)``.
"""

from __future__ import annotations

from typing import Any, NoReturn

from heddle import comm as _heddle_comm
from heddle._heddle import comm as _native
from heddle._mpi.collectives import Collectives
from heddle._mpi.errors import ERR_ARG, ERR_COMM, Exception, mpi_errors
from heddle._mpi.group import CONGRUENT, IDENT, SIMILAR, UNEQUAL, Group
from heddle._mpi.nonblocking import NonBlocking
from heddle._mpi.p2p import PointToPoint
from heddle._mpi.request import UNDEFINED

COMM_TYPE_SHARED = 0
COMM_TYPE_HW_UNGUIDED = 1
COMM_TYPE_HW_GUIDED = 2
COMM_TYPE_RESOURCE_GUIDED = 3

# Attribute keys (Open MPI's values).
TAG_UB = 0
HOST = 1
IO = 2
WTIME_IS_GLOBAL = 3
APPNUM = 4
LASTUSEDCODE = 5
UNIVERSE_SIZE = 6

#: Heddle's tags are 32-bit unsigned; MPI's attribute reports the signed bound.
_TAG_UB = 2**31 - 1

#: mpi4py calls Heddle does not offer: intercommunicators, process topologies, dynamic
#: processes, one-sided windows and files.
UNSUPPORTED = frozenset(
    {
        "Create_intercomm",
        "Create_cart",
        "Create_graph",
        "Create_dist_graph",
        "Create_dist_graph_adjacent",
        "Spawn",
        "Spawn_multiple",
        "Accept",
        "Connect",
        "Join",
        "Get_parent",
        "Disconnect",
        "Mprobe",
        "Improbe",
        "mprobe",
        "improbe",
        "Neighbor_allgather",
        "Neighbor_alltoall",
        "Create_group",
    }
)


class Unsupported(NotImplementedError, AttributeError):
    """An mpi4py call Heddle does not offer (see docs/mpi4py.md)."""


class Comm(PointToPoint, Collectives, NonBlocking):
    """A communicator (mpi4py's ``Comm``)."""

    _native_comm: Any
    _name: str

    def __init__(self, comm: Comm | None = None, *, native: Any = None, name: str = "") -> None:
        if comm is not None:
            native, name = comm._native_comm, comm._name
        self._native_comm = native
        self._name = name

    @property
    def _c(self) -> Any:
        c = self._native_comm
        if c is None:
            raise Exception(ERR_COMM, "the communicator is COMM_NULL (freed, or not a member)")
        return c

    def __getattr__(self, name: str) -> NoReturn:
        if name in UNSUPPORTED:
            raise Unsupported(f"heddle.MPI does not support Comm.{name} (see docs/mpi4py.md)")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __bool__(self) -> bool:
        return self._native_comm is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Comm):
            return NotImplemented
        return self._native_comm is other._native_comm

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        if self._native_comm is None:
            return "<heddle.MPI.Comm COMM_NULL>"
        return f"<heddle.MPI.{type(self).__name__} {self._name or ''} rank {self.rank}/{self.size}>"

    # -- who is here ----------------------------------------------------------------------

    def Get_rank(self) -> int:
        return int(self._c.rank)

    def Get_size(self) -> int:
        return int(self._c.size)

    rank = property(Get_rank)
    size = property(Get_size)

    def Get_group(self) -> Group:
        members = _native.world_ranks(self._c)
        return Group(members=members, me=members[self._c.rank])

    group = property(Get_group)

    def Get_name(self) -> str:
        return self._name

    def Set_name(self, name: str) -> None:
        self._name = name

    name = property(Get_name, Set_name)

    def Is_inter(self) -> bool:
        return False

    def Is_intra(self) -> bool:
        return True

    is_inter = property(Is_inter)
    is_intra = property(Is_intra)

    def Get_topology(self) -> int:
        return UNDEFINED

    topology = property(Get_topology)

    def Get_attr(self, keyval: int) -> Any:
        """``TAG_UB``, ``UNIVERSE_SIZE``, ``APPNUM``, ``WTIME_IS_GLOBAL`` or ``IO``."""
        return {
            TAG_UB: _TAG_UB,
            UNIVERSE_SIZE: len(self._c.hosts),
            APPNUM: 0,
            WTIME_IS_GLOBAL: False,
            IO: self._c.rank,
        }.get(keyval)

    def Compare(self, comm: Comm) -> int:
        """``IDENT`` (the same communicator), ``CONGRUENT`` (same members in the same
        order), ``SIMILAR`` (same members) or ``UNEQUAL``."""
        if self == comm:
            return IDENT
        mine, theirs = _native.world_ranks(self._c), _native.world_ranks(comm._c)
        if mine == theirs:
            return CONGRUENT
        return SIMILAR if sorted(mine) == sorted(theirs) else UNEQUAL

    # -- new communicators (collective over this one) ------------------------------------

    def _sub(self, native: Any, name: str = "") -> Intracomm:
        return COMM_NULL if native is None else Intracomm(native=native, name=name)

    @mpi_errors
    def Dup(self, info: Any = None) -> Intracomm:
        """A communicator with the same members in a context of its own."""
        return self._sub(self._c.split(0, self._c.rank), self._name)

    Clone = Dup
    Idup = Dup

    @mpi_errors
    def Split(self, color: int = 0, key: int = 0) -> Intracomm:
        """Ranks with the same ``color`` form one communicator, ordered by ``key`` then
        rank; ``color=UNDEFINED`` gives ``COMM_NULL``."""
        return self._sub(self._c.split(None if color == UNDEFINED else color, key))

    @mpi_errors
    def Split_type(self, split_type: int, key: int = 0, info: Any = None) -> Intracomm:
        """``COMM_TYPE_SHARED`` (and the hardware types): one communicator per host."""
        if split_type == UNDEFINED:
            return self._sub(self._c.split(None, key))
        if split_type not in (
            COMM_TYPE_SHARED,
            COMM_TYPE_HW_GUIDED,
            COMM_TYPE_HW_UNGUIDED,
            COMM_TYPE_RESOURCE_GUIDED,
        ):
            raise Exception(ERR_ARG, f"Split_type: unknown split type {split_type}")
        world = _native.world_ranks(self._c)[self._c.rank]
        return self._sub(self._c.split(int(self._c.hosts[world]), key))

    @mpi_errors
    def Create(self, group: Group) -> Intracomm:
        """A communicator of ``group``'s members in its order (``COMM_NULL`` elsewhere);
        every rank of this communicator calls it with the same group."""
        me = _native.world_ranks(self._c)[self._c.rank]
        members = list(group._members)
        if me not in members:
            return self._sub(self._c.split(None, 0))
        return self._sub(self._c.split(0, members.index(me)))

    def Free(self) -> None:
        """Lets go of this communicator; it becomes ``COMM_NULL``."""
        if self is COMM_WORLD or self is COMM_SELF:
            raise Exception(ERR_COMM, "cannot free COMM_WORLD or COMM_SELF")
        self._native_comm = None

    def Abort(self, errorcode: int = 0) -> NoReturn:
        """Ends the whole job with ``errorcode``, as ``heddle run`` reports it."""
        self._c.Abort(errorcode)
        raise SystemExit(errorcode)  # not reached: Abort ends the process


class Intracomm(Comm):
    """A communicator within one group of processes (mpi4py's ``Intracomm``)."""


COMM_NULL = Intracomm()
COMM_WORLD = Intracomm()
COMM_SELF = Intracomm()


def attach_world() -> None:
    """Joins the job (``heddle.init()``) and fills ``COMM_WORLD`` and ``COMM_SELF``."""
    world = _heddle_comm.init()
    COMM_WORLD._native_comm, COMM_WORLD._name = world, "MPI_COMM_WORLD"
    COMM_SELF._native_comm = _heddle_comm.Comm(_native.self_comm(world))
    COMM_SELF._name = "MPI_COMM_SELF"
