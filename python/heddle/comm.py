"""heddle.comm: MPI-style communication between the workers of a job, close to mpi4py.

Start a job with ``heddle run -n 4 script.py`` (or ``python -m heddle run -n 4 script.py``);
in the script::

    import numpy as np
    import heddle

    comm = heddle.init()                     # joins the job; a world of one without a launcher
    x = np.full(4, comm.rank, dtype=np.float64)
    comm.Allreduce(heddle.IN_PLACE, x, op=heddle.SUM)   # in place on x's memory
    total = comm.allreduce(comm.rank)                   # any picklable object

Uppercase methods (``Allreduce``, ``Scan``, ``Exscan``, ``Bcast``, ``Reduce``,
``Allgather``, ``Gather``, ``Scatter``, ``Alltoall``, their ``v`` forms, ``Send``,
``Recv``, ``Sendrecv``, ``Barrier``) work on buffers — numpy arrays or any contiguous
buffer-protocol object of bool, int8..int64, uint8..uint64, float32 or float64
(data-moving calls accept any element type) — reading and writing their memory directly.
They are implemented natively and release the GIL while they wait.

Lowercase methods (``bcast``, ``reduce``, ``allreduce``, ``scan``, ``exscan``, ``gather``,
``allgather``, ``scatter``, ``alltoall``, ``send``, ``recv``, ``sendrecv``) move picklable
objects with pickle protocol 5: large buffers inside the objects (numpy arrays, bytearrays,
...) travel out of band, and received arrays are views of the received memory rather than
copies.
"""

from __future__ import annotations

import functools
import operator
import os
import pickle
import sys
import threading
from array import array
from collections.abc import Sequence
from typing import Any, Callable, Union

from heddle._heddle import comm as _comm
from heddle._heddle.comm import BAND, BOR, BXOR, IN_PLACE, LAND, LOR, MAX, MIN, PROD, SUM, Op
from heddle.errors import ArgumentError

__all__ = [
    "Comm",
    "init",
    "is_initialized",
    "IN_PLACE",
    "UNDEFINED",
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
]

#: Color for :meth:`Comm.split` that joins no sub-communicator (as ``MPI.UNDEFINED``).
UNDEFINED = -32766

#: Buffers inside pickled objects smaller than this travel inside the pickle stream.
_OUT_OF_BAND_MIN = 4096

OpLike = Union[Op, Callable[[Any, Any], Any]]


def _is_array(x: Any) -> bool:
    return hasattr(x, "__array_ufunc__") and not isinstance(x, (int, float, complex, bool))


def _np() -> Any:
    import numpy

    return numpy


def _max(a: Any, b: Any) -> Any:
    if _is_array(a) or _is_array(b):
        return _np().maximum(a, b)
    return b if b > a else a


def _min(a: Any, b: Any) -> Any:
    if _is_array(a) or _is_array(b):
        return _np().minimum(a, b)
    return b if b < a else a


def _land(a: Any, b: Any) -> Any:
    if _is_array(a) or _is_array(b):
        return _np().logical_and(a, b)
    return bool(a) and bool(b)


def _lor(a: Any, b: Any) -> Any:
    if _is_array(a) or _is_array(b):
        return _np().logical_or(a, b)
    return bool(a) or bool(b)


_OBJECT_OPS = {
    "SUM": operator.add,
    "PROD": operator.mul,
    "MAX": _max,
    "MIN": _min,
    "LAND": _land,
    "LOR": _lor,
    "BAND": operator.and_,
    "BOR": operator.or_,
    "BXOR": operator.xor,
}


def _object_op(op: OpLike | None) -> Callable[[Any, Any], Any]:
    if op is None:
        return operator.add
    if isinstance(op, Op):
        return _OBJECT_OPS[op.name]
    if callable(op):
        return op
    raise ArgumentError(
        f"op must be a heddle operator (heddle.SUM, ...) or a function of two values, not {op!r}"
    )


# --- pickle protocol 5 with out-of-band buffers ----------------------------------------
# Python pickles and unpickles; the framing around the pickles (headers, buffer offsets,
# alignment) is native: heddle._heddle.comm.pack_objects and friends (comm_objects.rs).


def _dumps(obj: Any) -> tuple[bytes, list[memoryview]]:
    """Pickles ``obj``; buffers of at least ``_OUT_OF_BAND_MIN`` bytes are returned apart
    (as byte views of the object's own memory) instead of being copied into the stream."""
    buffers: list[memoryview] = []

    def out_of_band(pb: pickle.PickleBuffer) -> bool:
        try:
            raw = pb.raw()
        except BufferError:  # not contiguous: keep it in the stream
            return True
        if raw.nbytes < _OUT_OF_BAND_MIN:
            return True
        buffers.append(raw)
        return False

    return pickle.dumps(obj, protocol=5, buffer_callback=out_of_band), buffers


def _pack_all(objs: Sequence[Any]) -> tuple[bytearray, list[int]]:
    """Every object as a self-describing block (see comm_objects.rs), in one bytearray."""
    return _comm.pack_objects([_dumps(o) for o in objs])


