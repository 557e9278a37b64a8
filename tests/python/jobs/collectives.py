"""Every buffer collective on every dtype, checked against numpy.

Each rank's input is drawn from a generator seeded by (case, rank), so every rank can
compute every other rank's input and hence the expected result with numpy. Prints one
JSON line per rank; any mismatch raises (the job then fails).
"""

import json
import zlib

import numpy as np

import heddle

comm = heddle.init()
r, p = comm.rank, comm.size
assert (comm.Get_rank(), comm.Get_size()) == (r, p)

REDUCIBLE = [
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]
MOVABLE = [*REDUCIBLE, np.complex128, np.float16]
SIZES = [1, 7, 70_001]  # the last spans many transport buffers

checks = 0


def inputs(rank, dtype, n, case):
    """Rank `rank`'s input for `case`: small integers (exact in every dtype)."""
    rng = np.random.default_rng([zlib.crc32(case.encode()), rank, n])
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "c":
        return (rng.integers(-9, 9, n) + 1j * rng.integers(-9, 9, n)).astype(dt)
    lo = 0 if dt.kind in "ub" else -3
    return rng.integers(lo, 4, n).astype(dt)


def check(name, got, want):
    global checks
    if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
        raise AssertionError(f"{name}: rank {r} got {got!r}, expected {want!r}")
    checks += 1


def reference(op, stack, dt):
    if op is heddle.SUM:
        return np.add.reduce(stack, axis=0, dtype=dt)
    if op is heddle.PROD:
        return np.multiply.reduce(stack, axis=0, dtype=dt)
    if op is heddle.MAX:
        return np.maximum.reduce(stack, axis=0)
    if op is heddle.MIN:
        return np.minimum.reduce(stack, axis=0)
    if op is heddle.LAND:
        return np.logical_and.reduce(stack, axis=0).astype(dt)
    if op is heddle.LOR:
        return np.logical_or.reduce(stack, axis=0).astype(dt)
    if op is heddle.BAND:
        return np.bitwise_and.reduce(stack, axis=0)
    if op is heddle.BOR:
        return np.bitwise_or.reduce(stack, axis=0)
    if op is heddle.BXOR:
        return np.bitwise_xor.reduce(stack, axis=0)
    raise ValueError(op)


def ops_for(dt):
    dt = np.dtype(dt)
    ops = [heddle.MAX, heddle.MIN, heddle.LAND, heddle.LOR]
    if dt != np.bool_:
        ops += [heddle.SUM, heddle.PROD]
    if dt.kind in "iub":
        ops += [heddle.BAND, heddle.BOR, heddle.BXOR]
    return ops


# --- reductions ------------------------------------------------------------------------
for dt in REDUCIBLE:
    for n in SIZES:
        for op in ops_for(dt):
            # Large inputs only for a few ops: enough to cover fragmenting paths.
            if n > 1000 and op not in (heddle.SUM, heddle.MAX, heddle.BXOR, heddle.LOR):
                continue
            case = f"{np.dtype(dt).name}-{op.name}"
            stack = np.stack([inputs(q, dt, n, case) for q in range(p)])
            want = reference(op, stack, np.dtype(dt))
            mine = inputs(r, dt, n, case)

            out = np.empty_like(mine)
            comm.Allreduce(mine, out, op=op)
            check(f"Allreduce {case} n={n}", out, want)
            assert np.array_equal(mine, stack[r]), "Allreduce modified sendbuf"

            x = mine.copy()
            comm.Allreduce(heddle.IN_PLACE, x, op=op)
            check(f"Allreduce IN_PLACE {case} n={n}", x, want)

            # Prefix reductions: numpy's reduction of the stack's first rows (one row is
            # its own reduction, as in MPI: LAND of a single 3 stays 3).
            def prefix(rows, dt=dt, op=op):
                return rows[0] if len(rows) == 1 else reference(op, rows, np.dtype(dt))

            out = np.empty_like(mine)
            comm.Scan(mine, out, op=op)
            check(f"Scan {case} n={n}", out, prefix(stack[: r + 1]))
            x = mine.copy()
            comm.Exscan(heddle.IN_PLACE, x, op=op)
            check(f"Exscan IN_PLACE {case} n={n}", x, prefix(stack[:r]) if r > 0 else mine)

            root = (n + len(op.name)) % p
            recv = np.empty_like(mine) if r == root else None
            comm.Reduce(mine, recv, op=op, root=root)
            if r == root:
                check(f"Reduce {case} n={n} root={root}", recv, want)

            if n == 7:
                x = mine.copy()
                if r == root:
                    comm.Reduce(heddle.IN_PLACE, x, op=op, root=root)
                    check(f"Reduce IN_PLACE {case}", x, want)
                else:
                    comm.Reduce(x, None, op=op, root=root)

