"""The last rank raises; the others wait in a barrier that can never complete."""

import _pids
import heddle

comm = heddle.init()
comm.barrier()
_pids.record(comm.rank)
if comm.rank == comm.size - 1:
    raise RuntimeError("boom from the last rank")
comm.barrier()
