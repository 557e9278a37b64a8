"""DataSet.write_parquet on every worker of the job: each worker writes its partitions
natively; the directory read back with pyarrow holds every record with the schema
``pa.Table.from_pylist`` infers, and heddle's read_parquet reads them back. argv[1]: a
directory shared by the ranks."""

import datetime as dt
import json
import sys
import traceback
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import heddle
from heddle.data import Session

comm = heddle.init()
s = Session(comm)
out = Path(sys.argv[1]) / "parquet"
failures = []
checks = 0


def check(name, got, want):
    global checks
    checks += 1
    if got != want:
        failures.append(f"{name}: got {str(got)[:300]} want {str(want)[:300]}")


# Every record has every kind non-null, so that every part file has the same schema.
rows = [
    {
        "id": i,
        "x": i / 7,
        "name": f"r{i} ü",
        "raw": bytes([i % 256]),
        "even": i % 2 == 0,
        "tags": [i, i + 1],
        "point": {"x": i, "label": str(i)},
        "at": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=i),
        "day": dt.date(2020, 1, 1) + dt.timedelta(days=i),
    }
    for i in range(2000)
]

try:
    s.from_list(rows).write_parquet(out)
    comm.barrier()
    table = pq.read_table(out)
    by_id = sorted(table.to_pylist(), key=lambda r: r["id"])
    check("records", by_id, pa.Table.from_pylist(rows).to_pylist())
    check("schema", table.schema.equals(pa.Table.from_pylist(rows).schema), True)
    check(
        "one part per partition",
        len(list(out.glob("part-*.parquet"))),
        s.partitions,
    )
    plain = [{k: v for k, v in r.items() if k not in ("at", "day")} for r in rows]
    back = s.read_parquet(out, columns=list(plain[0])).collect_all()
    check("read back", sorted(back, key=lambda r: r["id"]), plain)
except Exception:
    failures.append(traceback.format_exc())

print(json.dumps({"ok": not failures, "checks": checks, "failures": failures}))