# Default op is SUM; 2-D and Fortran-ordered arrays reduce element by element.
a = np.arange(12, dtype=np.float64).reshape(3, 4) * (r + 1)
comm.Allreduce(heddle.IN_PLACE, a)
check(
    "Allreduce default op 2-D",
    a,
    np.arange(12, dtype=np.float64).reshape(3, 4) * (p * (p + 1) // 2),
)
f = np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)) + r
comm.Allreduce(heddle.IN_PLACE, f, op=heddle.MAX)
check("Allreduce Fortran order", f, np.arange(12, dtype=np.int32).reshape(3, 4) + (p - 1))

# In place on a view: the reduction writes straight into the base array's memory.
base = np.zeros(30, dtype=np.int64)
base[10:20] = r + 1
comm.Allreduce(heddle.IN_PLACE, base[10:20], op=heddle.SUM)
want = np.zeros(30, dtype=np.int64)
want[10:20] = p * (p + 1) // 2
check("Allreduce on a view writes the base array", base, want)

# Reduce_scatter_block
for dt in (np.float64, np.int32):
    stack = np.stack([inputs(q, dt, 3 * p, "rsb") for q in range(p)])
    out = np.empty(3, dtype=dt)
    comm.Reduce_scatter_block(inputs(r, dt, 3 * p, "rsb"), out, op=heddle.SUM)
    check("Reduce_scatter_block", out, np.add.reduce(stack, axis=0, dtype=dt)[3 * r : 3 * r + 3])

# Reduce_scatter: rank i's block has i + 1 elements (numpy's reduction is the reference)
counts = [q + 1 for q in range(p)]
starts = np.cumsum([0, *counts])
for dt in (np.float64, np.int64):
    stack = np.stack([inputs(q, dt, sum(counts), "rs") for q in range(p)])
    want = np.maximum.reduce(stack, axis=0)[starts[r] : starts[r + 1]]
    out = np.empty(counts[r], dtype=dt)
    comm.Reduce_scatter(inputs(r, dt, sum(counts), "rs"), out, counts, op=heddle.MAX)
    check("Reduce_scatter", out, want)
    out = np.empty(counts[r], dtype=dt)  # counts from each rank's recvbuf
    comm.Reduce_scatter(inputs(r, dt, sum(counts), "rs"), out, op=heddle.MAX)
    check("Reduce_scatter without counts", out, want)

