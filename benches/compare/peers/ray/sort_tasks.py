"""Sort, Ray tasks (the shuffle pattern of Ray's docs: map tasks with num_returns=R, reduce
tasks taking one return of every map): splitters from a sample of keys; each map task reads
its range of records and splits it by splitter; each reduce task sorts its records with
numpy and writes one part file. Keys compare as (first 8 bytes, last 2 bytes) big-endian."""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import init

LINE = 101
args = common.parser(__doc__).parse_args()
REDUCERS = args.workers * 2
ray = init(args.workers)


def key_hi_lo(rec):
    k = np.ascontiguousarray(rec[:, :10])
    return (
        k[:, :8].copy().view(">u8").ravel().astype(np.uint64),
        k[:, 8:10].copy().view(">u2").ravel().astype(np.uint64),
    )


@ray.remote(num_returns=REDUCERS)
def split(path, lo, hi, splitters):
    rec = np.fromfile(path, np.uint8, count=(hi - lo) * LINE, offset=lo * LINE).reshape(-1, LINE)
    khi, _ = key_hi_lo(rec)
    bucket = np.searchsorted(splitters, khi, side="right")
    order = np.argsort(bucket, kind="stable")
    bounds = np.searchsorted(bucket[order], np.arange(REDUCERS + 1))
    rec = rec[order]
    return tuple(rec[bounds[r] : bounds[r + 1]] for r in range(REDUCERS))


@ray.remote
def sort_and_write(out, r, *parts):
    rec = np.concatenate(parts)
    khi, klo = key_hi_lo(rec)
    rec = rec[np.lexsort((klo, khi))]
    with open(os.path.join(out, f"part-{r:05d}"), "wb") as f:
        f.write(rec.tobytes())
    return len(rec)


t_ready = time.perf_counter()
t0 = time.perf_counter()
n = os.path.getsize(args.input) // LINE
sample = np.memmap(args.input, np.uint8, mode="r", shape=(n, LINE))[:: max(1, n // 10_000)]
shi, _ = key_hi_lo(np.asarray(sample))
splitters = np.quantile(shi, np.arange(1, REDUCERS) / REDUCERS, method="lower").astype(np.uint64)
maps = [
    split.remote(args.input, lo, hi, splitters)
    for lo, hi in common.record_ranges(args.input, args.partitions)
]
Path(args.output).mkdir(parents=True, exist_ok=True)
counts = ray.get(
    [sort_and_write.remote(args.output, r, *[m[r] for m in maps]) for r in range(REDUCERS)]
)
job_s = time.perf_counter() - t0
ray.shutdown()

common.finish(
    lambda: common.reference.check_sorted_dir(args.output, args.ref),
    system="ray",
    variant="tasks, numpy sample sort",
    workload="sort",
    job_s=job_s,
    t_ready=t_ready,
)
