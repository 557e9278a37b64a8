"""Run with HEDDLE_TIMEOUT_S=1: rank 0's Recv of a message nobody sends raises
heddle.TimeoutError, and the communicator still works afterwards.

The other ranks stay out of Heddle calls (sleeping in Python) meanwhile: any message
reaching rank 0 counts as progress and would restart its timeout, and their own waits
would time out too.
"""

import builtins
import json
import time

import numpy as np

import heddle

comm = heddle.init()
r, p = comm.rank, comm.size
assert comm.timeout == 1.0, comm.timeout
message = None
if r == 0:
    try:
        comm.Recv(np.zeros(1), source=1 % p, tag=42)
        raise AssertionError("Recv returned without a message")
    except heddle.TimeoutError as e:
        assert isinstance(e, heddle.CommError) and isinstance(e, builtins.TimeoutError)
        message = str(e)
else:
    time.sleep(1.5)
comm.barrier()
x = np.array([1.0])
comm.Allreduce(heddle.IN_PLACE, x)
assert x[0] == p
print(json.dumps({"rank": r, "ok": True, "message": message}))
