"""heddle.apps.slam on every rank: ``apps_slam.py SCANS PARTICLES OUT.npz``. Rank 0 saves
the run's arrays and prints its numbers as a JSON line; the other ranks check they got
the empty half."""

import json
import sys

import numpy as np

import heddle
from heddle.apps import slam

comm = heddle.init()
scans, particles = int(sys.argv[1]), int(sys.argv[2])
lose = float(sys.argv[4]) if len(sys.argv) > 4 else 0.0
run = slam(particles=particles, beams=120, scans=scans, rate_hz=0, seed=5, lose=lose, reorder=lose)
if comm.rank == 0:
    assert run.map is not None
    np.savez(
        sys.argv[3],
        scans=run.scans,
        poses=run.poses,
        truth=run.truth,
        odometry=run.odometry,
        map=run.map,
    )
    print(
        json.dumps(
            {
                "rmse_m": run.rmse_m,
                "odometry_rmse_m": run.odometry_rmse_m,
                "latencies": len(run.latencies_ms),
                "resamples": run.resamples,
                "missing": run.missing,
                "out_of_order": run.out_of_order,
                "workers": comm.size,
            }
        )
    )
else:
    assert run.map is None and run.poses.shape == (0, 3), "other ranks hold no results"
