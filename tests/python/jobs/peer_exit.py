"""Rank 1 leaves early (successfully); rank 0 then waits for a message from it and gets
heddle.WorkerFailed naming rank 1."""

import json
import os

import numpy as np

import heddle

comm = heddle.init()
comm.barrier()
if comm.rank == 1:
    os._exit(0)
if comm.rank == 0:
    try:
        comm.Recv(np.zeros(1), source=1, tag=3)
        raise AssertionError("Recv from a departed rank returned")
    except heddle.WorkerFailed as e:
        assert isinstance(e, heddle.CommError)
        print(json.dumps({"rank": 0, "ok": True, "lost": e.rank, "message": str(e)}))
