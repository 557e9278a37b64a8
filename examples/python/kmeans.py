"""K-means with heddle.data and numpy: the points are cached in memory as numpy blocks,
partitioned over the workers; each iteration maps every block to its partial sums
(nearest center per point and per center the sum and count of its points, in one native
pass: ``heddle.ml.nearest_sums``) and reduces them on every worker, which updates the
centers. Rank 0 checks the result against a plain numpy Lloyd's algorithm and prints
one JSON line (the Rust example's).

    heddle run -n 2 examples/python/kmeans.py --generate --seed 1
    heddle run -n 4 examples/python/kmeans.py --input points.npy --k 16 --output /tmp/km

``--generate`` makes the points of the Rust ``kmeans --generate`` (the same formula).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import heddle
from heddle.data import Session
from heddle.ml import nearest_sums

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common

BLOCK_POINTS = 65_536


def update(centers: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """New centers from summed coordinates and counts (a center without points stays)."""
    new = centers.copy()
    has = sums[:, 2] > 0
    new[has] = sums[has, :2] / sums[has, 2:3]
    return new


def lloyd(points: np.ndarray, first: np.ndarray, iterations: int) -> np.ndarray:
    """Plain Lloyd's algorithm on all the points at once (the reference)."""
    centers = first.copy()
    for _ in range(iterations):
        nearest = np.concatenate(
            [
                ((points[i : i + 100_000, None, :] - centers[None, :, :]) ** 2)
                .sum(axis=2)
                .argmin(axis=1)
                for i in range(0, len(points), 100_000)
            ]
        )
        for c in range(len(centers)):
            mine = points[nearest == c]
            if len(mine):
                centers[c] = mine.mean(axis=0)
    return centers


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--input", type=Path, help="points as CSV (x,y lines) or .npy (float64, shape (n, 2))"
    )
    p.add_argument(
        "--generate",
        action="store_true",
        help="generate --points points in 16 Gaussian blobs instead",
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the generated points")
    p.add_argument("--points", type=int, default=common.POINTS, help="points to generate")
    p.add_argument(
        "--k", type=int, default=common.BLOBS, help="centers (the first k points start as centers)"
    )
    p.add_argument("--iterations", type=int, default=10, help="iterations")
    p.add_argument("--output", type=Path, help="write the final centers as CSV (centers.csv) here")
    p.add_argument(
        "--no-verify", action="store_true", help="skip the check against a plain Lloyd's algorithm"
    )
    args = p.parse_args()
    if (args.input is None) == (not args.generate):
        p.error("give --input FILE or --generate")

    comm = heddle.init()
    s = Session(comm)
    if args.input is not None:
        everything = common.read_points(args.input)  # every worker: its blocks are its share
        n = len(everything)
        blocks = s.from_numpy(everything, BLOCK_POINTS)
        first = np.array(everything[: args.k])
    else:
        n, seed = args.points, args.seed
        blocks = s.generate(
            -(-n // BLOCK_POINTS),
            lambda b: common.points(seed, b * BLOCK_POINTS, min(n, (b + 1) * BLOCK_POINTS)),
        )
        first = common.points(seed, 0, min(args.k, n))
    if args.k <= 0 or n < args.k:
        p.error(f"--k {args.k} needs at least that many points (there are {n})")
    points = blocks.map(np.ascontiguousarray).cache()

    comm.barrier()
    start = time.perf_counter()
    centers = first.copy()
    for _ in range(args.iterations):
        # `c=centers` binds this iteration's centers (not whatever `centers` is at call time).
        sums = points.map(lambda block, c=centers: nearest_sums(block, c)).reduce(np.add)
        centers = update(centers, sums)
    job_s = comm.allreduce(time.perf_counter() - start, op=max)

    if comm.rank == 0:
        checked = time.perf_counter()
        if args.no_verify:
            err, ok = None, True
        else:
            everything = (
                common.read_points(args.input)
                if args.input is not None
                else common.points(args.seed, 0, n)
            )
            want = lloyd(np.asarray(everything), first, args.iterations)
            err = float(np.abs(centers - want).max())
            ok = err < 1e-6
        verify_s = time.perf_counter() - checked
        if args.output:
            args.output.mkdir(parents=True, exist_ok=True)
            np.savetxt(
                args.output / "centers.csv",
                centers,
                delimiter=",",
                header="x,y",
                comments="",
                fmt="%.17g",
            )
        line = {
            "example": "kmeans",
            "api": "python",
            "ok": ok,
            "points": n,
            "k": args.k,
            "iterations": args.iterations,
            "max_center_error": None if err is None else float(f"{err:.3e}"),
            "job_s": round(job_s, 3),
            # The check's own time, which the comparison suite leaves out of the whole run.
            "verify_s": round(verify_s, 3),
            "workers": comm.size,
        }
        print(json.dumps(line))
        if not ok:
            print("error: the centers differ from a plain Lloyd's algorithm", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
