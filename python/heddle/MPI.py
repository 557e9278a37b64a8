"""heddle.MPI: mpi4py's ``MPI`` module on Heddle's transports and collective algorithms.

Programs written for mpi4py run unchanged::

    from heddle import MPI          # or, under `heddle run --mpi4py`: from mpi4py import MPI

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    if rank == 0:
        data = {"a": 7, "b": 3.14}
        comm.send(data, dest=1, tag=11)
    elif rank == 1:
        data = comm.recv(source=0, tag=11)

Importing the module joins the job (as mpi4py initializes MPI on import): under
``heddle run -n N`` it waits for the N workers; a process started alone is a world of one.

Covered: ``COMM_WORLD``/``COMM_SELF``/``COMM_NULL``; point-to-point in both cases,
blocking and non-blocking, with ``ANY_SOURCE``/``ANY_TAG``, ``Status`` and ``Request``
(``Wait``/``Test`` and their ``all``/``any``/``some`` forms), persistent requests
(``Send_init``/``Recv_init``); the blocking collectives with
their ``v`` forms, ``Reduce_scatter(_block)``, ``Scan``, ``Exscan``; the predefined
datatypes with ``Create_contiguous``/``Create_vector`` and buffer specifications
``[buf, TYPE]``, ``[buf, count, TYPE]``, ``[buf, (counts, displs), TYPE]``; the predefined
operators with ``MAXLOC``/``MINLOC`` and ``Op.Create``; groups; ``Dup``, ``Split``,
``Split_type``, ``Create``, ``Compare``, ``Free``; the non-blocking collectives
(``Ibarrier`` … ``Ialltoallv``, ``Iscan``, ``Ireduce_scatter``). Calls Heddle does not
offer (one-sided windows, files, dynamic processes, topologies, matched probes) raise
``NotImplementedError`` naming the call. ``docs/mpi4py.md`` lists coverage call by call.
"""

from __future__ import annotations

import socket
import time
from typing import Any, NoReturn

from heddle._heddle.comm import (
    IN_PLACE as IN_PLACE,
)
from heddle._mpi.comm import (
    APPNUM as APPNUM,
    COMM_NULL as COMM_NULL,
    COMM_SELF as COMM_SELF,
    COMM_TYPE_HW_GUIDED as COMM_TYPE_HW_GUIDED,
    COMM_TYPE_HW_UNGUIDED as COMM_TYPE_HW_UNGUIDED,
    COMM_TYPE_RESOURCE_GUIDED as COMM_TYPE_RESOURCE_GUIDED,
    COMM_TYPE_SHARED as COMM_TYPE_SHARED,
    COMM_WORLD as COMM_WORLD,
    HOST as HOST,
    IO as IO,
    LASTUSEDCODE as LASTUSEDCODE,
    TAG_UB as TAG_UB,
    UNIVERSE_SIZE as UNIVERSE_SIZE,
    WTIME_IS_GLOBAL as WTIME_IS_GLOBAL,
    Comm as Comm,
    Intracomm as Intracomm,
    Unsupported,
    attach_world,
)
from heddle._mpi.datatypes import *  # noqa: F403 - the predefined datatypes
from heddle._mpi.datatypes import (
    Datatype as Datatype,
)
from heddle._mpi.errors import *  # noqa: F403 - the error classes
from heddle._mpi.errors import (
    Exception as Exception,
    Get_error_class as Get_error_class,
    Get_error_string as Get_error_string,
)
from heddle._mpi.group import (
    CONGRUENT as CONGRUENT,
    GROUP_EMPTY as GROUP_EMPTY,
    GROUP_NULL as GROUP_NULL,
    IDENT as IDENT,
    SIMILAR as SIMILAR,
    UNEQUAL as UNEQUAL,
    Group as Group,
)
from heddle._mpi.ops import (
    BAND as BAND,
    BOR as BOR,
    BXOR as BXOR,
    LAND as LAND,
    LOR as LOR,
    LXOR as LXOR,
    MAX as MAX,
    MAXLOC as MAXLOC,
    MIN as MIN,
    MINLOC as MINLOC,
    NO_OP as NO_OP,
    OP_NULL as OP_NULL,
    PROD as PROD,
    REPLACE as REPLACE,
    SUM as SUM,
    Op as Op,
)
from heddle._mpi.request import (
    ANY_SOURCE as ANY_SOURCE,
    ANY_TAG as ANY_TAG,
    PROC_NULL as PROC_NULL,
    REQUEST_NULL as REQUEST_NULL,
    UNDEFINED as UNDEFINED,
    Prequest as Prequest,
    Request as Request,
    Status as Status,
)

ROOT = -4
VERSION = 3
SUBVERSION = 1
MAX_PROCESSOR_NAME = 256
MAX_ERROR_STRING = 256
MAX_LIBRARY_VERSION_STRING = 256
THREAD_SINGLE = 0
THREAD_FUNNELED = 1
THREAD_SERIALIZED = 2
THREAD_MULTIPLE = 3
INFO_NULL: Any = None
ERRORS_RETURN: Any = None
ERRORS_ARE_FATAL: Any = None


class _Bottom:
    """``MPI.BOTTOM``: absolute addresses, which Heddle's buffers do not use."""

    def __repr__(self) -> str:
        return "BOTTOM"


BOTTOM = _Bottom()

_state = {"initialized": False, "finalized": False}
_started = time.perf_counter()


def Init() -> None:
    """Joins the job (already done on import)."""
    if not _state["initialized"]:
        attach_world()
        _state["initialized"] = True


def Init_thread(required: int = THREAD_MULTIPLE) -> int:
    """As ``Init``; every Heddle call may come from any thread."""
    Init()
    return THREAD_MULTIPLE


def Finalize() -> None:
    """Marks the end of MPI use; the worker leaves the job when the process exits."""
    _state["finalized"] = True


def Is_initialized() -> bool:
    return _state["initialized"]


def Is_finalized() -> bool:
    return _state["finalized"]


def Query_thread() -> int:
    return THREAD_MULTIPLE


def Is_thread_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def Get_version() -> tuple[int, int]:
    """The MPI standard version the API follows."""
    return VERSION, SUBVERSION


def Get_library_version() -> str:
    from heddle import __version__

    return f"Heddle {__version__} (heddle.MPI, mpi4py-compatible)"


def Get_processor_name() -> str:
    return socket.gethostname()


def Wtime() -> float:
    """Seconds since an arbitrary point in the past (monotonic, per process)."""
    return time.perf_counter() - _started


def Wtick() -> float:
    return time.get_clock_info("perf_counter").resolution


def Pcontrol(level: int) -> None:
    """Profiling control: accepted and ignored."""


def Abort(errorcode: int = 0) -> NoReturn:
    COMM_WORLD.Abort(errorcode)


def __getattr__(name: str) -> Any:
    raise Unsupported(f"heddle.MPI does not support MPI.{name} (see docs/mpi4py.md)")


Init()
