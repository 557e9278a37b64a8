"""heddle.apps.mds on every rank: ``apps_mds.py D.npy OUT.npy [W.npy]``. Every rank passes
the matrix (rank 0 as a path, the others as an array: both forms), all must return the
same coordinates; rank 0 saves them and prints the stress as a JSON line."""

import json
import sys

import numpy as np

import heddle
from heddle.apps import mds

comm = heddle.init()
weights = sys.argv[3] if len(sys.argv) > 3 else None
distances = sys.argv[1] if comm.rank == 0 else np.load(sys.argv[1])
coords, stress = mds(distances, dim=3, weights=weights)
every = comm.allgather(coords.tobytes())
assert all(c == every[0] for c in every), "ranks returned different coordinates"
if comm.rank == 0:
    np.save(sys.argv[2], coords)
    print(json.dumps({"stress": stress, "points": len(coords), "workers": comm.size}))
