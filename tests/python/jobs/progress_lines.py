"""A batch job over a text file for the progress bar's tests: the lines of `argv[1]`, each
through a Python function, counted. Rank 0 prints {"count": n}."""

import json
import sys

import heddle
from heddle.data import Session

comm = heddle.init()
s = Session(comm)
count = s.text_file(sys.argv[1]).map(lambda line: sum(map(ord, line))).count()
if comm.rank == 0:
    print(json.dumps({"count": count}))
