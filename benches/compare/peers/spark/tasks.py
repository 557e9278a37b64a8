"""Trivial-task overhead, Spark: an RDD of N one-element partitions (N tasks), each squaring
its number; the sum is checked."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

args = common.parser(__doc__).parse_args()
spark = session("tasks", args.workers, args.partitions)
sc = spark.sparkContext
t_ready = time.perf_counter()

t0 = time.perf_counter()
total = sc.parallelize(range(args.tasks), args.tasks).map(lambda i: i * i).sum()
job_s = time.perf_counter() - t0

want = common.reference.tasks_reference(args.tasks)
ok = total == want
spark.stop()
common.emit(
    system="spark",
    variant="RDD, 1 partition per task",
    workload="tasks",
    ok=ok,
    detail=f"sum {total}, want {want}",
    job_s=round(job_s, 3),
    verify_s=0.0,
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
