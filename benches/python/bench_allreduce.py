"""heddle.comm Allreduce against mpi4py's, in the same run, with the ratio.

Usage (from the repository root; ``make bench-python`` does this)::

    .venv-py/bin/python benches/python/bench_allreduce.py [--ranks 2] [--bytes 8]
        [--iters 20000] [--warmup 2000] [--repeat 3] [--json FILE]

The interpreter running it must have ``heddle`` installed (``make test-python`` builds
``.venv-py``). The MPI peer is mpi4py on Open MPI from ``benches/.venv-mpi``, made on demand
by ``benches/mpi/setup.sh`` and started with the mpirun flags of ``heddle bench collectives``.

Both sides run this same file (``--side heddle`` under ``python -m heddle run``, ``--side
mpi`` under ``mpirun``) and execute the identical mpi4py-style loop::

    comm.Allreduce(send, recv, op=SUM)      # float64, bytes // 8 elements, constant send

with the timing rules of ``benches/mpi/bench_collectives.py``: Barrier, ``warmup`` untimed
calls, Barrier, then ``iters`` calls back to back, each timed on every rank with
``time.perf_counter_ns``; per-iteration times are combined with an Allreduce MAX over ranks
and the p50/p99 (nearest rank) reported. One more untimed call checks the result against
numpy (rank r contributes ``r + 1 + i % 7``). Runs alternate heddle, mpi, heddle, mpi, ...
``--repeat`` times (the VM drifts between a fast and a slow state); the table shows each
run and the medians, and the last line is JSON with the ratio heddle / mpi of median p50s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MPI_SETUP = ROOT / "benches" / "mpi" / "setup.sh"
MPIRUN_FLAGS = [
    "--bind-to",
    "none",
    "--mca",
    "pml",
    "ob1",
    "--mca",
    "btl",
    "self,vader",
    "--mca",
    "btl_vader_single_copy_mechanism",
    "none",
]


def worker(args) -> int:
    import numpy as np

    if args.side == "mpi":
        from mpi4py import MPI

        comm, SUM, MAX, LAND, IN_PLACE = MPI.COMM_WORLD, MPI.SUM, MPI.MAX, MPI.LAND, MPI.IN_PLACE
    else:
        import heddle

        comm, SUM, MAX, LAND, IN_PLACE = (
            heddle.init(),
            heddle.SUM,
            heddle.MAX,
            heddle.LAND,
            heddle.IN_PLACE,
        )
    rank, size = comm.Get_rank(), comm.Get_size()
    n = max(1, args.bytes // 8)
    send = (rank + 1 + np.arange(n) % 7).astype(np.float64)
    recv = np.zeros(n, dtype=np.float64)
    times = np.zeros(args.iters, dtype=np.int64)
    clock = time.perf_counter_ns
    allreduce = comm.Allreduce

    comm.Barrier()
    for _ in range(args.warmup):
        allreduce(send, recv, op=SUM)
    comm.Barrier()
    for k in range(args.iters):
        t0 = clock()
        allreduce(send, recv, op=SUM)
        times[k] = clock() - t0
    comm.Allreduce(IN_PLACE, times, op=MAX)

    recv[:] = np.nan
    allreduce(send, recv, op=SUM)
    expected = size * (size + 1) / 2 + size * (np.arange(n) % 7)
    ok = np.array([np.array_equal(recv, expected)], dtype=np.bool_)
    comm.Allreduce(IN_PLACE, ok, op=LAND)

    if rank == 0:
        s = np.sort(times)

        def pick(q: float) -> float:  # nearest rank, in microseconds
            return float(s[max(0, math.ceil(q * len(s)) - 1)]) / 1000.0

        print(
            json.dumps(
                {
                    "system": args.side,
                    "collective": "allreduce",
                    "ranks": size,
                    "bytes": n * 8,
                    "p50_us": round(pick(0.5), 3),
                    "p99_us": round(pick(0.99), 3),
                    "iters": args.iters,
                    "verified": bool(ok[0]),
                }
            ),
            flush=True,
        )
    return 0


def run_side(cmd, env, timeout) -> dict:
    out = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=timeout)
    for line in out.stdout.splitlines():
        line = line.split("] ", 1)[1] if line.startswith("[") and "] " in line else line
        if line.startswith("{"):
            return json.loads(line)
    sys.stderr.write(out.stdout + out.stderr)
    raise SystemExit(f"bench: {cmd[0]} printed no result (exit {out.returncode})")


def driver(args) -> int:
    print(f"bench: setting up the MPI peer ({MPI_SETUP.relative_to(ROOT)})", file=sys.stderr)
    setup = subprocess.run(
        ["bash", str(MPI_SETUP)], check=False, capture_output=True, text=True, timeout=1800
    )
    if setup.returncode != 0:
        sys.stderr.write(setup.stderr)
        raise SystemExit("bench: benches/mpi/setup.sh failed")
    mpi_python = setup.stdout.strip().splitlines()[-1]
    common = ["--bytes", str(args.bytes), "--iters", str(args.iters), "--warmup", str(args.warmup)]
    me = str(Path(__file__).resolve())
    heddle_cmd = [
        sys.executable,
        "-m",
        "heddle",
        "run",
        "-n",
        str(args.ranks),
        sys.executable,
        me,
        "--side",
        "heddle",
        *common,
    ]
    mpi_cmd = ["mpirun", "-n", str(args.ranks), *MPIRUN_FLAGS]
    if args.ranks > (os.cpu_count() or 1):
        mpi_cmd.append("--oversubscribe")
    mpi_cmd += [mpi_python, me, "--side", "mpi", *common]
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    runs = {"heddle": [], "mpi": []}
    print(f"{'run':>4} {'system':>7} {'p50 us':>8} {'p99 us':>8} verified")
    for rep in range(1, args.repeat + 1):
        for side, cmd in (("heddle", heddle_cmd), ("mpi", mpi_cmd)):
            r = run_side(cmd, env, timeout=600)
            runs[side].append(r)
            print(
                f"{rep:>4} {side:>7} {r['p50_us']:>8.3f} {r['p99_us']:>8.3f} {r['verified']}",
                flush=True,
            )
    med = {s: statistics.median(r["p50_us"] for r in rs) for s, rs in runs.items()}
    ratio = med["heddle"] / med["mpi"]
    verified = all(r["verified"] for rs in runs.values() for r in rs)
    print(
        f"median p50: heddle.comm {med['heddle']:.3f} us, mpi4py {med['mpi']:.3f} us, ratio "
        f"{ratio:.2f}x"
    )
    result = {
        "bench": "allreduce",
        "ranks": args.ranks,
        "bytes": max(8, args.bytes // 8 * 8),
        "heddle_p50_us": med["heddle"],
        "mpi_p50_us": med["mpi"],
        "ratio": round(ratio, 3),
        "verified": verified,
        "runs": runs,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    return 0 if verified else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--side", choices=["heddle", "mpi"], help="run one side (inside a job)")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--bytes", type=int, default=8)
    p.add_argument("--iters", type=int, default=20000)
    p.add_argument("--warmup", type=int, default=2000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json", help="also write the results to this file")
    args = p.parse_args(argv)
    return worker(args) if args.side else driver(args)


if __name__ == "__main__":
    sys.exit(main())
