"""The collective calls of ``heddle.MPI``'s communicators, on buffers (uppercase) and on
objects (lowercase), mapped onto ``heddle.comm``'s native collectives.

Buffer specifications are resolved first (``datatypes.resolve``). Reductions with an
operator and type Heddle reduces natively (``SUM`` … ``BXOR`` on numbers) run in place in
the native collectives; the others (``MAXLOC``/``MINLOC`` on pairs, ``LXOR``, complex
numbers, ``Op.Create``) gather the operands and fold them in rank order with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from heddle._heddle.comm import IN_PLACE
from heddle._mpi import datatypes as dt
from heddle._mpi.errors import ERR_BUFFER, Exception, mpi_errors
from heddle._mpi.ops import SUM, Op


def _msg(spec: Any, writable: bool, what: str) -> dt.Message | None:
    if spec is None or spec is IN_PLACE:
        return None
    return dt.resolve(spec, writable, what)


def _data(m: dt.Message | None, spec: Any) -> Any:
    return spec if m is None else m.data


def _native_op(op: Op, *msgs: dt.Message | None) -> Any:
    """Heddle's operator for ``op`` on these messages, or ``None`` to fold in Python."""
    if op.native is None:
        return None
    for m in msgs:
        if m is not None and (m.data.dtype.kind not in "biuf" or m.data.dtype.fields):
            return None
    return op.native


