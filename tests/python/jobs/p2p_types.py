"""Rank 0 sends float64, rank 1 receives into int32: rank 1 raises heddle.ArgumentError
naming both element types (it used to read the bytes as int32); the job is aborted, so
rank 0's next call raises heddle.JobAborted naming them too. Bytes go anywhere."""

import json

import numpy as np

import heddle

comm = heddle.init()
r = comm.rank
report = {"rank": r}
if r == 0:
    comm.Send(bytearray(np.arange(3, dtype=np.float64).tobytes()), dest=1, tag=1)
    comm.Send(np.arange(3, dtype=np.float64), dest=1, tag=2)
    try:
        comm.barrier()
    except heddle.JobAborted as e:
        report["aborted"] = str(e)
elif r == 1:
    untyped = np.zeros(3)
    comm.Recv(untyped, source=0, tag=1)  # bytes into float64: no element type to check
    report["untyped_ok"] = untyped.tolist() == [0.0, 1.0, 2.0]
    try:
        comm.Recv(np.zeros(6, dtype=np.int32), source=0, tag=2)
    except heddle.ArgumentError as e:
        report["mismatch"] = str(e)
print(json.dumps(report), flush=True)
