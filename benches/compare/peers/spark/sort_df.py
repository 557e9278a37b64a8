"""Sort, Spark DataFrame API: read.text, the 10-byte key as a column, orderBy (sampled
range partitioning), write.text of the lines; part files in key order."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

from pyspark.sql import functions as F

args = common.parser(__doc__).parse_args()
spark = session("sort-df", args.workers, args.partitions)
t_ready = time.perf_counter()

t0 = time.perf_counter()
lines = spark.read.text(args.input)
(
    lines.withColumn("key", F.substring("value", 1, 10))
    .orderBy("key")
    .select("value")
    .write.mode("overwrite")
    .text(args.output)
)
job_s = time.perf_counter() - t0
spark.stop()

t1 = time.perf_counter()
ok, detail = common.reference.check_sorted_dir(args.output, args.ref)
verify_s = time.perf_counter() - t1
common.emit(
    system="spark",
    variant="DataFrame",
    workload="sort",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
