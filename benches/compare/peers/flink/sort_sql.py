"""Sort, PyFlink Table API in batch mode, pure SQL: a filesystem table of the lines,
INSERT INTO a filesystem sink ... ORDER BY the 10-byte key (Flink sorts globally in one
task, so the sink runs with parallelism 1 and writes one part file)."""

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
t_env.execute_sql(f"""CREATE TABLE sorted (line STRING) WITH ('connector' = 'filesystem',
    'path' = '{args.output}', 'format' = 'csv', 'csv.field-delimiter' = '|',
    'csv.disable-quote-character' = 'true', 'sink.parallelism' = '1')""")
t_env.execute_sql(
    "INSERT INTO sorted SELECT line FROM lines ORDER BY SUBSTRING(line, 1, 10)"
).wait()
job_s = time.perf_counter() - t0

common.finish(
    lambda: common.reference.check_sorted_dir(args.output, args.ref),
    system="flink",
    variant="Table API SQL ORDER BY",
    workload="sort",
    job_s=job_s,
    t_ready=t_ready,
)
