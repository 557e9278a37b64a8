"""Word count, Dask bag (read_text in blocks of lines, a Counter per partition, Counters
merged in a tree reduction: bag.reduction), on a distributed LocalCluster."""

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import client

import dask.bag as db


def count_partition(lines):
    c = Counter()
    for line in lines:
        c.update(line.split())
    return c


def merge(counters):
    total = Counter()
    for c in counters:
        total.update(c)
    return total


if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    c = client(args.workers)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    size = Path(args.input).stat().st_size
    lines = db.read_text(args.input, blocksize=max(1 << 20, size // args.partitions + 1))
    counts = lines.reduction(count_partition, merge).compute()
    job_s = time.perf_counter() - t0

    t1 = time.perf_counter()
    ok, detail = common.reference.check_wordcount(counts, args.ref)
    verify_s = time.perf_counter() - t1
    c.close()
    common.emit(
        system="dask",
        variant="bag, Counter per partition",
        workload="wordcount",
        ok=ok,
        detail=detail,
        job_s=round(job_s, 3),
        verify_s=round(verify_s, 3),
        t_ready=t_ready,
    )
    sys.exit(0 if ok else 1)
