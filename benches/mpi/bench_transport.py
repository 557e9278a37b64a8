"""Heddle's transports side by side under one `mpirun`: the same collectives with every link
over MPI point-to-point (HEDDLE_TRANSPORT=mpi: Open MPI's own shared memory here, its fabric
on a cluster), over Heddle's TCP links, and over Heddle's shared memory, in one run. Prints
p50 latencies and the ratios to the MPI transport; --json writes them.

Run from the repository root after `make build` (Open MPI from `make test-deps`)::

    python3 benches/mpi/bench_transport.py [--ranks 2] [--sizes 8,65536,...] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "target" / "release" / "examples" / "bench_collectives"
TRANSPORTS = ["mpi", "tcp", "shm"]


def run(transport: str, ranks: int, sizes: str, collectives: str) -> list[dict[str, object]]:
    env = dict(
        os.environ,
        HEDDLE_TRANSPORT=transport,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    cmd = ["mpirun", "-n", str(ranks), "--bind-to", "none", str(PROGRAM)]
    cmd += ["--sizes", sizes, "--collectives", collectives]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"mpirun with HEDDLE_TRANSPORT={transport} failed:\n{p.stderr[-3000:]}")
    rows = []
    for line in p.stdout.splitlines():
        start = line.find('{"system"')
        if start >= 0:
            rows.append(json.loads(line[start:]))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--sizes", default="8,65536,1048576,16777216")
    ap.add_argument("--collectives", default="allreduce,broadcast")
    ap.add_argument("--json")
    args = ap.parse_args()
    runs = {t: run(t, args.ranks, args.sizes, args.collectives) for t in TRANSPORTS}
    out = []
    for c in args.collectives.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            cell = {
                t: float(
                    next(
                        str(r["p50_us"])
                        for r in runs[t]
                        if r["collective"] == c and r["bytes"] == size
                    )
                )
                for t in TRANSPORTS
            }
            out.append({"collective": c, "bytes": size, **{f"{t}_us": cell[t] for t in cell}})
    print("| collective | bytes | mpi p50 µs | tcp p50 µs | shm p50 µs | tcp / mpi | shm / mpi |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in out:
        m, t, s = r["mpi_us"], r["tcp_us"], r["shm_us"]
        print(
            f"| {r['collective']} | {r['bytes']} | {m:.1f} | {t:.1f} | {s:.1f} | "
            f"{t / m:.2f} | {s / m:.2f} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
