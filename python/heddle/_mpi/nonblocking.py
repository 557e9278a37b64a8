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
from heddle._mpi.request import CompositeRequest, Status

Rounds = Generator[list[Any], None, None]


class CollectiveRequest(CompositeRequest):
    """A non-blocking collective under way: rounds of native requests."""

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
        blocks = None if rv is None else _blocks(rv.data, p, "recvbuf")
        sh, tag = self._schedule()
        mine = None if s is None else s.data
        return CollectiveRequest(_then(_gather(sh, tag, r, p, root, mine, blocks), rv))

    @mpi_errors
    def Iscatter(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = dt.resolve(sendbuf, False, "sendbuf") if r == root else None
        rv = None if recvbuf is IN_PLACE else dt.resolve(recvbuf, True, "recvbuf")
        blocks = None if s is None else _blocks(s.data, p, "sendbuf")
        sh, tag = self._schedule()
        into = None if rv is None else rv.data
        return CollectiveRequest(_then(_scatter(sh, tag, r, p, root, blocks, into), rv))

    @mpi_errors
    def Iallgather(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        p = self._c.size
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        rv = dt.resolve(recvbuf, True, "recvbuf")
        return self._allgather(s, _blocks(rv.data, p, "recvbuf"), rv)

    @mpi_errors
    def Ialltoall(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        p = self._c.size
        rv = dt.resolve(recvbuf, True, "recvbuf")
        s = rv if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        out = _blocks(s.data, p, "sendbuf")
        if sendbuf is IN_PLACE:
            out = [b.copy() for b in out]
        sh, tag = self._schedule()
        rounds = _exchange(sh, tag, self._c.rank, out, _blocks(rv.data, p, "recvbuf"))
        return CollectiveRequest(_then(rounds, rv))

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

    def _allgather(
        self, s: dt.Message | None, blocks: list[np.ndarray], rv: dt.Message | None
    ) -> CollectiveRequest:
        """Every rank's block (its ``s``, or already in place) to every rank's ``blocks``."""
        r, p = self._c.rank, self._c.size
        if s is not None:
            blocks[r][...] = s.data
        mine = blocks[r].copy()
        sh, tag = self._schedule()
        return CollectiveRequest(_then(_exchange(sh, tag, r, [mine] * p, blocks), rv))

    # -- vector forms, prefix reductions and reduce-scatter --------------------------------

    @mpi_errors
    def Igatherv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        slices = _vblocks(recvbuf, True, "recvbuf", p) if r == root else None
        sh, tag = self._schedule()
        mine = None if s is None else s.data
        return CollectiveRequest(_gather(sh, tag, r, p, root, mine, slices))

    @mpi_errors
    def Iscatterv(self, sendbuf: Any, recvbuf: Any, root: int = 0) -> CollectiveRequest:
        r, p = self._c.rank, self._c.size
        slices = _vblocks(sendbuf, False, "sendbuf", p) if r == root else None
        rv = None if recvbuf is IN_PLACE else dt.resolve(recvbuf, True, "recvbuf")
        sh, tag = self._schedule()
        into = None if rv is None else rv.data
        return CollectiveRequest(_scatter(sh, tag, r, p, root, slices, into))

    @mpi_errors
    def Iallgatherv(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        slices = _vblocks(recvbuf, True, "recvbuf", self._c.size)
        s = None if sendbuf is IN_PLACE else dt.resolve(sendbuf, False, "sendbuf")
        return self._allgather(s, slices, None)

    @mpi_errors
    def Ialltoallv(self, sendbuf: Any, recvbuf: Any) -> CollectiveRequest:
        p = self._c.size
        out = _vblocks(sendbuf, False, "sendbuf", p)
        into = _vblocks(recvbuf, True, "recvbuf", p)
        sh, tag = self._schedule()
        return CollectiveRequest(_exchange(sh, tag, self._c.rank, out, into))

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
                rv.data[...] = op.fold_all(parts, rv.datatype)
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
            rv.data[: counts[r]] = op.fold_all(parts, rv.datatype)
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


def _then(rounds: Rounds, m: dt.Message | None) -> Rounds:
    """``rounds``, then the received data scattered into ``m``'s strided type, if any."""
    yield from rounds
    if m is not None:
        m.unpack()


def _gather(
    sh: Any,
    tag: int,
    r: int,
    p: int,
    root: int,
    mine: np.ndarray | None,
    blocks: list[np.ndarray] | None,
) -> Rounds:
    """Each rank's ``mine`` to ``root``'s ``blocks`` (``mine=None`` at the root: in place)."""
    if r != root:
        assert mine is not None
        yield [_native.isend(sh, mine, root, tag)]
        return
    assert blocks is not None
    if mine is not None:
        blocks[r][...] = mine
    yield [_native.irecv(sh, blocks[q], q, tag) for q in range(p) if q != r]


def _scatter(
    sh: Any,
    tag: int,
    r: int,
    p: int,
    root: int,
    blocks: list[np.ndarray] | None,
    into: np.ndarray | None,
) -> Rounds:
    """``root``'s ``blocks`` to each rank's ``into`` (``into=None`` at the root: kept)."""
    if r != root:
        assert into is not None
        yield [_native.irecv(sh, into, root, tag)]
        return
    assert blocks is not None
    if into is not None:
        into[: len(blocks[r])] = blocks[r]
    yield [_native.isend(sh, blocks[q], q, tag) for q in range(p) if q != r]


def _exchange(sh: Any, tag: int, r: int, out: list[np.ndarray], into: list[np.ndarray]) -> Rounds:
    """``out[q]`` to rank q and ``into[q]`` from it, for every rank at once."""
    into[r][...] = out[r]
    others = [q for q in range(len(out)) if q != r]
    reqs = [_native.isend(sh, out[q], q, tag) for q in others]
    yield reqs + [_native.irecv(sh, into[q], q, tag) for q in others]


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
    rv.data[...] = op.fold_all(parts, rv.datatype)
    rv.unpack()
