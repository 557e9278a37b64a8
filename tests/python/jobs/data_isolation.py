"""A data-API word count on every worker of the job whose split and pair stages run as
processes forked from their workers (one per partition), checked against
collections.Counter; the pids the stage reports are none of the workers'."""

import collections
import json
import os
import traceback

import heddle
from heddle.data import Session

comm = heddle.init()
failures = []
LINES = [" ".join(f"t{(i * 5 + k) % 17}" for k in range(i % 7)) for i in range(1500)]

try:
    s = Session(comm)
    words = s.from_list(LINES).flat_map(str.split).resources(memory="128MiB")
    tagged = words.map(lambda w: (w, (1, os.getpid()))).resources(isolation="process")
    got = tagged.collect()
    if got is not None:  # the driver (rank 0) holds the result
        total = collections.Counter()
        for w, (one, _pid) in got:
            total[w] += one
        want = collections.Counter(w for line in LINES for w in line.split())
        if total != want:
            failures.append(f"counts: got {dict(total)} want {dict(want)}")
    stage_pids = {pid for _w, (_one, pid) in got or []}
    workers = comm.allgather(os.getpid())
    if got is not None and (len(stage_pids) != s.partitions or stage_pids & set(workers)):
        failures.append(f"stage processes {stage_pids}, workers {workers}")
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"rank": comm.rank, "ok": not failures, "failures": failures}), flush=True)
