"""Streaming keyed windowed count, Spark Structured Streaming: a file source (one file per
micro-batch) of ``ts_ms,key`` CSV events, event time with a 5 s watermark, tumbling 10 s
windows, groupBy(window, key).count() in update mode; a foreachBatch sink keeps the latest
count of every (window, key) in the driver. Trigger availableNow: the query drains the input
and stops."""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from session import session

from pyspark.sql import functions as F

args = common.parser(__doc__).parse_args()
spark = session("streaming-window", args.workers, args.partitions)
t_ready = time.perf_counter()
WINDOW_MS = common.reference.WINDOW_MS
counts = {}


def sink(batch, batch_id):
    for r in batch.select(
        F.floor(F.unix_millis(F.col("window.start")) / WINDOW_MS).alias("w"), "key", "count"
    ).collect():
        counts[(r["w"], r["key"])] = r["count"]


t0 = time.perf_counter()
events = (
    spark.readStream.schema("ts LONG, key INT")
    .option("maxFilesPerTrigger", 1)
    .csv(args.input)
    .withColumn("time", F.timestamp_millis("ts"))
)
windowed = (
    events.withWatermark("time", "5 seconds")
    .groupBy(F.window("time", f"{WINDOW_MS // 1000} seconds"), "key")
    .count()
)
with tempfile.TemporaryDirectory() as checkpoint:
    query = (
        windowed.writeStream.outputMode("update")
        .foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_window_counts(counts, args.ref)
verify_s = time.perf_counter() - t1
spark.stop()
common.emit(
    system="spark",
    variant="Structured Streaming",
    workload="streaming",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
