"""Sort, Spark RDD API: textFile, (key, line) pairs, sortByKey (sampled range partitioning),
saveAsTextFile of the lines; part files in key order."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

args = common.parser(__doc__).parse_args()
spark = session("sort-rdd", args.workers, args.partitions)
sc = spark.sparkContext
t_ready = time.perf_counter()

t0 = time.perf_counter()
(
    sc.textFile(args.input, minPartitions=args.partitions)
    .map(lambda line: (line[:10], line))
    .sortByKey(numPartitions=args.partitions)
    .values()
    .saveAsTextFile(args.output)
)
job_s = time.perf_counter() - t0
spark.stop()

t1 = time.perf_counter()
ok, detail = common.reference.check_sorted_dir(args.output, args.ref)
verify_s = time.perf_counter() - t1
common.emit(
    system="spark",
    variant="RDD",
    workload="sort",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
