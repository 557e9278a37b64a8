"""Word count, polars (lazy): the lines read as one string column, split on whitespace,
exploded and counted with ``value_counts``, on ``--workers`` threads (POLARS_MAX_THREADS)."""

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
    t0 = time.perf_counter()
    counts = (
        pl.scan_csv(args.input, **polars_options(pl))
        .select(pl.col("line").str.extract_all(r"\S+").explode().alias("word"))
        .drop_nulls()
        .group_by("word")
        .len()
        .collect()
    )
    job_s = time.perf_counter() - t0

    got = dict(zip(counts["word"].to_list(), counts["len"].to_list(), strict=True))
    common.finish(
        lambda: common.reference.check_wordcount(got, args.ref),
        system="polars",
        variant=f"lazy, str.extract_all + group_by (polars {pl.__version__})",
        workload="wordcount",
        job_s=job_s,
        t_ready=t_ready,
    )
