"""MDS, scikit-learn: ``MDS(n_components=3, metric_mds=True, n_init=1)`` on the
precomputed dissimilarities from a random start (SMACOF, at most 300 iterations, its
default tolerance), its BLAS pools sized to ``--workers``. The matrix is loaded before the
clock starts, as for every system; the coordinates are written to ``--output``/coords.npy
and their normalized stress recomputed by reference.check_mds."""

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
    from sklearn.manifold import MDS

    delta = np.load(args.input)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    coords = MDS(
        n_components=common.reference.MDS_DIM,
        metric_mds=True,
        metric="precomputed",
        n_init=1,
        init="random",
        random_state=0,
        normalized_stress=False,
    ).fit_transform(delta)
    job_s = time.perf_counter() - t0

    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / "coords.npy", coords)
    common.finish(
        lambda: common.reference.check_mds(out / "coords.npy", args.input),
        system="sklearn",
        variant=f"MDS(metric_mds=True, n_init=1) (scikit-learn {sklearn.__version__})",
        workload="mds",
        job_s=job_s,
        t_ready=t_ready,
    )
