"""K-means, scikit-learn: ``KMeans(algorithm="lloyd")`` from the first k points, one init,
exactly ``--iterations`` Lloyd steps (tol 0), its BLAS/OpenMP pools sized to ``--workers``.
The points are loaded before the clock starts, as for every system."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(args.workers)
    import numpy as np
    import sklearn
    from sklearn.cluster import KMeans

    points = np.load(args.input)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    km = KMeans(
        n_clusters=args.k,
        init=points[: args.k].copy(),
        n_init=1,
        max_iter=args.iterations,
        tol=0.0,
        algorithm="lloyd",
    ).fit(points)
    job_s = time.perf_counter() - t0

    common.finish(
        lambda: common.reference.check_kmeans(km.cluster_centers_, args.ref),
        system="sklearn",
        variant=f"KMeans(algorithm='lloyd') (scikit-learn {sklearn.__version__})",
        workload="kmeans",
        job_s=job_s,
        t_ready=t_ready,
    )
