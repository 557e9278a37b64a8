"""K-means, Ray tasks over numpy blocks held in the object store (ray.put once); each
iteration one remote task per block returns per-center partial sums (Lloyd's algorithm from
the first k points). The blocks are in the object store before the clock starts."""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import init

ray = init(common.parser(__doc__).parse_args().workers)


@ray.remote
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
t_ready = time.perf_counter()
points = np.load(args.input)
blocks = [ray.put(b) for b in np.array_split(points, args.partitions)]
ray.get(partial.remote(blocks[0], points[: args.k]))  # workers started, function shipped

t0 = time.perf_counter()
centers = points[: args.k].copy()
for _ in range(args.iterations):
    c = ray.put(centers)
    sums = sum(ray.get([partial.remote(b, c) for b in blocks]))
    nonempty = sums[:, 2] > 0
    centers = centers.copy()
    centers[nonempty] = sums[nonempty, :2] / sums[nonempty, 2:3]
job_s = time.perf_counter() - t0

ray.shutdown()
common.finish(
    lambda: common.reference.check_kmeans(centers, args.ref),
    system="ray",
    variant="tasks over numpy blocks",
    workload="kmeans",
    job_s=job_s,
    t_ready=t_ready,
)
