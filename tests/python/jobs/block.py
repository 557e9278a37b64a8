"""Every rank blocks in a Recv whose message never comes (until Ctrl-C or the launcher)."""

import numpy as np

import _pids
import heddle

comm = heddle.init()
comm.barrier()
_pids.record(comm.rank)
buf = np.zeros(1)
comm.Recv(buf, source=(comm.rank + 1) % comm.size, tag=99)