def _unpack_all(buf: bytearray, sizes: Sequence[int]) -> list[Any]:
    return [
        pickle.loads(data, buffers=buffers) for data, buffers in _comm.unpack_objects(buf, sizes)
    ]


def _u64(values: Sequence[int]) -> array[int]:
    return array("Q", values)


class Comm(_comm.Comm):
    """A group of ranks running the same program (mpi4py's ``Intracomm``).

    Every rank calls the same collectives in the same order. ``rank``/``size`` (or
    ``Get_rank()``/``Get_size()``) locate this process. Obtain the world with
    :func:`heddle.init`; :meth:`split` makes sub-communicators.

    Uppercase methods operate on buffers in place; lowercase ones on picklable objects.
    Every call that waits for peers releases the GIL; Ctrl-C interrupts it.
    """

    # -- structure ----------------------------------------------------------------------

    def split(self, color: int | None = 0, key: int = 0) -> Comm | None:
        """Splits into sub-communicators (collective over this one): ranks passing the
        same ``color`` form one, ordered by ``(key, rank)``. A ``color`` of ``None``,
        ``heddle.UNDEFINED`` or any negative number joins none and gets ``None``."""
        sub = self._split(color, key)
        return None if sub is None else type(self)(sub)

    Split = split

    def Abort(self, errorcode: int = 1) -> None:
        """Ends this worker at once with ``errorcode``; ``heddle run`` then stops the other
        workers and exits with that code (mpi4py's ``Abort``); the others' pending calls
        raise :class:`heddle.JobAborted` meanwhile."""
        _comm.abort_job_with("Abort", f"Comm.Abort({errorcode}) was called")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(int(errorcode) if errorcode else 1)

    # -- objects: point to point --------------------------------------------------------

    def send(self, obj: Any, dest: int, tag: int = 0) -> None:
        """Sends a picklable object to rank ``dest`` with ``tag``. Large buffers inside it
        are sent from their own memory, after the pickle stream, with the same tag."""
        data, buffers = _dumps(obj)
        self.Send(_comm.object_head(data, buffers), dest, tag)
        for b in buffers:
            self.Send(b, dest, tag)

    def recv(self, buf: None = None, source: int | None = None, tag: int = 0) -> Any:
        """Receives an object sent with :meth:`send` from rank ``source`` with ``tag``
        (there is no ``ANY_SOURCE``/``ANY_TAG``). Arrays that travelled out of band are
        received straight into new memory and returned without a further copy."""
        if buf is not None:
            raise ArgumentError("recv: buf is not supported; objects are received into new memory")
        if source is None:
            raise ArgumentError("recv: pass source= (heddle has no ANY_SOURCE)")
        data, lens = _comm.parse_object_head(self._recv_bytes(source, tag))
        buffers = []
        for size in lens:
            b = bytearray(size)
            self.Recv(b, source, tag)
            buffers.append(b)
        return pickle.loads(data, buffers=buffers)

    def sendrecv(
        self,
        sendobj: Any,
        dest: int,
        sendtag: int = 0,
        recvbuf: None = None,
        source: int | None = None,
        recvtag: int | None = None,
    ) -> Any:
        """Sends ``sendobj`` to ``dest`` and receives an object from ``source`` at once, so
        ranks can exchange pairwise without deadlock. One tag serves both directions."""
        if recvbuf is not None:
            raise ArgumentError(
                "sendrecv: recvbuf is not supported; objects are received into new memory"
            )
        if source is None:
            raise ArgumentError("sendrecv: pass source= (heddle has no ANY_SOURCE)")
        tag = sendtag if recvtag is None else recvtag
        blob, (size,) = _pack_all([sendobj])
        their = _u64([0])
        self.Sendrecv(_u64([size]), dest, sendtag, their, source, tag)
        out = bytearray(their[0])
        self.Sendrecv(blob, dest, sendtag, out, source, tag)
        return _unpack_all(out, their)[0]

    # -- objects: collectives -----------------------------------------------------------

    def bcast(self, obj: Any = None, root: int = 0) -> Any:
        """Returns ``obj`` of rank ``root`` on every rank (the root gets its own object
        back). Large buffers inside it are broadcast from and into their own memory."""
        if self.rank == root:
            data, buffers = _dumps(obj)
            self.Bcast(_u64([len(data), len(buffers)]), root)
            self.Bcast(_comm.bcast_head(data, buffers), root)
            for b in buffers:
                self.Bcast(b, root)
            return obj
        sizes = _u64([0, 0])
        self.Bcast(sizes, root)
        length, n = sizes
        head = bytearray(8 * n + length)
        self.Bcast(head, root)
        pickled, lens = _comm.parse_bcast_head(head, n)
        received: list[bytearray] = []
        for size in lens:
            incoming = bytearray(size)
            self.Bcast(incoming, root)
            received.append(incoming)
        return pickle.loads(pickled, buffers=received)

    def gather(self, sendobj: Any, root: int = 0) -> list[Any] | None:
        """Returns the list of every rank's ``sendobj`` (in rank order) at ``root``, and
        ``None`` elsewhere."""
        blob, (size,) = _pack_all([sendobj])
        if self.rank != root:
            self.Gather(_u64([size]), None, root)
            self.Gatherv(blob, None, root)
            return None
        sizes = _u64([0] * self.size)
        self.Gather(_u64([size]), sizes, root)
        out = bytearray(sum(sizes))
        self.Gatherv(blob, [out, list(sizes)], root)
        return _unpack_all(out, sizes)

    def allgather(self, sendobj: Any) -> list[Any]:
        """Returns the list of every rank's ``sendobj``, in rank order, on every rank."""
        blob, (size,) = _pack_all([sendobj])
        sizes = _u64([0] * self.size)
        self.Allgather(_u64([size]), sizes)
        out = bytearray(sum(sizes))
        self.Allgatherv(blob, [out, list(sizes)])
        return _unpack_all(out, sizes)

    def scatter(self, sendobj: Sequence[Any] | None = None, root: int = 0) -> Any:
        """Rank ``root`` passes one object per rank; rank i gets ``sendobj[i]``."""
        mine = _u64([0])
        if self.rank == root:
            if sendobj is None or len(sendobj) != self.size:
                got = "None" if sendobj is None else f"{len(sendobj)} objects"
                raise ArgumentError(
                    f"scatter: the root must pass {self.size} objects (one per rank), got {got}"
                )
            blob, sizes = _pack_all(list(sendobj))
            self.Scatter(_u64(sizes), mine, root)
            out = bytearray(mine[0])
            self.Scatterv([blob, sizes], out, root)
        else:
            self.Scatter(None, mine, root)
            out = bytearray(mine[0])
            self.Scatterv(None, out, root)
        return _unpack_all(out, mine)[0]

    def alltoall(self, sendobj: Sequence[Any]) -> list[Any]:
        """Every rank passes one object per rank; rank j receives ``sendobj[j]`` of every
        rank, in rank order."""
        if sendobj is None or len(sendobj) != self.size:
            raise ArgumentError(f"alltoall: pass {self.size} objects (one per rank)")
        blob, sizes = _pack_all(list(sendobj))
        theirs = _u64([0] * self.size)
        self.Alltoall(_u64(sizes), theirs)
        out = bytearray(sum(theirs))
        self.Alltoallv([blob, sizes], [out, list(theirs)])
        return _unpack_all(out, theirs)

    def reduce(self, sendobj: Any, op: OpLike | None = SUM, root: int = 0) -> Any:
        """Combines every rank's object with ``op`` (a heddle operator, applied as ``+``,
        ``*``, max, min, ... — element-wise for numpy arrays — or any function of two
        values) in rank order; the result at ``root``, ``None`` elsewhere."""
        fold = _object_op(op)
        values = self.gather(sendobj, root)
        return None if values is None else functools.reduce(fold, values)

    def allreduce(self, sendobj: Any, op: OpLike | None = SUM) -> Any:
        """Combines every rank's object with ``op`` as :meth:`reduce` does; every rank gets
        the result. For numpy arrays prefer :meth:`Allreduce`, which reduces in place."""
        fold = _object_op(op)
        return functools.reduce(fold, self.allgather(sendobj))

    def scan(self, sendobj: Any, op: OpLike | None = SUM) -> Any:
        """Inclusive prefix reduction of objects: rank r gets the objects of ranks 0 to r
        combined with ``op`` (as :meth:`reduce`) in rank order."""
        fold = _object_op(op)
        return functools.reduce(fold, self.allgather(sendobj)[: self.rank + 1])

    def exscan(self, sendobj: Any, op: OpLike | None = SUM) -> Any:
        """Exclusive prefix reduction of objects: rank r gets the objects of ranks 0 to
        r - 1 combined with ``op`` in rank order; rank 0 gets ``None`` (as mpi4py)."""
        fold = _object_op(op)
        values = self.allgather(sendobj)[: self.rank]
        return functools.reduce(fold, values) if values else None


_world: Comm | None = None
_world_lock = threading.Lock()


def init() -> Comm:
    """Joins the job this process belongs to and returns the world communicator.

    Under ``heddle run -n N`` it waits (without the GIL, at most ``HEDDLE_INIT_TIMEOUT_S``)
    until all N workers have joined; a process started without the launcher is a world of
    one. Calling it again returns the same communicator.

    Raises ``heddle.ConfigError`` for a bad ``HEDDLE_*`` setting and ``heddle.TimeoutError``
    or ``heddle.CommError`` when the job cannot start.
    """
    global _world
    with _world_lock:
        if _world is None:
            _world = Comm(_comm.init())
            if _world.size > 1:
                from heddle import _abort

                _abort.install(_world.rank)
        return _world


def is_initialized() -> bool:
    """Whether :func:`init` has joined the job in this process."""
    return _world is not None
