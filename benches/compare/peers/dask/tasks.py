"""Trivial-task overhead, Dask futures: client.map of a squaring function over N numbers
(N tasks), gathered and summed."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import client


def square(i):
    return i * i


if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    c = client(args.workers)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    total = sum(c.gather(c.map(square, range(args.tasks), pure=False)))
    job_s = time.perf_counter() - t0

    want = common.reference.tasks_reference(args.tasks)
    ok = total == want
    c.close()
    common.emit(
        system="dask",
        variant="futures (client.map)",
        workload="tasks",
        ok=ok,
        detail=f"sum {total}, want {want}",
        job_s=round(job_s, 3),
        verify_s=0.0,
        t_ready=t_ready,
    )
    sys.exit(0 if ok else 1)
