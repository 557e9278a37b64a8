"""Sort, Dask DataFrame: read_csv of the lines (one string column), the 10-byte key as a
column, sort_values (sampled quantiles, then a shuffle), to_csv of the lines, one part file
per partition in key order."""

import csv
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import client

import dask.dataframe as dd

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    c = client(args.workers)
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    size = Path(args.input).stat().st_size
    df = dd.read_csv(
        args.input,
        header=None,
        names=["line"],
        dtype={"line": "string"},
        blocksize=max(1 << 20, size // args.partitions + 1),
        quoting=csv.QUOTE_NONE,
    )
    df = df.assign(key=df["line"].str.slice(0, 10)).sort_values("key")
    Path(args.output).mkdir(parents=True, exist_ok=True)
    df[["line"]].to_csv(
        str(Path(args.output) / "part-*.csv"),
        header=False,
        index=False,
        quoting=csv.QUOTE_NONE,
        name_function=lambda i: f"{i:05d}",
    )
    job_s = time.perf_counter() - t0
    c.close()

    common.finish(
        lambda: common.reference.check_sorted_dir(args.output, args.ref),
        system="dask",
        variant="DataFrame sort_values",
        workload="sort",
        job_s=job_s,
        t_ready=t_ready,
    )
