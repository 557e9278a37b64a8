"""Word count, mpi4py: every rank counts its byte range of the file (whole lines, in blocks)
with a Counter; rank 0 gathers the Counters (pickled) and merges them."""

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

from mpi4py import MPI

BLOCK = 32 << 20
comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
args = common.parser(__doc__).parse_args()
comm.Barrier()
t_ready = time.perf_counter()

t0 = time.perf_counter()
start, end = common.text_ranges(args.input, size)[rank]
counts = Counter()
with open(args.input, "rb") as f:
    if start > 0:
        f.seek(start - 1)
        f.readline()
    pos = f.tell()
    while pos < end:
        data = f.read(min(BLOCK, end - pos))
        if not data.endswith(b"\n"):
            data += f.readline()
        pos = f.tell()
        counts.update(data.split())
parts = comm.gather(counts, root=0)
if rank == 0:
    total = parts[0]
    for c in parts[1:]:
        total.update(c)
job_s = time.perf_counter() - t0

if rank == 0:
    t1 = time.perf_counter()
    ok, detail = common.reference.check_wordcount(total, args.ref)
    verify_s = time.perf_counter() - t1
    common.emit(
        system="mpi",
        variant="mpi4py, Counter + gather",
        workload="wordcount",
        ok=ok,
        detail=detail,
        job_s=round(job_s, 3),
        verify_s=round(verify_s, 3),
        t_ready=t_ready,
    )
    comm.Abort(1) if not ok else None