class Collectives:
    """Collective calls; mixed into ``heddle.MPI.Intracomm`` (``self._c`` is the native
    ``heddle.comm.Comm``)."""

    _c: Any

    # -- synchronization and data movement ------------------------------------------------

    @mpi_errors
    def Barrier(self) -> None:
        self._c.Barrier()

    @mpi_errors
    def barrier(self) -> None:
        self._c.Barrier()

    @mpi_errors
    def Bcast(self, buf: Any, root: int = 0) -> None:
        m = dt.resolve(buf, True, "buf")
        self._c.Bcast(m.data, root)
        m.unpack()

    @mpi_errors
    def Gather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        s, r = _msg(sendbuf, False, "sendbuf"), _msg(recvbuf, True, "recvbuf")
        self._c.Gather(_data(s, sendbuf), _data(r, recvbuf), root)

    @mpi_errors
    def Scatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        s, r = _msg(sendbuf, False, "sendbuf"), _msg(recvbuf, True, "recvbuf")
        self._c.Scatter(_data(s, sendbuf), _data(r, recvbuf), root)

    @mpi_errors
    def Allgather(self, sendbuf: Any, recvbuf: Any) -> None:
        s, r = _msg(sendbuf, False, "sendbuf"), _msg(recvbuf, True, "recvbuf")
        self._c.Allgather(_data(s, sendbuf), _data(r, recvbuf))

    @mpi_errors
    def Alltoall(self, sendbuf: Any, recvbuf: Any) -> None:
        s, r = _msg(sendbuf, False, "sendbuf"), _msg(recvbuf, True, "recvbuf")
        self._c.Alltoall(_data(s, sendbuf), _data(r, recvbuf))

    @mpi_errors
    def Gatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        s = _msg(sendbuf, False, "sendbuf")
        _, r = dt.resolve_v(recvbuf, True, "recvbuf")
        self._c.Gatherv(_data(s, sendbuf), r, root)

    @mpi_errors
    def Scatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> None:
        _, s = dt.resolve_v(sendbuf, False, "sendbuf")
        r = _msg(recvbuf, True, "recvbuf")
        self._c.Scatterv(s, _data(r, recvbuf), root)

    @mpi_errors
    def Allgatherv(self, sendbuf: Any, recvbuf: Any) -> None:
        s = _msg(sendbuf, False, "sendbuf")
        _, r = dt.resolve_v(recvbuf, True, "recvbuf")
        self._c.Allgatherv(_data(s, sendbuf), r)

    @mpi_errors
    def Alltoallv(self, sendbuf: Any, recvbuf: Any) -> None:
        _, s = dt.resolve_v(sendbuf, False, "sendbuf")
        _, r = dt.resolve_v(recvbuf, True, "recvbuf")
        self._c.Alltoallv(s, r)

    # -- reductions -----------------------------------------------------------------------

    def _operands(self, sendbuf: Any, recvbuf: Any, need_recv: bool) -> tuple[Any, Any]:
        r = _msg(recvbuf, True, "recvbuf")
        s = _msg(sendbuf, False, "sendbuf")
        if need_recv and r is None:
            raise Exception(ERR_BUFFER, "recvbuf: a reduction needs a receive buffer")
        return s, r

    def _gathered(self, s: dt.Message | None, r: dt.Message | None) -> list[np.ndarray]:
        mine = (r if s is None else s).data  # type: ignore[union-attr]
        return list(self._c.allgather(np.array(mine)))

    @mpi_errors
    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        s, r = self._operands(sendbuf, recvbuf, True)
        native = _native_op(op, s, r)
        if native is not None:
            self._c.Allreduce(_data(s, sendbuf), r.data, native)
        else:
            r.data[...] = op.fold_all(self._gathered(s, r), r.datatype)
        r.unpack()

    @mpi_errors
    def Reduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> None:
        s, r = self._operands(sendbuf, recvbuf, self._c.rank == root)
        native = _native_op(op, s, r)
        if native is not None:
            self._c.Reduce(_data(s, sendbuf), _data(r, recvbuf), native, root)
        else:
            mine = (r if s is None else s).data
            parts = self._c.gather(np.array(mine), root)
            if parts is not None:
                r.data[...] = op.fold_all(list(parts), r.datatype)
        if r is not None and self._c.rank == root:
            r.unpack()

    def _prefix(self, sendbuf: Any, recvbuf: Any, op: Op, inclusive: bool) -> None:
        s, r = self._operands(sendbuf, recvbuf, True)
        native = _native_op(op, s, r)
        if native is not None:
            call = self._c.Scan if inclusive else self._c.Exscan
            call(_data(s, sendbuf), r.data, native)
        else:
            upto = self._c.rank + (1 if inclusive else 0)
            parts = self._gathered(s, r)[:upto]
            if parts:
                r.data[...] = op.fold_all(parts, r.datatype)
        r.unpack()

    @mpi_errors
    def Scan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        self._prefix(sendbuf, recvbuf, op, True)

    @mpi_errors
    def Exscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        self._prefix(sendbuf, recvbuf, op, False)

    @mpi_errors
    def Reduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> None:
        s, r = self._operands(sendbuf, recvbuf, True)
        native = _native_op(op, s, r)
        if native is not None:
            self._c.Reduce_scatter_block(_data(s, sendbuf), r.data, native)
            return
        n = len(r.data) if s is not None else len(r.data) // self._c.size
        total = op.fold_all(self._gathered(s, r), r.datatype)
        r.data[...] = total[self._c.rank * n : (self._c.rank + 1) * n]

    @mpi_errors
    def Reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Op = SUM
    ) -> None:
        s, r = self._operands(sendbuf, recvbuf, True)
        native = _native_op(op, s, r)
        if native is not None:
            self._c.Reduce_scatter(_data(s, sendbuf), r.data, recvcounts, native)
            return
        counts = list(recvcounts) if recvcounts is not None else [len(r.data)] * self._c.size
        start = sum(counts[: self._c.rank])
        total = op.fold_all(self._gathered(s, r), r.datatype)
        r.data[: counts[self._c.rank]] = total[start : start + counts[self._c.rank]]

    # -- objects --------------------------------------------------------------------------

    @mpi_errors
    def bcast(self, obj: Any = None, root: int = 0) -> Any:
        return self._c.bcast(obj, root)

    @mpi_errors
    def gather(self, sendobj: Any, root: int = 0) -> Any:
        return self._c.gather(sendobj, root)

    @mpi_errors
    def scatter(self, sendobj: Any = None, root: int = 0) -> Any:
        return self._c.scatter(sendobj, root)

    @mpi_errors
    def allgather(self, sendobj: Any) -> Any:
        return self._c.allgather(sendobj)

    @mpi_errors
    def alltoall(self, sendobj: Any) -> Any:
        return self._c.alltoall(sendobj)

    @mpi_errors
    def reduce(self, sendobj: Any, op: Any = SUM, root: int = 0) -> Any:
        return self._c.reduce(sendobj, op, root)

    @mpi_errors
    def allreduce(self, sendobj: Any, op: Any = SUM) -> Any:
        return self._c.allreduce(sendobj, op)

    @mpi_errors
    def scan(self, sendobj: Any, op: Any = SUM) -> Any:
        return self._c.scan(sendobj, op)

    @mpi_errors
    def exscan(self, sendobj: Any, op: Any = SUM) -> Any:
        return self._c.exscan(sendobj, op)
