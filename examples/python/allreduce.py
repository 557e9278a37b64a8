"""Allreduce with heddle.comm, checked against numpy; rank 0 prints one JSON line.

    python -m heddle run -n 4 examples/python/allreduce.py [--elements 100000] [--iters 10]

Every rank fills a float64 vector from a generator seeded by its rank, sums it with every
other rank's (``Allreduce`` with ``op=heddle.SUM``, in place on the numpy array's memory)
and compares the result with the sum numpy computes from all ranks' inputs, which every
rank can regenerate. It does the same for MAX on int64 and for the object version
(``comm.allreduce``), then prints, on rank 0::

    {"example": "allreduce", "ok": true, "ranks": 4, "elements": 100000, ...}
"""

import argparse
import json
import sys
import time

import numpy as np

import heddle


def inputs(rank: int, n: int) -> np.ndarray:
    # Integers in float64: the sum is exact whatever the order of additions.
    return np.random.default_rng(rank).integers(-1000, 1000, n).astype(np.float64)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--elements", type=int, default=100_000, help="float64 elements per rank")
    parser.add_argument("--iters", type=int, default=10, help="timed Allreduce calls")
    args = parser.parse_args()

    start = time.perf_counter()
    comm = heddle.init()
    rank, size = comm.rank, comm.size
    n = args.elements
    checks = []

    # Buffer API, float64 SUM: every rank gets the element-wise sum.
    x = inputs(rank, n)
    comm.Allreduce(heddle.IN_PLACE, x, op=heddle.SUM)
    expected = np.sum([inputs(r, n) for r in range(size)], axis=0)
    checks.append(bool(np.array_equal(x, expected)))

    # Separate send and receive buffers, int64 MAX.
    mine = np.arange(n, dtype=np.int64) * (rank + 1) % 977
    out = np.empty_like(mine)
    comm.Allreduce(mine, out, op=heddle.MAX)
    checks.append(
        bool(
            np.array_equal(
                out,
                np.max([np.arange(n, dtype=np.int64) * (r + 1) % 977 for r in range(size)], axis=0),
            )
        )
    )

    # Object API: any picklable value.
    checks.append(comm.allreduce(rank + 1) == size * (size + 1) // 2)

    # Timed calls on the float64 vector.
    y = inputs(rank, n)
    comm.Barrier()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        comm.Allreduce(heddle.IN_PLACE, y, op=heddle.MAX)
    per_call = (time.perf_counter() - t0) / max(1, args.iters)
    checks.append(bool(np.array_equal(y, np.max([inputs(r, n) for r in range(size)], axis=0))))

    ok = np.array([all(checks)])
    comm.Allreduce(heddle.IN_PLACE, ok, op=heddle.LAND)
    if rank == 0:
        print(
            json.dumps(
                {
                    "example": "allreduce",
                    "ok": bool(ok[0]),
                    "job_s": round(time.perf_counter() - start, 3),
                    "ranks": size,
                    "elements": n,
                    "checks": len(checks),
                    "allreduce_us": round(per_call * 1e6, 1),
                }
            )
        )
    return 0 if ok[0] else 1


if __name__ == "__main__":
    sys.exit(main())
