"""heddle.futures: many small Python functions as futures over a job's workers, as
``mpi4py.futures`` (and ``concurrent.futures``) offer them.

Every rank runs the program (SPMD); inside ``CommExecutor`` the root gets an executor and
the other ranks serve its tasks until the root leaves the block::

    from heddle.futures import CommExecutor

    def square(x):
        return x * x

    with CommExecutor(root=0) as executor:      # collective over the world
        if executor is not None:                # the root
            print(sum(executor.map(square, range(1000), chunksize=50)))

Or only the root runs the script and the other ranks serve (mpi4py's
``python -m mpi4py.futures``)::

    heddle run -n 3 -- python -m heddle.futures script.py
    # script.py:  with PoolExecutor() as ex: print(list(ex.map(square, range(10))))

The executors are ``concurrent.futures.Executor``s: ``submit``, ``map`` (with
``chunksize``), ``starmap``, ``shutdown``; their futures work with
``concurrent.futures.wait`` and ``as_completed``. A future passed as an argument of
``submit`` is replaced by its result before the task runs. An exception raised by a task is
raised again by ``result()`` on the root, with the worker's traceback as its ``__cause__``.
Results cross as pickle protocol 5 with large buffers out of band: a numpy array arrives as
a view of the received bytes, not a copy. Functions and arguments must be picklable, and
functions defined in the script must be at its top level (the workers import them).
"""

from __future__ import annotations

import concurrent.futures
import itertools
from concurrent.futures import (
    ALL_COMPLETED,
    FIRST_COMPLETED,
    FIRST_EXCEPTION,
    Future,
    as_completed as as_completed,
    wait as wait,
)
from typing import Any

from heddle.comm import Comm, init
from heddle.futures._executor import BrokenExecutor, CommPoolExecutor, RemoteTraceback
from heddle.futures._worker import RESULT_BASE, serve

__all__ = [
    "CommExecutor",
    "PoolExecutor",
    "MPICommExecutor",
    "MPIPoolExecutor",
    "BrokenExecutor",
    "RemoteTraceback",
    "Future",
    "wait",
    "as_completed",
    "ALL_COMPLETED",
    "FIRST_COMPLETED",
    "FIRST_EXCEPTION",
]

#: Result tags of the executors made in this process.
_tags = itertools.count(RESULT_BASE)


def _native_comm(comm: Any) -> Comm:
    """A ``heddle.comm.Comm`` from one, or from a ``heddle.MPI`` communicator."""
    if comm is None:
        return init()
    inner = getattr(comm, "_native_comm", comm)
    if not isinstance(inner, Comm):
        raise TypeError(f"comm must be a heddle or heddle.MPI communicator, not {comm!r}")
    return inner


class CommExecutor:
    """A context manager over ``comm`` (default: the world), collective: on ``root`` it
    gives an executor whose tasks run on the other ranks; on those it serves tasks until
    the root leaves its block, then gives ``None`` (mpi4py's ``MPICommExecutor``). With a
    single rank the tasks run in a thread of the root."""

    def __init__(self, comm: Any = None, root: int = 0, **kwargs: Any) -> None:
        self._comm = _native_comm(comm)
        if not 0 <= root < self._comm.size:
            raise ValueError(f"root {root} is not a rank of a communicator of {self._comm.size}")
        self._root = root
        self._executor: concurrent.futures.Executor | None = None

    def __enter__(self) -> concurrent.futures.Executor | None:
        comm = self._comm
        if comm.size == 1:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)
            return self._executor
        private = comm.split(0, comm.rank)  # the executor's own message context
        assert private is not None
        if comm.rank != self._root:
            serve(private, self._root)
            return None
        self._executor = CommPoolExecutor(private, self._root, RESULT_BASE, stop_workers=True)
        return self._executor

    def __exit__(self, *exc: object) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)


#: Set by ``python -m heddle.futures``: the communicator whose other ranks serve tasks.
_server_comm: Comm | None = None


class PoolExecutor(CommPoolExecutor):
    """An executor over the ranks that serve tasks under ``python -m heddle.futures``
    (mpi4py's ``MPIPoolExecutor``); several may exist in turn or at once."""

    def __init__(self, max_workers: int | None = None, **kwargs: Any) -> None:
        if _server_comm is None:
            raise RuntimeError(
                "PoolExecutor runs tasks on the ranks that serve them: start the script with "
                "`heddle run -n N -- python -m heddle.futures script.py` (or use "
                "CommExecutor, which every rank enters)"
            )
        super().__init__(_server_comm, 0, next(_tags), stop_workers=False)
        if max_workers is not None and max_workers < 1:
            raise ValueError("max_workers must be at least 1")


MPICommExecutor = CommExecutor
MPIPoolExecutor = PoolExecutor
