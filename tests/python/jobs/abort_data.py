"""A function given to a data set raises on the last rank, part-way through its partition.
No rank may produce a result computed without the last rank's records: the last rank
raises its own exception, every other rank raises heddle.JobAborted naming it.

argv[1]: "caught" (the other ranks catch JobAborted and report it, exiting 0) or
"uncaught" (nothing is caught: every rank exits 1).
argv[2]: "data" (a keyed reduce), "count" (a count: a collective at the end) or "stream"
(a finite stream through a keyed window).
"""

import json
import operator
import sys

import heddle
from heddle.data import Session, Window

comm = heddle.init()
s = Session(comm)
r, p = comm.rank, comm.size
mode, api = sys.argv[1], sys.argv[2]
seen = 0


def fragile(x):
    global seen
    seen += 1
    if r == p - 1 and seen == 500:
        raise ValueError(f"boom on rank {r}: cannot take {x}")
    return (x % 10, 1)


def job():
    if api == "data":
        return s.range(0, 200_000).map(fragile).reduce_by_key(lambda a, b: a + b).collect()
    if api == "count":
        return s.range(0, 200_000).map(fragile).count()
    return (
        s.stream_from_list(list(range(200_000)))
        .map(fragile)
        .window(Window.tumbling_count(10), operator.add)
        .collect()
    )


if mode == "uncaught" or r == p - 1:
    print(json.dumps({"rank": r, "result": repr(job())}))
else:
    try:
        print(json.dumps({"rank": r, "result": repr(job())}))
    except heddle.JobAborted as e:
        print(
            json.dumps(
                {"rank": r, "aborted": True, "origin": e.origin, "kind": e.kind, "text": str(e)}
            )
        )
