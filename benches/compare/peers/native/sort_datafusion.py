"""Sort, Apache DataFusion SQL: ``COPY (SELECT line FROM lines ORDER BY key) TO`` one file of
lines (no quoting: quote and delimiter are control characters the data does not hold), on
``--workers`` target partitions."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

import datafusion
from lines import datafusion_context, register_datafusion_lines

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    ctx = datafusion_context(args.workers)
    t_ready = time.perf_counter()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    part = str(out / "part-00000.csv").replace("'", "''")

    t0 = time.perf_counter()
    register_datafusion_lines(ctx, args.input)
    ctx.sql(
        f"""COPY (SELECT line FROM lines ORDER BY substr(line, 1, 10)) TO '{part}'
        STORED AS CSV OPTIONS ('format.has_header' 'false', 'format.delimiter' '\x1f',
        'format.quote' '\x1e')"""
    ).collect()
    job_s = time.perf_counter() - t0

    common.finish(
        lambda: common.reference.check_sorted_dir(out, args.ref),
        system="datafusion",
        variant=f"COPY (… ORDER BY key) TO csv (DataFusion {datafusion.__version__})",
        workload="sort",
        job_s=job_s,
        t_ready=t_ready,
    )
