"""Sort, polars: the 100-byte lines read as one string column, sorted on their 10-byte key
(``sort_by``), written as one file of lines, on ``--workers`` threads."""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from lines import polars_options

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    os.environ["POLARS_MAX_THREADS"] = str(args.workers)
    import polars as pl

    t_ready = time.perf_counter()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    lines = pl.read_csv(args.input, **polars_options(pl))
    lines.sort(pl.col("line").str.slice(0, 10)).write_csv(
        out / "part-00000", include_header=False, quote_style="never"
    )
    job_s = time.perf_counter() - t0

    common.finish(
        lambda: common.reference.check_sorted_dir(out, args.ref),
        system="polars",
        variant=f"read_csv, sort on the key, write_csv (polars {pl.__version__})",
        workload="sort",
        job_s=job_s,
        t_ready=t_ready,
    )
