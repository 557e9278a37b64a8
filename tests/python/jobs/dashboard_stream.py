"""A Python stream for the dashboard tests: numbers generated at a steady rate, keyed and
counted in tumbling count windows, for about `argv[1]` seconds.

Rank 0 prints {"windows": n} at the end.
"""

import json
import operator
import sys

import heddle
from heddle.data import Session, Window

seconds = float(sys.argv[1])
comm = heddle.init()
s = Session(comm)
rate = 20_000  # records per second per partition
limit = int(rate * comm.size * seconds)
windows = (
    s.stream_generate(lambda i: (i % 7, 1), rate=rate, limit=limit)
    .key_by(lambda kv: kv[0])
    .map(lambda kv: kv[1])
    .window(Window.tumbling_count(100), operator.add)
    .collect()
)
if comm.rank == 0:
    print(json.dumps({"windows": len(windows)}))
