"""Word count, Spark DataFrame API (the documented way: read.text, split + explode,
groupBy().count()); the counts are collected to the driver and checked."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

from pyspark.sql import functions as F

args = common.parser(__doc__).parse_args()
spark = session("wordcount-df", args.workers, args.partitions)
t_ready = time.perf_counter()

t0 = time.perf_counter()
lines = spark.read.text(args.input)
words = lines.select(F.explode(F.split(F.col("value"), " ")).alias("word"))
rows = words.groupBy("word").count().collect()
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_wordcount({r["word"]: r["count"] for r in rows}, args.ref)
verify_s = time.perf_counter() - t1
spark.stop()
common.emit(
    system="spark",
    variant="DataFrame",
    workload="wordcount",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
