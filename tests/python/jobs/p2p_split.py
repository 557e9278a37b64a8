"""Buffer Send/Recv/Sendrecv with tags, and split (checked against numpy references)."""

import json

import numpy as np

import heddle

comm = heddle.init()
r, p = comm.rank, comm.size
checks = 0


def check(name, got, want):
    global checks
    if not np.array_equal(got, want):
        raise AssertionError(f"{name}: rank {r} got {got!r}, expected {want!r}")
    checks += 1


def payload(src, dst, tag, n=1000):
    return np.random.default_rng([src, dst, tag]).standard_normal(n)


# Rank 0 sends each rank two tagged messages; they receive them in the opposite order.
if r == 0:
    for q in range(1, p):
        comm.Send(payload(0, q, 1), dest=q, tag=1)
        comm.Send(payload(0, q, 2, n=10), dest=q, tag=2)
else:
    b2 = np.zeros(50)
    count = comm.Recv(b2, source=0, tag=2)  # a message shorter than the buffer
    assert count == 10, count
    check("Recv tag 2", b2[:10], payload(0, r, 2, n=10))
    b1 = np.empty(1000)
    assert comm.Recv(b1, source=0, tag=1) == 1000
    check("Recv tag 1", b1, payload(0, r, 1))

# A ring exchange of 1 MB messages with Sendrecv.
right, left = (r + 1) % p, (r - 1) % p
out = np.empty(131_072)
n = comm.Sendrecv(payload(r, right, 5, 131_072), dest=right, sendtag=5, recvbuf=out, source=left)
assert n == 131_072
check("Sendrecv ring", out, payload(left, r, 5, 131_072))

# split: parity colors, keys reversing the order.
sub = comm.split(r % 2, key=-r)
members = [q for q in range(p) if q % 2 == r % 2]
assert sub.size == len(members), (sub.size, members)
assert sub.rank == sorted(members, reverse=True).index(r), sub.rank
assert isinstance(sub, heddle.Comm)
x = np.array([float(r)])
sub.Allreduce(heddle.IN_PLACE, x)
check("Allreduce in sub", x, np.array([float(sum(members))]))
got = sub.allgather(r)
check("allgather in sub", np.array(got), np.array(sorted(members, reverse=True)))
# Collectives on the parent still line up after the split.
y = np.array([1])
comm.Allreduce(heddle.IN_PLACE, y)
check("Allreduce in world after split", y, np.array([p]))

# UNDEFINED / None: not a member of any sub-communicator.
sub2 = comm.Split(heddle.UNDEFINED if r == 0 else 1, key=r)
if r == 0:
    assert sub2 is None
else:
    assert sub2.size == p - 1 and sub2.rank == r - 1
    z = np.array([r], dtype=np.int32)
    sub2.Allreduce(heddle.IN_PLACE, z, op=heddle.MAX)
    check("Allreduce in sub2", z, np.array([p - 1], dtype=np.int32))
    # Nested split.
    sub3 = sub2.split(0, key=0)
    assert sub3.size == p - 1
    check(
        "bcast in nested sub",
        np.array(sub3.bcast("hi" if sub3.rank == 0 else None) == "hi"),
        np.array(True),
    )

comm.Barrier()
print(json.dumps({"rank": r, "ok": True, "checks": checks}))
