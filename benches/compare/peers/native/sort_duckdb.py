"""Sort, DuckDB SQL: ``COPY (SELECT line FROM read_csv(..) ORDER BY key) TO`` one file of
lines (insertion order preserved), on ``--workers`` threads."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

import duckdb

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {args.workers}")
    t_ready = time.perf_counter()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    part = str(out / "part-00000").replace("'", "''")
    source = str(args.input).replace("'", "''")

    t0 = time.perf_counter()
    con.execute(
        f"""COPY (
            SELECT line FROM read_csv('{source}', columns = {{'line': 'VARCHAR'}},
                delim = chr(31), quote = '', escape = '', header = false, auto_detect = false)
            ORDER BY substr(line, 1, 10)
        ) TO '{part}' (FORMAT csv, HEADER false, QUOTE '', DELIMITER chr(31))"""
    )
    job_s = time.perf_counter() - t0

    common.finish(
        lambda: common.reference.check_sorted_dir(out, args.ref),
        system="duckdb",
        variant=f"COPY (… ORDER BY key) TO csv (DuckDB {duckdb.__version__})",
        workload="sort",
        job_s=job_s,
        t_ready=t_ready,
    )
