"""A function of an unbounded stream raises on the last rank, in a step before a shuffle
and while the records keep coming: that worker stops its sources and fails with the
exception, and the launcher stops the others (still running their sources)."""

import operator

import _pids
import heddle
from heddle.data import Session, Window

comm = heddle.init()
s = Session(comm)
comm.barrier()
_pids.record(comm.rank)


def fragile(i):
    if comm.rank == comm.size - 1 and i // comm.size == 5000:
        raise ValueError(f"boom: cannot take {i}")
    return (i % 10, 1)


s.stream_generate(lambda i: i).map(fragile).window(Window.tumbling_count(100), operator.add).run()