# --- data movement (any dtype) ---------------------------------------------------------
for dt in MOVABLE:
    for n in (1, 5, 40_000):
        case = f"move-{np.dtype(dt).name}"
        blocks = [inputs(q, dt, n, case) for q in range(p)]
        root = n % p

        buf = blocks[root].copy() if r == root else np.zeros(n, dtype=dt)
        comm.Bcast(buf, root=root)
        check(f"Bcast {case} n={n}", buf, blocks[root])

        out = np.zeros(n * p, dtype=dt) if r == root else None
        comm.Gather(blocks[r], out, root=root)
        if r == root:
            check(f"Gather {case} n={n}", out, np.concatenate(blocks))

        if r == root:
            out = np.zeros(n * p, dtype=dt)
            out[n * r : n * (r + 1)] = blocks[r]
            comm.Gather(heddle.IN_PLACE, out, root=root)
            check(f"Gather IN_PLACE {case} n={n}", out, np.concatenate(blocks))
        else:
            comm.Gather(blocks[r], None, root=root)

        out = np.zeros(n * p, dtype=dt)
        comm.Allgather(blocks[r], out)
        check(f"Allgather {case} n={n}", out, np.concatenate(blocks))

        out = np.zeros(n * p, dtype=dt)
        out[n * r : n * (r + 1)] = blocks[r]
        comm.Allgather(heddle.IN_PLACE, out)
        check(f"Allgather IN_PLACE {case} n={n}", out, np.concatenate(blocks))

        full = [inputs(q, dt, n * p, case + "-scatter") for q in range(p)]
        out = np.zeros(n, dtype=dt)
        comm.Scatter(full[root] if r == root else None, out, root=root)
        check(f"Scatter {case} n={n}", out, full[root][n * r : n * (r + 1)])
        if r == root:
            comm.Scatter(full[root], heddle.IN_PLACE, root=root)
        else:
            out = np.zeros(n, dtype=dt)
            comm.Scatter(None, out, root=root)
            check(f"Scatter (root IN_PLACE) {case} n={n}", out, full[root][n * r : n * (r + 1)])

        out = np.zeros(n * p, dtype=dt)
        comm.Alltoall(full[r], out)
        want = np.concatenate([full[q][n * r : n * (r + 1)] for q in range(p)])
        check(f"Alltoall {case} n={n}", out, want)
        x = full[r].copy()
        comm.Alltoall(heddle.IN_PLACE, x)
        check(f"Alltoall IN_PLACE {case} n={n}", x, want)

# --- v variants: uneven counts ---------------------------------------------------------
counts = [q + 1 for q in range(p)]
blocks = [inputs(q, np.float64, counts[q], "v") for q in range(p)]
root = p - 1
out = np.zeros(sum(counts)) if r == root else None
comm.Gatherv(blocks[r], [out, counts] if r == root else None, root=root)
if r == root:
    check("Gatherv", out, np.concatenate(blocks))
out = np.zeros(sum(counts))
comm.Allgatherv(blocks[r], [out, counts])
check("Allgatherv", out, np.concatenate(blocks))
out = np.zeros(counts[r])
everything = np.concatenate(blocks)
comm.Scatterv([everything, counts] if r == 0 else None, out, root=0)
check("Scatterv", out, blocks[r])
# Alltoallv: rank i sends i + j + 1 int64 values to rank j.
send_counts = [r + j + 1 for j in range(p)]
recv_counts = [i + r + 1 for i in range(p)]
payload = lambda i, j: np.full(i + j + 1, 100 * i + j, dtype=np.int64)  # noqa: E731
send = np.concatenate([payload(r, j) for j in range(p)])
out = np.zeros(sum(recv_counts), dtype=np.int64)
comm.Alltoallv([send, send_counts], [out, recv_counts])
check("Alltoallv", out, np.concatenate([payload(i, r) for i in range(p)]))

# With displacements (mpi4py's [buf, (counts, displs)]): blocks in reverse rank order with
# a gap of 2 before each; the gaps keep their -1.
displs = []
at = 0
for q in reversed(range(p)):
    at += 2
    displs.append(at)
    at += counts[q]
displs.reverse()  # rank q's block starts at displs[q]
width = at


def placed(blocks_by_rank):
    want = np.full(width, -1.0)
    for q in range(p):
        want[displs[q] : displs[q] + counts[q]] = blocks_by_rank[q]
    return want


