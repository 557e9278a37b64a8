"""K-means, Spark RDD of numpy blocks (cached), one map + reduce of per-center partial sums
per iteration with the centers shipped in the closure (Lloyd's algorithm, the first k
points as initial centers). The cached RDD is materialized before the clock starts."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session


def partial(block, centers):
    d = ((block[:, None, :] - centers[None, :, :]) ** 2).sum(-1)
    labels = d.argmin(1)
    k = len(centers)
    return np.stack(
        [
            np.bincount(labels, weights=block[:, 0], minlength=k),
            np.bincount(labels, weights=block[:, 1], minlength=k),
            np.bincount(labels, minlength=k).astype(np.float64),
        ],
        axis=1,
    )


args = common.parser(__doc__).parse_args()
spark = session("kmeans-numpy", args.workers, args.partitions)
sc = spark.sparkContext
t_ready = time.perf_counter()

points = np.load(args.input)
blocks = sc.parallelize(np.array_split(points, args.partitions), args.partitions).cache()
blocks.count()

t0 = time.perf_counter()
centers = points[: args.k].copy()
for _ in range(args.iterations):
    sums = blocks.map(lambda b, c=centers: partial(b, c)).reduce(np.add)
    nonempty = sums[:, 2] > 0
    centers = centers.copy()
    centers[nonempty] = sums[nonempty, :2] / sums[nonempty, 2:3]
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_kmeans(centers, args.ref)
verify_s = time.perf_counter() - t1
spark.stop()
common.emit(
    system="spark",
    variant="RDD numpy blocks",
    workload="kmeans",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
