"""K-means, mpi4py: every rank holds its share of the points; each iteration computes
per-center partial sums with numpy (in blocks of 65,536 points) and sums them with
Allreduce (Lloyd's algorithm from the first k points). The shares are loaded before the
clock starts."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
args = common.parser(__doc__).parse_args()
points = np.load(args.input, mmap_mode="r")
n = len(points)
mine = np.array(points[n * rank // size : n * (rank + 1) // size])
centers = np.array(points[: args.k])
k = args.k
comm.Barrier()
t_ready = time.perf_counter()

t0 = time.perf_counter()
sums = np.empty((k, 3))
BLOCK = 1 << 16  # points per step: temporaries stay small and reused
for _ in range(args.iterations):
    local = np.zeros((k, 3))
    for lo in range(0, len(mine), BLOCK):
        b = mine[lo : lo + BLOCK]
        labels = ((b[:, None, :] - centers[None, :, :]) ** 2).sum(-1).argmin(1)
        local += np.stack(
            [
                np.bincount(labels, weights=b[:, 0], minlength=k),
                np.bincount(labels, weights=b[:, 1], minlength=k),
                np.bincount(labels, minlength=k).astype(np.float64),
            ],
            axis=1,
        )
    comm.Allreduce(local, sums, op=MPI.SUM)
    nonempty = sums[:, 2] > 0
    centers[nonempty] = sums[nonempty, :2] / sums[nonempty, 2:3]
job_s = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

if rank == 0:
    t1 = time.perf_counter()
    ok, detail = common.reference.check_kmeans(centers, args.ref)
    verify_s = time.perf_counter() - t1
    common.emit(
        system="mpi",
        variant="mpi4py + numpy, Allreduce",
        workload="kmeans",
        ok=ok,
        detail=detail,
        job_s=round(job_s, 3),
        verify_s=round(verify_s, 3),
        t_ready=t_ready,
    )
    comm.Abort(1) if not ok else None
