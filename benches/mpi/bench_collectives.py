"""MPI peer of ``heddle bench collectives --vs mpi``: Open MPI through mpi4py.

Run under mpirun (setup.sh makes the venv; README.md explains the flags, which are the ones
``heddle bench collectives`` uses; add ``--oversubscribe`` for more ranks than cores)::

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\
    mpirun -n 2 --bind-to none --mca pml ob1 --mca btl self,vader \\
        --mca btl_vader_single_copy_mechanism none \\
        benches/.venv-mpi/bin/python benches/mpi/bench_collectives.py

The Heddle side (``target/release/examples/bench_collectives``, run under ``heddle run -n R``)
implements exactly the semantics below, takes the same flags and prints the same JSON lines with
``"system": "heddle"``. This docstring is the specification of both.

Flags
-----
``--sizes``        comma-separated message sizes in bytes (default 8,1024,65536,1048576,16777216)
``--collectives``  comma-separated subset of allreduce,iallreduce,scan,broadcast,allgather,
                   alltoall,ring,pingpong,bandwidth (default: all, in that order)
``--iters N``      timed iterations for every size (default: the size-scaled rule below)
``--warmup N``     untimed iterations before the timed ones (default: the rule below)
``--quick``        ten times fewer iterations (smoke test; numbers are noisier)

Iterations (when ``--iters`` is not given), with B the reported ``bytes`` of the measurement
(WINDOW * 16 MiB for bandwidth): ``iters = clamp(floor(2e8 / B), 20, 2000)``; with ``--quick``:
``iters = clamp(floor(2e7 / B), 5, 200)``. ``warmup = clamp(iters // 10, 2, 100)`` unless
``--warmup`` is given. (clamp(x, lo, hi) = min(max(x, lo), hi).)

Collectives (``bytes`` is a value from --sizes; ``size`` is the world size; u8 = unsigned byte)
----------------------------------------------------------------------------------------------
allreduce  f64 sum. Each rank contributes n = max(1, bytes // 8) f64 values and every rank ends
           with the element-wise sum (the in-place-equivalent result: as if each rank's vector
           were replaced by the sum). MPI uses Allreduce(send, recv) with a constant send buffer,
           so every iteration computes the same thing. A side that only has an in-place API
           must restore its inputs before each iteration, outside the timed region.
           Input: rank r, element i -> float(r + 1 + i % 7).
           Expected: size * (size + 1) / 2 + size * (i % 7)  (exact in f64).
           The reported ``bytes`` is the per-rank message size, n * 8.
iallreduce allreduce's input, result and check, through the non-blocking call waited for at
           once: MPI ``Iallreduce(send, recv).Wait()``, Heddle ``iallreduce(buf).wait()``.
broadcast  ``bytes`` u8 from root 0 to every rank. Root content: element i -> (i * 7 + 1) % 251.
allgather  each rank contributes ``bytes`` u8; every rank ends with size * bytes, block r from
           rank r. Rank r's element i -> (i * 7 + r * 13 + 1) % 251.
alltoall   ``bytes`` u8 per peer: send buffer size * bytes, block d goes to rank d; receive
           buffer size * bytes, block s came from rank s. Element i of the block sent by s to
           d -> (s * 31 + d * 17 + i) % 251.
ring       non-blocking point to point: each rank posts Irecv(``bytes`` u8) from rank r - 1 and
           Isend(``bytes`` u8) to rank r + 1 (mod size), then Waitall on both. Rank r's element
           i -> (i * 7 + r) % 251; the received block must be rank r - 1's.
pingpong   ranks 0 and 1 only (other ranks just wait), always 8 bytes (u8), regardless of
           --sizes: rank 0 Send(8 B) to 1, rank 1 Recv then Send the same 8 B back, rank 0 Recv.
           One iteration = one round trip; its time is HALF the round trip measured on rank 0
           (one-way latency). Reported bytes = 8. Requires size >= 2 (skipped otherwise).
bandwidth  ranks 0 and 1 only, always 16 MiB = 16777216 bytes (u8), regardless of --sizes.
           One iteration = WINDOW (= 8) back-to-back blocking Send(16 MiB) from rank 0 to rank 1
           (rank 1 posts the matching blocking Recv), then rank 1 sends a 1-byte ack and rank 0
           receives it. The iteration's time is measured on rank 0 (from before the first Send to
           after the ack Recv) and divided by WINDOW: the reported p50_us / p99_us are
           microseconds per 16 MiB message, and ``gbps`` = bytes / (p50_us * 1e3), i.e.
           10^9 bytes per second at the median. Requires size >= 2.
           Content: element i -> (i * 7 + 1) % 251.

Timing
------
For each (collective, bytes): fill buffers (untimed); Barrier; ``warmup`` untimed iterations;
Barrier; then ``iters`` iterations back to back, with NO barrier between them. Every rank reads
``time.perf_counter_ns()`` (Rust: ``std::time::Instant``) immediately before and after each
operation and keeps the per-iteration durations in an array. After the loop (outside any timed
region) the arrays are combined with an allreduce MAX, so the time of iteration k is the maximum
over ranks of the durations of iteration k. Ranks that take no part (pingpong, bandwidth: ranks
other than 0; rank 1's own timings are not used either) contribute 0. p50 and p99 are taken over
the ``iters`` combined durations with the nearest-rank rule: sort ascending, percentile q is
element ``ceil(q * iters) - 1`` (0-based). Times are reported in microseconds (ns / 1000).

Verification
------------
After the timed loop, one more UNTIMED iteration runs with the destination buffers first reset
(zeros for u8, NaN for f64; for pingpong and bandwidth rank 0 sends the content of the spec and
rank 1 checks what it received, and for pingpong rank 0 also checks the echo). Every rank checks
its result against the closed forms above; the local booleans are combined with an allreduce
LAND (rank 0 and 1 only matter for pingpong/bandwidth). ``verified`` is that combined boolean.

Output
------
Rank 0 prints exactly one JSON object per line per measurement to stdout (anything else goes to
stderr), keys in this order::

    {"system": "mpi", "collective": "allreduce", "ranks": 2, "bytes": 8, "p50_us": 0.957,
     "p99_us": 1.513, "iters": 2000, "verified": true}

(one line; shown wrapped). ``ranks`` is the world size, ``p50_us``/``p99_us`` are rounded to 3
decimals. Bandwidth lines add ``"gbps": 12.2`` (rounded to 3 decimals) after ``verified``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
from mpi4py import MPI

DEFAULT_SIZES = [8, 1024, 65536, 1048576, 16777216]
ALL_COLLECTIVES = [
    "allreduce",
    "iallreduce",
    "scan",
    "broadcast",
    "allgather",
    "alltoall",
    "pingpong",
    "bandwidth",
]
PINGPONG_BYTES = 8
BANDWIDTH_BYTES = 16 * 1024 * 1024
WINDOW = 8


def parse_list(text: str, conv):
    return [conv(x) for x in text.split(",") if x.strip()]


def iterations(bytes_moved: int, args) -> tuple[int, int]:
    if args.iters is not None:
        iters = args.iters
    elif args.quick:
        iters = min(max(int(2e7 // max(bytes_moved, 1)), 5), 200)
    else:
        iters = min(max(int(2e8 // max(bytes_moved, 1)), 20), 2000)
    warmup = args.warmup if args.warmup is not None else min(max(iters // 10, 2), 100)
    return iters, warmup


def percentile(sorted_ns: np.ndarray, q: float) -> float:
    k = max(math.ceil(q * len(sorted_ns)) - 1, 0)
    return float(sorted_ns[k])


def u8_pattern(n: int, offset: int) -> np.ndarray:
    """(i * 7 + offset) % 251 for i in 0..n, as u8."""
    return ((np.arange(n, dtype=np.int64) * 7 + offset) % 251).astype(np.uint8)


class Bench:
    """One (collective, bytes) measurement: setup(), op() timed, verify() after."""

    def __init__(self, comm: MPI.Comm, nbytes: int):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.nbytes = nbytes

    def participates(self) -> bool:
        return True


class Allreduce(Bench):
    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        n = max(1, nbytes // 8)
        self.nbytes = n * 8
        i = np.arange(n, dtype=np.int64)
        self.send = (self.rank + 1 + i % 7).astype(np.float64)
        self.recv = np.zeros(n, dtype=np.float64)
        s = self.size
        self.expected = (s * (s + 1) // 2 + s * (i % 7)).astype(np.float64)

    def op(self):
        self.comm.Allreduce(self.send, self.recv, op=MPI.SUM)

    def verify(self) -> bool:
        self.recv.fill(np.nan)
        self.op()
        return bool(np.array_equal(self.recv, self.expected))


class Iallreduce(Allreduce):
    """Allreduce through the non-blocking call, waited for at once."""

    def op(self):
        self.comm.Iallreduce(self.send, self.recv, op=MPI.SUM).Wait()


class Scan(Allreduce):
    """Allreduce's input; rank r receives the sum over ranks 0..r."""

    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        i = np.arange(self.nbytes // 8, dtype=np.int64)
        r = self.rank
        self.expected = ((r + 1) * (r + 2) // 2 + (r + 1) * (i % 7)).astype(np.float64)

    def op(self):
        self.comm.Scan(self.send, self.recv, op=MPI.SUM)


class Broadcast(Bench):
    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        self.expected = u8_pattern(nbytes, 1)
        self.buf = self.expected.copy() if self.rank == 0 else np.zeros(nbytes, dtype=np.uint8)

    def op(self):
        self.comm.Bcast(self.buf, root=0)

    def verify(self) -> bool:
        if self.rank != 0:
            self.buf.fill(0)
        self.op()
        return bool(np.array_equal(self.buf, self.expected))


class Allgather(Bench):
    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        self.send = u8_pattern(nbytes, self.rank * 13 + 1)
        self.recv = np.zeros(self.size * nbytes, dtype=np.uint8)
        self.expected = np.concatenate([u8_pattern(nbytes, r * 13 + 1) for r in range(self.size)])

    def op(self):
        self.comm.Allgather(self.send, self.recv)

    def verify(self) -> bool:
        self.recv.fill(0)
        self.op()
        return bool(np.array_equal(self.recv, self.expected))


def a2a_block(src: int, dst: int, n: int) -> np.ndarray:
    return ((np.arange(n, dtype=np.int64) + src * 31 + dst * 17) % 251).astype(np.uint8)


class Alltoall(Bench):
    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        r, s = self.rank, self.size
        self.send = np.concatenate([a2a_block(r, d, nbytes) for d in range(s)])
        self.recv = np.zeros(s * nbytes, dtype=np.uint8)
        self.expected = np.concatenate([a2a_block(src, r, nbytes) for src in range(s)])

    def op(self):
        self.comm.Alltoall(self.send, self.recv)

    def verify(self) -> bool:
        self.recv.fill(0)
        self.op()
        return bool(np.array_equal(self.recv, self.expected))


class Ring(Bench):
    """Isend to the right, Irecv from the left, Waitall: non-blocking point to point."""

    def __init__(self, comm, nbytes):
        super().__init__(comm, nbytes)
        self.right, self.left = (self.rank + 1) % self.size, (self.rank - 1) % self.size
        self.send = u8_pattern(nbytes, self.rank)
        self.recv = np.zeros(nbytes, dtype=np.uint8)
        self.expected = u8_pattern(nbytes, self.left)

    def op(self):
        MPI.Request.Waitall(
            [
                self.comm.Irecv(self.recv, source=self.left, tag=3),
                self.comm.Isend(self.send, dest=self.right, tag=3),
            ]
        )

    def verify(self) -> bool:
        self.recv.fill(0)
        self.op()
        return bool(np.array_equal(self.recv, self.expected))


class Pingpong(Bench):
    """Half round trip of 8 bytes between ranks 0 and 1, timed on rank 0."""

    def __init__(self, comm, _nbytes):
        super().__init__(comm, PINGPONG_BYTES)
        self.expected = u8_pattern(PINGPONG_BYTES, 1)
        self.buf = self.expected.copy() if self.rank == 0 else np.zeros(PINGPONG_BYTES, np.uint8)
        self.echo = np.zeros(PINGPONG_BYTES, dtype=np.uint8)

    def participates(self) -> bool:
        return self.rank in (0, 1)

    def op(self):
        if self.rank == 0:
            self.comm.Send(self.buf, dest=1, tag=11)
            self.comm.Recv(self.echo, source=1, tag=12)
        else:
            self.comm.Recv(self.buf, source=0, tag=11)
            self.comm.Send(self.buf, dest=0, tag=12)

    def scale(self) -> float:
        return 0.5

    def verify(self) -> bool:
        if self.rank == 1:
            self.buf.fill(0)
        self.echo.fill(0)
        self.op()
        if self.rank == 0:
            return bool(np.array_equal(self.echo, self.expected))
        return bool(np.array_equal(self.buf, self.expected))


class Bandwidth(Bench):
    """WINDOW blocking sends of 16 MiB from rank 0 to rank 1, then a 1-byte ack."""

    def __init__(self, comm, _nbytes):
        super().__init__(comm, BANDWIDTH_BYTES)
        self.expected = u8_pattern(BANDWIDTH_BYTES, 1)
        self.buf = self.expected.copy() if self.rank == 0 else np.zeros(BANDWIDTH_BYTES, np.uint8)
        self.ack = np.zeros(1, dtype=np.uint8)

    def participates(self) -> bool:
        return self.rank in (0, 1)

    def op(self):
        if self.rank == 0:
            for _ in range(WINDOW):
                self.comm.Send(self.buf, dest=1, tag=21)
            self.comm.Recv(self.ack, source=1, tag=22)
        else:
            for _ in range(WINDOW):
                self.comm.Recv(self.buf, source=0, tag=21)
            self.comm.Send(self.ack, dest=0, tag=22)

    def scale(self) -> float:
        return 1.0 / WINDOW

    def verify(self) -> bool:
        if self.rank == 1:
            self.buf.fill(0)
        self.op()
        return bool(np.array_equal(self.buf, self.expected))


BENCHES = {
    "allreduce": Allreduce,
    "iallreduce": Iallreduce,
    "scan": Scan,
    "broadcast": Broadcast,
    "allgather": Allgather,
    "alltoall": Alltoall,
    "ring": Ring,
    "pingpong": Pingpong,
    "bandwidth": Bandwidth,
}


def run_one(comm: MPI.Comm, name: str, nbytes: int, args) -> dict | None:
    rank, size = comm.Get_rank(), comm.Get_size()
    two_party = name in ("pingpong", "bandwidth")
    if two_party and size < 2:
        if rank == 0:
            print(f"skipping {name}: needs at least 2 ranks", file=sys.stderr)
        return None
    bench = BENCHES[name](comm, nbytes)
    moved = bench.nbytes * (WINDOW if name == "bandwidth" else 1)
    iters, warmup = iterations(moved, args)
    active = bench.participates()
    # Only rank 0's timings count for the two-party benchmarks.
    timed_here = rank == 0 if two_party else True

    times = np.zeros(iters, dtype=np.int64)
    comm.Barrier()
    if active:
        for _ in range(warmup):
            bench.op()
    comm.Barrier()
    if active:
        clock = time.perf_counter_ns
        op = bench.op
        for k in range(iters):
            t0 = clock()
            op()
            t1 = clock()
            times[k] = t1 - t0
    if not timed_here:
        times.fill(0)
    comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)

    ok = np.array([bench.verify() if active else True], dtype=np.bool_)
    comm.Allreduce(MPI.IN_PLACE, ok, op=MPI.LAND)

    scale = bench.scale() if two_party else 1.0
    times.sort()
    p50 = percentile(times, 0.50) * scale / 1e3
    p99 = percentile(times, 0.99) * scale / 1e3
    rec = {
        "system": "mpi",
        "collective": name,
        "ranks": size,
        "bytes": bench.nbytes,
        "p50_us": round(p50, 3),
        "p99_us": round(p99, 3),
        "iters": iters,
        "verified": bool(ok[0]),
    }
    if name == "bandwidth":
        rec["gbps"] = round(bench.nbytes / (p50 * 1e3), 3) if p50 > 0 else 0.0
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default=",".join(map(str, DEFAULT_SIZES)))
    ap.add_argument("--collectives", default=",".join(ALL_COLLECTIVES))
    ap.add_argument("--iters", type=int, default=None)
    ap.add_argument("--warmup", type=int, default=None)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)

    sizes = parse_list(args.sizes, int)
    collectives = parse_list(args.collectives, str.strip)
    unknown = [c for c in collectives if c not in BENCHES]
    if unknown or any(s < 0 for s in sizes):
        if MPI.COMM_WORLD.Get_rank() == 0:
            print(
                f"unknown collectives {unknown} or negative size; "
                f"known: {','.join(ALL_COLLECTIVES)}",
                file=sys.stderr,
            )
        return 2

    comm = MPI.COMM_WORLD
    for name in collectives:
        # The two-party benchmarks have one fixed size each.
        todo = [None] if name in ("pingpong", "bandwidth") else sizes
        for nbytes in todo:
            rec = run_one(comm, name, nbytes if nbytes is not None else 0, args)
            if rec is not None and comm.Get_rank() == 0:
                print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
