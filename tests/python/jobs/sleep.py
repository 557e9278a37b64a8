"""Every rank sleeps in Python code (not in a Heddle call)."""

import time

import _pids
import heddle

comm = heddle.init()
comm.barrier()
_pids.record(comm.rank)
time.sleep(120)
