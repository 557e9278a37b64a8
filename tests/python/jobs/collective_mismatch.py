"""Ranks call Allreduce with different arguments: rank 1 passes 6 elements where the
others pass 8 (or, with --op, MAX where the others pass SUM). A rank that sees the
mismatch raises heddle.ArgumentError naming both calls; the job is aborted, so every
other rank raises heddle.JobAborted naming them too. No rank gets a result."""

import json
import sys

import numpy as np

import heddle

comm = heddle.init()
r = comm.rank
report: dict[str, object] = {"rank": r}
by_op = "--op" in sys.argv
n = 6 if (r == 1 and not by_op) else 8
op = heddle.MAX if (r == 1 and by_op) else heddle.SUM
buf = np.ones(n)
try:
    comm.Allreduce(heddle.IN_PLACE, buf, op=op)
    comm.barrier()
    report["result"] = buf.tolist()
except heddle.ArgumentError as e:
    report["mismatch"] = str(e)
except heddle.JobAborted as e:
    report["aborted"] = str(e)
print(json.dumps(report), flush=True)
