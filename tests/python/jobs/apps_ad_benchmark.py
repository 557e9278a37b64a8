"""heddle.apps.ad_benchmark on every rank: ``apps_ad_benchmark.py REDIS_URL``; rank 0 prints
its report as a JSON line, the other ranks check they got ``None``."""

import dataclasses
import json
import sys

import heddle
from heddle.apps import ad_benchmark

comm = heddle.init()
report = ad_benchmark(sys.argv[1], rate=3000, seconds=2, campaigns=20, window_s=0.5)
if comm.rank == 0:
    assert report is not None
    print(json.dumps(dataclasses.asdict(report)))
else:
    assert report is None, "only rank 0 reports"
