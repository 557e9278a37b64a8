"""Non-blocking collectives of ``heddle.MPI``: ``Ibarrier``, ``Ibcast``, ``Ireduce``,
``Iallreduce``, ``Igather``, ``Iallgather``, ``Iscatter``, ``Ialltoall``, their v-forms,
``Iscan``, ``Iexscan``, ``Ireduce_scatter`` and ``Ireduce_scatter_block``.

Each call is a schedule of point-to-point rounds on the communicator's *shadow* (the same
ranks in a context of their own, so its messages never meet the program's): a generator
that posts the non-blocking sends and receives of a round and yields them; the request
moves to the next round once they have finished. ``Test`` advances it as far as it can
without waiting, ``Wait`` to the end; the engine moves the messages meanwhile in any call
of the worker. Rounds: a dissemination barrier, binomial-tree broadcasts, reductions
gathered at the root and folded in rank order (right for non-commutative operators), and
direct exchanges for the gathers, scatters and all-to-all.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import numpy as np

from heddle._heddle import comm as _native
from heddle._heddle.comm import IN_PLACE
from heddle._mpi import datatypes as dt
from heddle._mpi.errors import ERR_BUFFER, Exception, mpi_errors
from heddle._mpi.ops import SUM, Op
from heddle._mpi.request import Request, Status

Rounds = Generator[list[Any], None, None]


class CollectiveRequest(Request):
    """A non-blocking collective under way: rounds of native requests."""

    _composite = True

    def __init__(self, rounds: Rounds) -> None:
        super().__init__()
        self._rounds: Rounds | None = rounds
        self._round: list[Any] = []
        self._advance(block=False)

    def __bool__(self) -> bool:
        return self._rounds is not None

    def _advance(self, block: bool) -> bool:
        """Moves to later rounds while the current one has finished; whether all have."""
        while self._rounds is not None:
            if block:
                if self._round:
                    _native.waitall(self._round)
            elif not all(r.test() for r in self._round):
                return False
            try:
                self._round = next(self._rounds)
            except StopIteration:
                self._rounds, self._round = None, []
        return True

    @mpi_errors
    def Wait(self, status: Status | None = None) -> bool:
        self._advance(block=True)
        if status is not None:
            status._fill(None)
        return True

    @mpi_errors
    def Test(self, status: Status | None = None) -> bool:
        done = self._advance(block=False)
        if done and status is not None:
            status._fill(None)
        return done

    def wait(self, status: Status | None = None) -> Any:
        self.Wait(status)
        return None

    def test(self, status: Status | None = None) -> tuple[bool, Any]:
        return self.Test(status), None

    def Get_status(self, status: Status | None = None) -> bool:
        return self._rounds is None

    def Cancel(self) -> None:
        """Collectives cannot be cancelled (as in MPI)."""


def _mask_rounds(size: int) -> list[int]:
    out, k = [], 1
    while k < size:
        out.append(k)
        k <<= 1
    return out


class NonBlocking:
    """Non-blocking collectives; mixed into ``heddle.MPI``'s ``Comm`` (``self._c`` is the
    native communicator)."""

    _c: Any
    _shadow_comm: Any = None
    _icoll_seq = 0

    def _schedule(self) -> tuple[Any, int]:
        """The shadow communicator and this call's tag (the same on every rank)."""
        if self._shadow_comm is None:
            self._shadow_comm = _native.shadow_comm(self._c)
        self._icoll_seq = (self._icoll_seq + 1) % (1 << 31)
        return self._shadow_comm, self._icoll_seq

    @mpi_errors
    def Ibarrier(self) -> CollectiveRequest:
        """A barrier that returns at once; its request finishes once every rank called it."""
        sh, tag = self._schedule()
        r, p = self._c.rank, self._c.size

        def rounds() -> Rounds:
            token = bytearray(1)
            for k in _mask_rounds(p):
                into = bytearray(1)
                yield [
                    _native.isend(sh, token, (r + k) % p, tag),
                    _native.irecv(sh, into, (r - k) % p, tag),
                ]

        return CollectiveRequest(rounds())

    ibarrier = Ibarrier

    @mpi_errors
    def Ibcast(self, buf: Any, root: int = 0) -> CollectiveRequest:
        m = dt.resolve(buf, True, "buf")
        sh, tag = self._schedule()
        return CollectiveRequest(_bcast(sh, tag, m.data, root, self._c.rank, self._c.size, m))

    @mpi_errors
    def Igather(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        rv = dt.resolve(recvbuf, True, "recvbuf") if r == root else None
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            if r != root:
                assert s is not None
                yield [_native.isend(sh, s.data, root, tag)]
                return
            assert rv is not None
            blocks = _blocks(rv.data, p, "recvbuf")
            if s is not None:
                blocks[r][...] = s.data
            yield [_native.irecv(sh, blocks[q], q, tag) for q in range(p) if q != r]
            rv.unpack()

        return CollectiveRequest(rounds())

    @mpi_errors
    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = dt.resolve(sendbuf, False, "sendbuf") if r == root else None
        rv = None if recvbuf is IN_PLACE else dt.resolve(recvbuf, True, "recvbuf")
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            if r != root:
                assert rv is not None
                yield [_native.irecv(sh, rv.data, root, tag)]
                rv.unpack()
                return
            assert s is not None
            blocks = _blocks(s.data, p, "sendbuf")
            if rv is not None:
                rv.data[...] = blocks[r]
                rv.unpack()
            yield [_native.isend(sh, blocks[q], q, tag) for q in range(p) if q != r]

        return CollectiveRequest(rounds())

    @mpi_errors
    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        rv = dt.resolve(recvbuf, True, "recvbuf")
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            blocks = _blocks(rv.data, p, "recvbuf")
            if s is not None:
                blocks[r][...] = s.data
            mine = blocks[r].copy()
            reqs = [_native.isend(sh, mine, q, tag) for q in range(p) if q != r]
            reqs += [_native.irecv(sh, blocks[q], q, tag) for q in range(p) if q != r]
            yield reqs
            rv.unpack()

        return CollectiveRequest(rounds())

    @mpi_errors
    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        s = rv if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            out = _blocks(s.data, p, "sendbuf")
            if sendbuf is IN_PLACE:
                out = [b.copy() for b in out]
            into = _blocks(rv.data, p, "recvbuf")
            into[r][...] = out[r]
            reqs = [_native.isend(sh, out[q], q, tag) for q in range(p) if q != r]
            reqs += [_native.irecv(sh, into[q], q, tag) for q in range(p) if q != r]
            yield reqs
            rv.unpack()

        return CollectiveRequest(rounds())

    @mpi_errors
    def Ireduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf") if r == root else None
        s = rv if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        if s is None:
            raise Exception(ERR_BUFFER, "sendbuf: IN_PLACE is for the root of Ireduce")
        sh, tag = self._schedule()
        mine = s.data.copy()
        return CollectiveRequest(_reduce(sh, tag, mine, op, root, r, p, rv))

    @mpi_errors
    def Iallreduce(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        mine = (rv if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")).data.copy()
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            yield from _reduce(sh, tag, mine, op, 0, r, p, rv if r == 0 else None)
            yield from _bcast(sh, tag, rv.data, 0, r, p, rv)

        return CollectiveRequest(rounds())

    # -- vector forms, prefix reductions and reduce-scatter --------------------------------

    @mpi_errors
    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        slices = _vblocks(recvbuf, True, "recvbuf", p) if r == root else []
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            if r != root:
                assert s is not None
                yield [_native.isend(sh, s.data, root, tag)]
                return
            if s is not None:
                slices[r][...] = s.data
            yield [_native.irecv(sh, slices[q], q, tag) for q in range(p) if q != r]

        return CollectiveRequest(rounds())

    @mpi_errors
    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        slices = _vblocks(sendbuf, False, "sendbuf", p) if r == root else []
        rv = None if recvbuf is IN_PLACE else dt.resolve(recvbuf, True, "recvbuf")
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            if r != root:
                assert rv is not None
                yield [_native.irecv(sh, rv.data, root, tag)]
                return
            if rv is not None:
                rv.data[: len(slices[r])] = slices[r]
            yield [_native.isend(sh, slices[q], q, tag) for q in range(p) if q != r]

        return CollectiveRequest(rounds())

    @mpi_errors
    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        slices = _vblocks(recvbuf, True, "recvbuf", p)
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            if s is not None:
                slices[r][...] = s.data
            mine = slices[r].copy()
            reqs = [_native.isend(sh, mine, q, tag) for q in range(p) if q != r]
            reqs += [_native.irecv(sh, slices[q], q, tag) for q in range(p) if q != r]
            yield reqs

        return CollectiveRequest(rounds())

    @mpi_errors
    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        out = _vblocks(sendbuf, False, "sendbuf", p)
        into = _vblocks(recvbuf, True, "recvbuf", p)
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            into[r][...] = out[r]
            reqs = [_native.isend(sh, out[q], q, tag) for q in range(p) if q != r]
            reqs += [_native.irecv(sh, into[q], q, tag) for q in range(p) if q != r]
            yield reqs

        return CollectiveRequest(rounds())

    def _iprefix(self, sendbuf: Any, recvbuf: Any, op: Op, inclusive: bool) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        mine = (rv if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")).data.copy()
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            lower = [np.empty_like(mine) for _ in range(r)]
            reqs = [_native.isend(sh, mine, q, tag) for q in range(r + 1, p)]
            reqs += [_native.irecv(sh, lower[q], q, tag) for q in range(r)]
            yield reqs
            parts = lower + ([mine] if inclusive else [])
            if parts:
                acc = parts[0]
                for part in parts[1:]:
                    acc = op.fold(acc, part, rv.datatype)
                rv.data[...] = acc
                rv.unpack()

        return CollectiveRequest(rounds())

    @mpi_errors
    def Iscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> CollectiveRequest:
        return self._iprefix(sendbuf, recvbuf, op, True)

    @mpi_errors
    def Iexscan(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> CollectiveRequest:
        return self._iprefix(sendbuf, recvbuf, op, False)

    @mpi_errors
    def Ireduce_scatter_block(self, sendbuf: Any, recvbuf: Any, op: Op = SUM) -> CollectiveRequest:
        p = self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        n = len(rv.data)
        return self._ireduce_scatter(sendbuf, rv, [n] * p, op)

    @mpi_errors
    def Ireduce_scatter(
        self, sendbuf: Any, recvbuf: Any, recvcounts: Any = None, op: Op = SUM
    ) -> CollectiveRequest:
        p = self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        counts = [int(c) for c in recvcounts] if recvcounts is not None else [len(rv.data)] * p
        return self._ireduce_scatter(sendbuf, rv, counts, op)

    def _ireduce_scatter(
        self, sendbuf: Any, rv: dt.Message, counts: list[int], op: Op
    ) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        if sendbuf is IN_PLACE:
            raise Exception(ERR_BUFFER, "sendbuf: IN_PLACE is not supported by Ireduce_scatter")
        data = dt.resolve(sendbuf, False, "sendbuf").data.copy()
        if len(data) != sum(counts):
            raise Exception(
                ERR_BUFFER, f"sendbuf: {len(data)} elements, the counts add up to {sum(counts)}"
            )
        starts = np.cumsum([0, *counts])
        blocks = [data[starts[q] : starts[q + 1]] for q in range(p)]
        sh, tag = self._schedule()

        def rounds() -> Rounds:
            parts = [blocks[r] if q == r else np.empty_like(blocks[r]) for q in range(p)]
            reqs = [_native.isend(sh, blocks[q], q, tag) for q in range(p) if q != r]
            reqs += [_native.irecv(sh, parts[q], q, tag) for q in range(p) if q != r]
            yield reqs
            acc = parts[0]
            for part in parts[1:]:
                acc = op.fold(acc, part, rv.datatype)
            rv.data[: counts[r]] = acc
            rv.unpack()

        return CollectiveRequest(rounds())


def _vblocks(spec: Any, writable: bool, what: str, p: int) -> list[np.ndarray]:
    """The per-rank blocks (views) of a vector specification, in elements of its type."""
    _, native = dt.resolve_v(spec, writable, what)
    if not isinstance(native, list):
        return _blocks(native, p, what)
    data, layout = native
    if isinstance(layout, tuple):
        counts, displs = layout
    else:
        counts = list(layout)
        displs = [int(x) for x in np.cumsum([0, *counts[:-1]])]
    if len(counts) != p or len(displs) != p:
        raise Exception(ERR_BUFFER, f"{what}: counts and displacements must be one per rank ({p})")
    return [data[d : d + c] for c, d in zip(counts, displs)]


def _blocks(data: np.ndarray, p: int, what: str) -> list[np.ndarray]:
    if len(data) % p:
        raise Exception(
            ERR_BUFFER, f"{what}: {len(data)} elements do not split into {p} equal blocks"
        )
    n = len(data) // p
    return [data[i * n : (i + 1) * n] for i in range(p)]


def _bcast(
    sh: Any, tag: int, data: np.ndarray, root: int, r: int, p: int, m: dt.Message | None
) -> Rounds:
    """Binomial tree from ``root``: receive from the parent, then send to the children."""
    vr = (r - root) % p
    mask = 1
    while mask < p:
        if vr & mask:
            yield [_native.irecv(sh, data, (vr - mask + root) % p, tag)]
            break
        mask <<= 1
    mask >>= 1
    sends = []
    while mask > 0:
        if vr + mask < p:
            sends.append(_native.isend(sh, data, (vr + mask + root) % p, tag))
        mask >>= 1
    if sends:
        yield sends
    if m is not None and vr != 0:
        m.unpack()


def _reduce(
    sh: Any,
    tag: int,
    mine: np.ndarray,
    op: Op,
    root: int,
    r: int,
    p: int,
    rv: dt.Message | None,
) -> Rounds:
    """Every operand to ``root``, folded there in rank order."""
    if r != root:
        yield [_native.isend(sh, mine, root, tag)]
        return
    assert rv is not None
    parts = [mine if q == r else np.empty_like(mine) for q in range(p)]
    yield [_native.irecv(sh, parts[q], q, tag) for q in range(p) if q != r]
    acc = parts[0]
    for part in parts[1:]:
        acc = op.fold(acc, part, rv.datatype)
    rv.data[...] = acc
    rv.unpack()
