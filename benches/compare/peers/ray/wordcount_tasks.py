"""Word count, Ray tasks: one remote task per byte range of the file (whole lines), each
returning a Counter; the driver merges them as they finish (ray.wait)."""

import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common
from cluster import init

ray = init(common.parser(__doc__).parse_args().workers)


@ray.remote
def count_range(path, start, end):
    with open(path, "rb") as f:
        if start > 0:
            f.seek(start - 1)
            f.readline()  # the line that started in the previous range
        pos = f.tell()
        data = f.read(max(0, end - pos)) if pos < end else b""
        if data and not data.endswith(b"\n"):
            data += f.readline()
    return Counter(data.split())


args = common.parser(__doc__).parse_args()
t_ready = time.perf_counter()

t0 = time.perf_counter()
pending = [
    count_range.remote(args.input, s, e) for s, e in common.text_ranges(args.input, args.partitions)
]
total = Counter()
while pending:
    done, pending = ray.wait(pending, num_returns=1)
    total.update(ray.get(done[0]))
job_s = time.perf_counter() - t0

t1 = time.perf_counter()
ok, detail = common.reference.check_wordcount(total, args.ref)
verify_s = time.perf_counter() - t1
ray.shutdown()
common.emit(
    system="ray",
    variant="tasks, Counter per range",
    workload="wordcount",
    ok=ok,
    detail=detail,
    job_s=round(job_s, 3),
    verify_s=round(verify_s, 3),
    t_ready=t_ready,
)
sys.exit(0 if ok else 1)
