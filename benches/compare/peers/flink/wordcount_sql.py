"""Word count, PyFlink Table API in batch mode, pure SQL (no Python UDF on the data path):
a filesystem table of lines, CROSS JOIN UNNEST(SPLIT(line, ' ')), GROUP BY word, COUNT(*),
written by a filesystem CSV sink (PyFlink's row-by-row collect is too slow for large
results); the driver reads the part files and checks the counts."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from env import table_env

args = common.parser(__doc__).parse_args()
t_env = table_env(args.workers, batch=True)
t_ready = time.perf_counter()

t0 = time.perf_counter()
t_env.execute_sql(f"""CREATE TABLE lines (line STRING) WITH ('connector' = 'filesystem',
    'path' = '{args.input}', 'format' = 'csv', 'csv.field-delimiter' = '|',
    'csv.disable-quote-character' = 'true')""")
t_env.execute_sql(f"""CREATE TABLE counts (word STRING, c BIGINT) WITH ('connector' = 'filesystem',
    'path' = '{args.output}', 'format' = 'csv', 'csv.field-delimiter' = '\\t',
    'csv.disable-quote-character' = 'true')""")
t_env.execute_sql("""INSERT INTO counts SELECT word, COUNT(*) FROM lines
    CROSS JOIN UNNEST(SPLIT(line, ' ')) AS t (word) GROUP BY word""").wait()
job_s = time.perf_counter() - t0

common.finish(
    lambda: common.reference.check_wordcount(
        common.reference.read_wordcount_dir(args.output), args.ref
    ),
    system="flink",
    variant="Table API SQL (UNNEST)",
    workload="wordcount",
    job_s=job_s,
    t_ready=t_ready,
)
