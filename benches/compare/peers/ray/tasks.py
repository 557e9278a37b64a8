"""Trivial-task overhead, Ray tasks: N remote calls of a squaring function, ray.get of all
results, summed."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import init

args = common.parser(__doc__).parse_args()
ray = init(args.workers)


@ray.remote
def square(i):
    return i * i


t_ready = time.perf_counter()
t0 = time.perf_counter()
total = sum(ray.get([square.remote(i) for i in range(args.tasks)]))
job_s = time.perf_counter() - t0

want = common.reference.tasks_reference(args.tasks)
ok = total == want
ray.shutdown()
common.emit(
    system="ray",
    variant="tasks",
    workload="tasks",
    ok=ok,
    detail=f"sum {total}, want {want}",
    job_s=round(job_s, 3),
    verify_s=0.0,
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
