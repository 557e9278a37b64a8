"""Object collectives and object send/recv (pickle protocol 5, large arrays out of band),
checked against values every rank can compute itself."""

import json

import numpy as np

import heddle

comm = heddle.init()
r, p = comm.rank, comm.size
checks = 0


def value(rank, big=False):
    """Rank `rank`'s object: nested containers, scalars and numpy arrays (big ones travel
    out of band)."""
    n = 50_000 if big else 5
    return {
        "rank": rank,
        "name": f"worker-{rank}",
        "arr": np.arange(n, dtype=np.float64) * (rank + 1),
        "ints": np.full(3, rank, dtype=np.int16),
        "strided": np.arange(2 * n, dtype=np.int32)[::2] + rank,  # not contiguous: pickled in band
        "nested": [(rank, str(rank))] * (rank + 1),
    }


def same(a, b):
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return (
            isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b)
        )
    return a == b


def check(name, got, want):
    global checks
    if not same(got, want):
        raise AssertionError(f"{name}: rank {r} got {got!r}, expected {want!r}")
    checks += 1


for big in (False, True):
    tag = "big" if big else "small"
    for root in range(p):
        got = comm.bcast(value(root, big) if r == root else None, root=root)
        check(f"bcast {tag} root={root}", got, value(root, big))
        if r != root and big:
            assert got["arr"].flags.writeable, "out-of-band arrays arrive writable"

    root = p - 1
    got = comm.gather(value(r, big), root=root)
    check(f"gather {tag}", got, [value(q, big) for q in range(p)] if r == root else None)

    check(f"allgather {tag}", comm.allgather(value(r, big)), [value(q, big) for q in range(p)])

    got = comm.scatter([value(q, big) for q in range(p)] if r == 0 else None, root=0)
    check(f"scatter {tag}", got, value(r, big))

    send = [{"from": r, "to": j, "v": value(r * p + j, big)} for j in range(p)]
    got = comm.alltoall(send)
    check(
        f"alltoall {tag}", got, [{"from": i, "to": r, "v": value(i * p + r, big)} for i in range(p)]
    )

# Reductions on objects: numbers, numpy arrays (element-wise), strings, a custom function.
check("allreduce sum", comm.allreduce(r + 1), p * (p + 1) // 2)
check("allreduce default op", comm.allreduce(r), p * (p - 1) // 2)
check("allreduce max", comm.allreduce(r, op=heddle.MAX), p - 1)
check("allreduce min", comm.allreduce(r, op=heddle.MIN), 0)
check("allreduce prod", comm.allreduce(r + 1, op=heddle.PROD), int(np.prod(np.arange(1, p + 1))))
check("allreduce land", comm.allreduce(r > 0, op=heddle.LAND), False)
check("allreduce lor", comm.allreduce(r > 0, op=heddle.LOR), p > 1)
check("allreduce bxor", comm.allreduce(1 << r, op=heddle.BXOR), (1 << p) - 1)
arrays = [np.arange(6, dtype=np.int64) * (q - 1) for q in range(p)]
check("allreduce array sum", comm.allreduce(arrays[r]), np.add.reduce(arrays))
check("allreduce array max", comm.allreduce(arrays[r], op=heddle.MAX), np.maximum.reduce(arrays))
check("allreduce string", comm.allreduce(str(r)), "".join(str(q) for q in range(p)))
check("allreduce lambda", comm.allreduce([r], op=lambda a, b: a + b), list(range(p)))
check("scan sum", comm.scan(r + 1), (r + 1) * (r + 2) // 2)
check("scan string", comm.scan(str(r)), "".join(str(q) for q in range(r + 1)))
check("exscan string", comm.exscan(str(r)), "".join(str(q) for q in range(r)) or None)
got = comm.reduce(arrays[r], op=heddle.MIN, root=1 % p)
check("reduce array min", got, np.minimum.reduce(arrays) if r == 1 % p else None)

# Point to point: a ring with sendrecv (no deadlock whatever the size) ...
right, left = (r + 1) % p, (r - 1) % p
got = comm.sendrecv(value(r, True), dest=right, sendtag=7, source=left)
check("sendrecv ring", got, value(left, True))
# ... and ordered send/recv with tags; big payloads (out of band) included.
if r == 0:
    for q in range(1, p):
        comm.send(value(q, big=q % 2 == 1), dest=q, tag=q)
    for q in range(1, p):
        check(
            f"recv from {q}", comm.recv(source=q, tag=100 + q), {"echo": value(q, big=q % 2 == 1)}
        )
else:
    got = comm.recv(source=0, tag=r)
    check("recv from 0", got, value(r, big=r % 2 == 1))
    comm.send({"echo": got}, dest=0, tag=100 + r)
# Messages with different tags are matched by tag, not by arrival order.
if p >= 2 and r in (0, 1):
    other = 1 - r
    comm.send(("first", r), dest=other, tag=1)
    comm.send(("second", r), dest=other, tag=2)
    check("recv tag 2 first", comm.recv(source=other, tag=2), ("second", other))
    check("recv tag 1 then", comm.recv(source=other, tag=1), ("first", other))

comm.barrier()
print(json.dumps({"rank": r, "ok": True, "checks": checks}))
