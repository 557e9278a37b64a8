"""DA-SMACOF multidimensional scaling with ``heddle.apps.mds``: the dissimilarity matrix's
rows split over the ranks, the coordinates gathered on each every iteration (the Rust
``mds`` example's algorithm, called from Python with the GIL released). Prints one JSON
line with the normalized stress and the job time (the matrix loaded before the clock),
and writes the coordinates (rank 0) with ``--output``.

    heddle run -n 2 examples/python/mds.py --input D.npy --dim 3 --output X.npy
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import heddle
from heddle.apps import mds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True, help="dissimilarities (.npy, n × n)")
    ap.add_argument("--dim", type=int, default=3)
    ap.add_argument("--weights", help="weights (.npy, n × n)")
    ap.add_argument("--output", help="write the coordinates here (.npy, n × dim)")
    ap.add_argument("--no-anneal", action="store_true")
    ap.add_argument("--max-iter", type=int, default=300)
    args = ap.parse_args()
    comm = heddle.init()
    delta = np.load(args.input)
    weights = np.load(args.weights) if args.weights else None
    comm.barrier()
    t0 = time.perf_counter()
    coords, stress = mds(
        delta,
        dim=args.dim,
        weights=weights,
        anneal=not args.no_anneal,
        max_iter=args.max_iter,
        comm=comm,
    )
    job_s = comm.allreduce(time.perf_counter() - t0, op=heddle.MAX)
    if comm.rank == 0 and args.output:
        pending = f"{args.output}.pending-{os.getpid()}.npy"
        np.save(pending, coords)
        os.replace(pending, args.output)
    # The check: finite coordinates, and a stress below that of all points at the centre
    # (1: the fit found structure).
    ok = bool(np.isfinite(coords).all()) and stress < 1.0
    if comm.rank == 0:
        report = {"example": "mds", "api": "python", "ok": ok, "points": len(coords)}
        report.update(dim=args.dim, stress=stress, job_s=round(job_s, 3), workers=comm.size)
        print(json.dumps(report))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
