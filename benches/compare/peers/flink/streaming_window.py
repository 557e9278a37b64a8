"""Streaming keyed windowed count, PyFlink Table API in streaming mode, pure SQL: a
filesystem source of ``ts_ms,key`` CSV events (the same events as one file; bounded: read
once), event time with a 5 s watermark, a TUMBLE(10 s) window table-valued function grouped
by window and key; a filesystem CSV sink (files committed on checkpoints, and at the end of
the input). The driver reads the part files and checks every (window, key) count."""

import sys
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from env import table_env

args = common.parser(__doc__).parse_args()
t_env = table_env(args.workers, batch=False)
conf = t_env.get_config()
conf.set("table.local-time-zone", "UTC")
conf.set("execution.checkpointing.interval", "2s")
t_ready = time.perf_counter()
WINDOW_MS = common.reference.WINDOW_MS

# One file, read by one source reader in order: Flink's file source hands a directory's
# files to its readers in no particular order, which would put event time out of order by
# far more than the watermark allows (the rest of the pipeline runs with parallelism N).
source = common.reference.events_single_file(args.input)
t0 = time.perf_counter()
t_env.execute_sql(f"""CREATE TABLE events (ts BIGINT, `key` INT,
    `time` AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR `time` AS `time` - INTERVAL '5' SECOND)
    WITH ('connector' = 'filesystem', 'path' = '{source}', 'format' = 'csv')""")
t_env.execute_sql(f"""CREATE TABLE counts (window_start STRING, `key` INT, c BIGINT) WITH (
    'connector' = 'filesystem', 'path' = '{args.output}', 'format' = 'csv')""")
t_env.execute_sql(f"""INSERT INTO counts
    SELECT CAST(window_start AS STRING), `key`, COUNT(*) FROM TABLE(
        TUMBLE(TABLE events, DESCRIPTOR(`time`), INTERVAL '{WINDOW_MS // 1000}' SECONDS))
    GROUP BY window_start, window_end, `key`""").wait()
job_s = time.perf_counter() - t0


def read_counts(directory: str) -> dict:
    """{(window index, key): count} from the sink's part files."""
    counts = {}
    for part in sorted(Path(directory).iterdir()):
        if part.name.startswith((".", "_")):
            continue
        for line in part.read_text().splitlines():
            start, key, c = line.rsplit(",", 2)
            ms = int(
                datetime.strptime(start.strip('"'), "%Y-%m-%d %H:%M:%S.%f")
                .replace(tzinfo=timezone.utc)
                .timestamp()
                * 1000
                + 0.5
            )
            counts[(ms // WINDOW_MS, int(key))] = int(c)
    return counts


common.finish(
    lambda: common.reference.check_window_counts(read_counts(args.output), args.ref),
    system="flink",
    variant="Table API SQL, TUMBLE window",
    workload="streaming",
    job_s=job_s,
    t_ready=t_ready,
)
