"""Word count, DuckDB SQL: the lines read as one VARCHAR column, split on whitespace with
``regexp_split_to_array``, unnested and grouped, on ``--workers`` threads."""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common

import duckdb

QUERY = """
SELECT word, count(*) AS n FROM (
    SELECT unnest(regexp_split_to_array(line, '\\s+')) AS word
    FROM read_csv(?, columns = {'line': 'VARCHAR'}, delim = chr(31), quote = '', escape = '',
                  header = false, auto_detect = false)
) WHERE word <> '' GROUP BY word
"""

if __name__ == "__main__":
    args = common.parser(__doc__).parse_args()
    con = duckdb.connect()
    con.execute(f"SET threads = {args.workers}")
    t_ready = time.perf_counter()

    t0 = time.perf_counter()
    rows = con.execute(QUERY, [args.input]).fetchall()
    job_s = time.perf_counter() - t0

    common.finish(
        lambda: common.reference.check_wordcount(dict(rows), args.ref),
        system="duckdb",
        variant=f"SQL, regexp_split_to_array + GROUP BY (DuckDB {duckdb.__version__})",
        workload="wordcount",
        job_s=job_s,
        t_ready=t_ready,
    )
