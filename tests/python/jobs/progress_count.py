"""A batch job of known size for the progress bar's tests: `argv[1]` numbers, each through a
Python function, counted. Rank 0 prints {"count": n}."""

import json
import sys

import heddle
from heddle.data import Session

n = int(sys.argv[1])
comm = heddle.init()
s = Session(comm)
count = s.range(0, n).map(lambda x: x * 3).filter(lambda x: x % 2 == 0).count()
if comm.rank == 0:
    print(json.dumps({"count": count}))
