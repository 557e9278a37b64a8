"""Sort, mpi4py: sample sort. Every rank reads its range of records, splitters come from an
allgather of key samples, records are bucketed by splitter and exchanged with Alltoallv
(bytes), then each rank sorts its bucket with numpy and writes its part file (rank order =
key order). Keys compare as (first 8 bytes, last 2 bytes) big-endian."""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

from mpi4py import MPI

LINE = 101
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
args = common.parser(__doc__).parse_args()
comm.Barrier()
t_ready = time.perf_counter()


def key_hi_lo(rec):
    k = np.ascontiguousarray(rec[:, :10])
    return (
        k[:, :8].copy().view(">u8").ravel().astype(np.uint64),
        k[:, 8:10].copy().view(">u2").ravel().astype(np.uint64),
    )


t0 = time.perf_counter()
lo, hi = common.record_ranges(args.input, size)[rank]
rec = np.fromfile(args.input, np.uint8, count=(hi - lo) * LINE, offset=lo * LINE).reshape(-1, LINE)
khi, _ = key_hi_lo(rec)
sample = np.concatenate(comm.allgather(khi[:: max(1, len(khi) // 10_000)]))
splitters = np.quantile(sample, np.arange(1, size) / size, method="lower").astype(np.uint64)
bucket = np.searchsorted(splitters, khi, side="right")
order = np.argsort(bucket, kind="stable")
send = rec[order]
del rec, order, khi
scounts = np.bincount(bucket, minlength=size).astype(np.int64) * LINE
rcounts = np.empty(size, np.int64)
comm.Alltoall(scounts, rcounts)
sdispl = np.concatenate([[0], np.cumsum(scounts)[:-1]])
rdispl = np.concatenate([[0], np.cumsum(rcounts)[:-1]])
recv = np.empty(int(rcounts.sum()), np.uint8)
comm.Alltoallv([send, (scounts, sdispl), MPI.BYTE], [recv, (rcounts, rdispl), MPI.BYTE])
del send
mine = recv.reshape(-1, LINE)
rhi, rlo = key_hi_lo(mine)
mine = mine[np.lexsort((rlo, rhi))]
Path(args.output).mkdir(parents=True, exist_ok=True)
with open(os.path.join(args.output, f"part-{rank:05d}"), "wb") as f:
    f.write(mine.tobytes())
job_s = comm.allreduce(time.perf_counter() - t0, op=MPI.MAX)

if rank == 0:
    t1 = time.perf_counter()
    ok, detail = common.reference.check_sorted_dir(args.output, args.ref)
    verify_s = time.perf_counter() - t1
    common.emit(
        system="mpi",
        variant="mpi4py + numpy sample sort",
        workload="sort",
        ok=ok,
        detail=detail,
        job_s=round(job_s, 3),
        verify_s=round(verify_s, 3),
        t_ready=t_ready,
    )
    comm.Abort(1) if not ok else None
