"""Word count, Apache DataFusion SQL: the lines read as one string column (no quoting),
split on spaces with ``string_to_array``, unnested and grouped, on ``--workers`` target
partitions."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

import datafusion
from lines import datafusion_context, register_datafusion_lines

QUERY = """
SELECT word, count(*) AS n FROM (
    SELECT unnest(string_to_array(line, ' ')) AS word FROM lines
) WHERE word <> '' GROUP BY word
"""

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    ctx = datafusion_context(args.workers)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    register_datafusion_lines(ctx, args.input)
    table = ctx.sql(QUERY).to_arrow_table()
    job_s = time.perf_counter() - t0

    counts = dict(zip(table.column("word").to_pylist(), table.column("n").to_pylist()))
    common.finish(
        lambda: common.reference.check_wordcount(counts, args.ref),
        system="datafusion",
        variant=f"SQL, string_to_array + unnest + GROUP BY (DataFusion {datafusion.__version__})",
        workload="wordcount",
        job_s=job_s,
        t_ready=t_ready,
    )