out = np.full(width, -1.0) if r == root else None
comm.Gatherv(blocks[r], [out, (counts, displs)] if r == root else None, root=root)
if r == root:
    check("Gatherv displs", out, placed(blocks))
out = np.full(width, -1.0)
comm.Allgatherv(blocks[r], [out, counts, displs])
check("Allgatherv displs", out, placed(blocks))
out = np.zeros(counts[r])
spread = placed(blocks)
comm.Scatterv([spread, (counts, displs)] if r == 0 else None, out, root=0)
check("Scatterv displs", out, blocks[r])
# Alltoallv with the received blocks in reverse order and the sent ones packed.
recv_displs = [sum(recv_counts[i + 1 :]) for i in range(p)]
out = np.zeros(sum(recv_counts), dtype=np.int64)
comm.Alltoallv([send, send_counts], [out, (recv_counts, recv_displs)])
want = np.concatenate([payload(i, r) for i in reversed(range(p))])
check("Alltoallv displs", out, want)
try:
    comm.Allgatherv(blocks[r], [np.zeros(width), counts, [width] * p])
    raise AssertionError("a block past the end was accepted")
except heddle.ArgumentError as e:
    assert "block of rank 0" in str(e) and "past the buffer" in str(e), e

# Send and receive buffers that are overlapping views of one array: as if sendbuf were
# copied first (rank i's array is arange + 100 i).
base = lambda i, n: np.arange(n, dtype=np.float64) + 100 * i  # noqa: E731
a = base(r, 3 * p + 1)
comm.Allgather(a[1:4], a[0 : 3 * p])
check(
    "Allgather, overlapping views",
    a[0 : 3 * p],
    np.concatenate([base(i, 4)[1:4] for i in range(p)]),
)
a = base(r, 3 * p + 1)
comm.Alltoall(a[1:], a[:-1])
check(
    "Alltoall, overlapping views",
    a[:-1],
    np.concatenate([base(i, 3 * p + 1)[1 + 3 * r : 4 + 3 * r] for i in range(p)]),
)
a = base(r, 4)
comm.Allreduce(a[1:4], a[0:3], op=heddle.SUM)
check("Allreduce, overlapping views", a[0:3], sum(base(i, 4)[1:4] for i in range(p)))
a = base(r, 3 * p + 1)
comm.Allgatherv(a[1:4], [a[0 : 3 * p], [3] * p])
check(
    "Allgatherv, overlapping views",
    a[0 : 3 * p],
    np.concatenate([base(i, 4)[1:4] for i in range(p)]),
)

# A read-only root buffer (numpy over bytes) is broadcast from a private copy.
ro = np.frombuffer(bytes(range(1, 65)), dtype=np.uint8)
buf = ro if r == 0 else np.zeros(64, dtype=np.uint8)
comm.Bcast(buf, root=0)
check("Bcast from a read-only root buffer", buf, np.arange(1, 65, dtype=np.uint8))

# Non-numpy buffers: bytearray, array.array, memoryview.
from array import array  # noqa: E402

ba = bytearray(b"heddle!!") if r == 0 else bytearray(8)
comm.Bcast(ba, root=0)
check(
    "Bcast bytearray", np.frombuffer(ba, dtype=np.uint8), np.frombuffer(b"heddle!!", dtype=np.uint8)
)
aa = array("d", [float(r)] * 3)
comm.Allreduce(heddle.IN_PLACE, aa, op=heddle.SUM)
check("Allreduce array.array", np.array(aa), np.full(3, p * (p - 1) / 2))
mv = memoryview(bytearray(np.full(4, r, dtype=np.int32).tobytes())).cast("i")
comm.Allreduce(heddle.IN_PLACE, mv, op=heddle.MAX)
check("Allreduce memoryview", np.array(mv), np.full(4, p - 1, dtype=np.int32))

comm.Barrier()
comm.barrier()
print(json.dumps({"rank": r, "ok": True, "checks": checks}))
