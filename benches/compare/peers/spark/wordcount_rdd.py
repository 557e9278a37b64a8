"""Word count, Spark RDD API (the classic: textFile, flatMap, map to (word, 1),
reduceByKey); the counts are collected to the driver and checked."""

import sys
import time
from operator import add
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

args = common.parser(__doc__).parse_args()
spark = session("wordcount-rdd", args.workers, args.partitions)
sc = spark.sparkContext
t_ready = time.perf_counter()

t0 = time.perf_counter()
counts = (
    sc.textFile(args.input, minPartitions=args.partitions)
    .flatMap(lambda line: line.split(" "))
    .map(lambda w: (w, 1))
    .reduceByKey(add, numPartitions=args.partitions)
    .collect()
)
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_wordcount(dict(counts), args.ref)
verify_s = time.perf_counter() - t1
spark.stop()
common.emit(
    system="spark",
    variant="RDD",
    workload="wordcount",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
