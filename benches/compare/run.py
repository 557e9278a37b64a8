#!/usr/bin/env python3
"""Side-by-side benchmark suite: Heddle against Open MPI (mpi4py), Spark, Dask, Ray, Flink,
and the engines a user picks on one machine: polars, DuckDB and scikit-learn.

    python3 benches/compare/run.py [--workloads wordcount,wordcount_dense,kmeans,mds,sort,
                                                allreduce,tasks,streaming]
                                   [--systems heddle,mpi,spark,dask,ray,flink] [--repeat 3]
                                   [--quick] [--merge]

(``make bench-compare`` / ``make bench-compare-quick``.) The script re-executes itself in
its own virtualenv (benches/.venv-compare: numpy, matplotlib), then

1. generates the data deterministically (seeded) under benches/.data-compare/ and computes
   each reference once (cached beside the data, see reference.py);
2. installs each selected peer on demand into its own virtualenv under benches/
   (.venv-spark + Debian's openjdk-17-jre-headless, .venv-dask, .venv-ray, .venv-flink, and
   .venv-mpi through benches/mpi/setup.sh);
3. runs every selected workload on every selected system in the same run, interleaved (one
   round per repeat, systems rotated each round), each run after a ``sync`` and an idle pause,
   with a time limit;
4. measures for each run the job time (printed by the program itself: start-up, input
   generation and the output check excluded, the same way for every system), the whole-run
   time (wall clock from spawning the command to its exit, start-up and shutdown included,
   the program's own output check subtracted), and the peak memory (the sum of the PSS of
   every process of the run's process tree and session, sampled from /proc/PID/smaps_rollup);
5. verifies every output against the reference (the peers check their own output with
   reference.py; Heddle's part files are checked by the harness with the same code);
6. prints a markdown table (medians, min-max over the repeats, ratio to Heddle), writes
   results/latest.json, docs/benchmarks.png and docs/benchmarks.md.

The harness is split by concept: config.py (paths, workloads, systems, sizes), systems.py
(installs, versions), variants.py (what runs for each workload and system), measure.py (one
run: time, peak PSS, check), tables.py (medians, ratios, tables, chart), report.py
(docs/benchmarks.md, --merge) and reference.py (data and references); this file parses the
arguments, prepares the data and runs the rounds.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from config import DATA, EXAMPLES, FULL, HERE, QUICK, RESULTS, SYSTEMS, WORKLOADS, Sizes, log
from measure import execute, run_allreduce
from report import machine, merge_results, report
from systems import bootstrap, build_heddle, setup_system, versions
from variants import variants


def prepare_data(workloads: list[str], sizes: Sizes) -> dict:
    import reference

    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "tmp").mkdir(exist_ok=True)
    data: dict = {}
    for workload, vocabulary in (("wordcount", "plain"), ("wordcount_dense", "dense")):
        if workload not in workloads:
            continue
        dense = "-dense" if vocabulary == "dense" else ""
        text = DATA / f"heddle-words{dense}-{sizes.megabytes}mb-seed1.txt"
        if not text.exists():
            build_heddle()
            log(
                f"generating {text.name} with Heddle's generator (wordcount_task --generate "
                f"--text {vocabulary} --seed 1)"
            )
            subprocess.run(
                [
                    str(EXAMPLES / "wordcount_task"),
                    "--generate",
                    "--text",
                    vocabulary,
                    "--seed",
                    "1",
                    "--megabytes",
                    str(sizes.megabytes),
                    "--no-verify",
                ],
                check=True,
                timeout=1200,
                env=dict(os.environ, TMPDIR=str(DATA)),
                stdout=subprocess.DEVNULL,
            )
        log(f"{workload} reference (Counter, cached)")
        data[workload] = {"input": text, "ref": reference.wordcount_reference(text)}
    if "kmeans" in workloads:
        pts = reference.generate_points(
            DATA / f"points-{sizes.points}-seed1.npy", sizes.points, seed=1
        )
        log("K-means reference (numpy Lloyd, cached)")
        data["kmeans"] = {"input": pts, "ref": reference.kmeans_reference(pts, 16, 10)}
    if "mds" in workloads:
        log(f"MDS dissimilarities of {sizes.mds_points} points (cached)")
        d = DATA / f"distances-{sizes.mds_points}-seed1.npy"
        d = reference.generate_distances(d, sizes.mds_points)
        data["mds"] = {"input": d, "ref": d}
    if "sort" in workloads:
        path = DATA / f"records-{sizes.records}-seed7.txt"
        if not path.exists():
            log(f"generating {sizes.records} sort records ({sizes.records * 101 >> 20} MiB)")
        reference.generate_records(path, sizes.records, seed=7)
        log("sort reference (count and checksum, cached)")
        data["sort"] = {"input": path, "ref": reference.input_reference(path)}
    if "streaming" in workloads:
        log(f"streaming events ({sizes.events}, cached) and their window counts")
        d = reference.generate_events(
            DATA / f"events-{sizes.events}-f{sizes.files}-seed3",
            sizes.events,
            files=sizes.files,
            seed=3,
        )
        data["streaming"] = {"input": d, "ref": reference.streaming_reference(d)}
    return data


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--quick",
        action="store_true",
        help="small data end to end (a smoke test: results/latest-quick.json, docs untouched)",
    )
    ap.add_argument(
        "--pause",
        type=float,
        default=None,
        help="idle seconds before each run (default 3, quick 0.5)",
    )
    ap.add_argument(
        "--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md and the chart"
    )
    ap.add_argument(
        "--json",
        type=Path,
        default=None,
        help="results file (default benches/compare/results/latest[-quick].json)",
    )
    ap.add_argument(
        "--note", action="append", default=[], help="a remark about this run for docs/benchmarks.md"
    )
    ap.add_argument(
        "--merge",
        action="store_true",
        help="replace only the (workload, system, variant) rows this run ran inside the existing "
        "results "
        "file (and its allreduce runs if allreduce ran), keep every other row, and rebuild the "
        "table, chart and docs from the merged results",
    )
    ap.add_argument(
        "--report-from",
        type=Path,
        default=None,
        help="only rebuild the table, chart and docs from a results JSON of an earlier run",
    )
    args = ap.parse_args()
    bootstrap(Path(__file__))
    sys.path.insert(0, str(HERE))
    if args.report_from:
        results = json.loads(args.report_from.read_text())
        results["notes"] = results.get("notes", []) + args.note
        return report(results, args)

    workloads = [w for w in args.workloads.split(",") if w]
    systems = [s for s in args.systems.split(",") if s]
    for w in workloads:
        if w not in WORKLOADS:
            ap.error(f"unknown workload {w!r} (choose from {','.join(WORKLOADS)})")
    for s in systems:
        if s not in SYSTEMS:
            ap.error(f"unknown system {s!r} (choose from {','.join(SYSTEMS)})")
    sizes = QUICK if args.quick else FULL
    pause = args.pause if args.pause is not None else (0.5 if args.quick else 3.0)
    timeouts = {
        "wordcount": 600,
        "wordcount_dense": 600,
        "kmeans": 600,
        "mds": 1200,
        "sort": 1200,
        "tasks": 900,
        "allreduce": 900,
        "streaming": 900,
    }
    if args.quick:
        timeouts = dict.fromkeys(timeouts, 180)
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    t_start = time.perf_counter()

    setups = {}
    need = set(systems) | ({"heddle", "mpi"} if "allreduce" in workloads else set())
    for s in SYSTEMS:
        if s in need:
            log(f"setting up {s}")
            setups[s] = setup_system(s)
    data = prepare_data(workloads, sizes)
    vs = [v for v in variants() if v.workload in workloads and v.system in systems]

    rows: list[dict] = []
    ar_runs: list[dict] = []
    for rep in range(args.repeat):
        for w in workloads:
            if w == "allreduce":
                if "heddle" in systems or "mpi" in systems:
                    log(f"[{rep + 1}/{args.repeat}] allreduce: heddle bench collectives --vs mpi")
                    ar_runs.append(run_allreduce(args.quick, timeouts["allreduce"], pause, systems))
                continue
            runnable = [
                v
                for v in vs
                if v.workload == w and v.make_cmd and (not v.max_repeats or rep < v.max_repeats)
            ]
            if not runnable:
                continue
            shift = rep % len(runnable)
            for i, v in enumerate(runnable[shift:] + runnable[:shift]):
                log(f"[{rep + 1}/{args.repeat}] {w}: {v.system} ({v.variant})")
                row = execute(v, data.get(w), sizes, setups[v.system], timeouts[w], pause, i)
                row["repeat"] = rep
                rows.append(row)
                log(
                    f"    job {row['job_s']} s, run {row['run_s']} s, peak PSS "
                    f"{row['peak_pss_mib']:.0f} MiB, "
                    f"{'ok' if row['ok'] else 'FAILED'}: {row['detail']}"
                )

    duration = time.perf_counter() - t_start
    results = {
        "started_utc": started,
        "duration_s": round(duration, 1),
        "command": ("python3 benches/compare/run.py " + " ".join(sys.argv[1:])).strip(),
        "quick": args.quick,
        "repeat": args.repeat,
        "workloads": workloads,
        "systems": systems,
        "sizes": sizes.__dict__,
        "machine": machine(),
        "versions": versions(setups),
        "runs": rows,
        "allreduce": {"runs": ar_runs},
        "notes": args.note,
    }
    if args.merge:
        results = merge_results(
            results, args.json or RESULTS / ("latest-quick.json" if args.quick else "latest.json")
        )
    return report(results, args)


if __name__ == "__main__":
    sys.exit(main())
