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

    c.close()
    common.finish(
        lambda: common.reference.check_wordcount(counts, args.ref),
        system="dask",
        variant="bag, Counter per partition",
        workload="wordcount",
        job_s=job_s,
        t_ready=t_ready,
    )
