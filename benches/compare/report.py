"""The report: medians and ratios of the runs, the markdown tables, the chart, the machine's
description, docs/benchmarks.md with its notes, merging a run into an earlier results file
(``--merge``) and writing everything out (``report``, also for ``--report-from``)."""

from __future__ import annotations

import json
import os
import platform
import statistics
from pathlib import Path

from config import DOCS, RESULTS, SYSTEMS, WORKERS, WORKLOADS, Sizes, log
from variants import variants


def summarize(rows: list[dict], listed: list[tuple[str, str, str]]) -> list[dict]:
    """Medians and min-max per (workload, system, variant); ratios to the Heddle Rust
    variant listed first in ``listed`` (the (workload, system, variant) of ``variants()``)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["workload"], r["system"], r["variant"]), []).append(r)
    out = []
    for (w, s, var), rs in groups.items():
        good = [r for r in rs if r["ok"] and r["job_s"] is not None]

        def stats(key, good=good):
            xs = [r[key] for r in good]
            return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)

        out.append(
            {
                "workload": w,
                "system": s,
                "variant": var,
                "runs": len(rs),
                "ok_runs": len(good),
                "verified": bool(rs) and len(good) == len(rs),
                "job_s": stats("job_s"),
                "run_s": stats("run_s"),
                "peak_pss_mib": stats("peak_pss_mib"),
                "detail": next((r["detail"] for r in rs if not r["ok"]), rs[-1]["detail"]),
            }
        )
    position = {key: i for i, key in enumerate(listed)}
    for w in {o["workload"] for o in out}:
        base = sorted(
            (
                o
                for o in out
                if o["workload"] == w
                and o["system"] == "heddle"
                and o["job_s"][0]
                and o["variant"].startswith("Rust")
            ),
            key=lambda o: position.get((o["workload"], o["system"], o["variant"]), len(listed)),
        )
        for o in out:
            if o["workload"] != w:
                continue
            if base and o["job_s"][0]:
                o["job_ratio"] = o["job_s"][0] / base[0]["job_s"][0]
                o["run_ratio"] = o["run_s"][0] / base[0]["run_s"][0]
            else:
                o["job_ratio"] = o["run_ratio"] = None
    # Each peer's fastest variant per workload (median job time).
    for w in {o["workload"] for o in out}:
        for s in {o["system"] for o in out}:
            cands = [o for o in out if o["workload"] == w and o["system"] == s and o["job_s"][0]]
            if len(cands) > 1:
                min(cands, key=lambda o: o["job_s"][0])["fastest"] = True
    order = {w: i for i, w in enumerate(WORKLOADS)}
    sysorder = {s: i for i, s in enumerate(SYSTEMS)}
    out.sort(
        key=lambda o: (
            order.get(o["workload"], 99),
            sysorder.get(o["system"], 99),
            o["job_s"][0] if o["job_s"][0] is not None else 1e9,
        )
    )
    return out


def fmt_s(t) -> str:
    med, lo, hi = t
    if med is None:
        return "—"

    def f(x):
        # Two significant digits below 10 ms (trivial tasks), else 3 decimals below 1 s.
        return (
            f"{x:.2g}"
            if x < 0.01
            else f"{x:.3f}"
            if x < 1
            else f"{x:.2f}"
            if x < 100
            else f"{x:.0f}"
        )

    return f"{f(med)} ({f(lo)}–{f(hi)})" if hi is not None and hi != lo else f(med)


def fmt_ratio(r) -> str:
    """1.0×, 12.3×; two significant digits below 0.1× (a Heddle variant faster than the base)."""
    if not r:
        return "—"
    return f"{r:.1f}×" if r >= 0.1 else f"{r:.2g}×"


def markdown_table(summary: list[dict]) -> str:
    lines = [
        "| workload | system | variant | job s, median (min–max) | whole run s, median (min–max) | "
        "peak PSS MiB | job / Heddle | run / Heddle | verified |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for o in summary:
        variant = o["variant"] + (
            " **(fastest)**" if o.get("fastest") and o["system"] != "heddle" else ""
        )
        if o.get("note"):
            variant += f" — _{o['note']}_"
        if o.get("not_implemented"):
            lines.append(
                f"| {o['workload']} | {o['system']} | {o['variant']} | — | — | — | — | — | "
                f"{o['detail']} |"
            )
            continue
        pss = f"{o['peak_pss_mib'][0]:.0f}" if o["peak_pss_mib"][0] is not None else "—"
        jr, rr = fmt_ratio(o.get("job_ratio")), fmt_ratio(o.get("run_ratio"))
        ver = "yes" if o["verified"] else f"**NO** ({o['ok_runs']}/{o['runs']}: {o['detail']})"
        lines.append(
            f"| {o['workload']} | {o['system']} | {variant} | {fmt_s(o['job_s'])} | "
            f"{fmt_s(o['run_s'])} | "
            f"{pss} | {jr} | {rr} | {ver} |"
        )
    return "\n".join(lines)


def allreduce_table(runs: list[dict]) -> tuple[str, list[dict]]:
    acc: dict = {}
    for run in runs:
        for r in run.get("records", []):
            acc.setdefault((r["bytes"], r["system"]), []).append(r)
    rows = []
    for b in sorted({k[0] for k in acc}):
        h, m = acc.get((b, "heddle"), []), acc.get((b, "mpi"), [])
        hy = [r for r in acc.get((b, "heddle-py"), []) if r.get("p50_us") is not None]
        hp = statistics.median(r["p50_us"] for r in h) if h else None
        mp = statistics.median(r["p50_us"] for r in m) if m else None
        yp = statistics.median(r["p50_us"] for r in hy) if hy else None
        rows.append(
            {
                "bytes": b,
                "heddle_p50_us": hp,
                "mpi_p50_us": mp,
                "heddle_py_p50_us": yp,
                "heddle_runs": [r["p50_us"] for r in h],
                "mpi_runs": [r["p50_us"] for r in m],
                "heddle_py_runs": [r["p50_us"] for r in hy],
                "verified": all(r.get("verified") for r in h + m + acc.get((b, "heddle-py"), []))
                and bool(h and m),
            }
        )
    lines = [
        "| bytes | Heddle (Rust) p50 µs (min–max) | Heddle (Python heddle.comm) p50 µs | Open MPI "
        "(mpi4py) p50 µs (min–max) "
        "| Heddle Rust / MPI | Heddle Python / MPI | verified |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]

    def f(xs):
        if not xs:
            return "—"
        med = statistics.median(xs)
        return f"{med:.2f} ({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else f"{med:.2f}"

    for r in rows:
        ratio = (
            f"{r['heddle_p50_us'] / r['mpi_p50_us']:.2f}"
            if r["heddle_p50_us"] and r["mpi_p50_us"]
            else "—"
        )
        pyratio = (
            f"{r['heddle_py_p50_us'] / r['mpi_p50_us']:.2f}"
            if r["heddle_py_p50_us"] and r["mpi_p50_us"]
            else "—"
        )
        size = r["bytes"]
        label = (
            f"{size >> 20} MiB"
            if size >= 1 << 20
            else f"{size >> 10} KiB"
            if size >= 1024
            else f"{size} B"
        )
        lines.append(
            f"| {label} | {f(r['heddle_runs'])} | {f(r['heddle_py_runs'])} | {f(r['mpi_runs'])} | "
            f"{ratio} | {pyratio} "
            f"| {'yes' if r['verified'] else 'NO'} |"
        )
    return "\n".join(lines), rows


def chart(summary: list[dict], ar_rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = [w for w in WORKLOADS if any(o["workload"] == w and o["job_s"][0] for o in summary)]
    panels = len(wls) + (1 if ar_rows else 0)
    if not panels:
        return
    cols = min(3, panels)
    rows_n = -(-panels // cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(5.4 * cols, 5.2 * rows_n), squeeze=False)
    flat = [a for row in axes for a in row]
    colors = {
        "heddle": "#d62728",
        "mpi": "#7f7f7f",
        "spark": "#ff7f0e",
        "dask": "#1f77b4",
        "ray": "#2ca02c",
        "flink": "#8c564b",
    }
    for ax, w in zip(flat, wls):
        os_ = [o for o in summary if o["workload"] == w and o["job_s"][0]]
        labels = [f"{o['system']}: {o['variant'][:26]}" for o in os_]
        x = list(range(len(os_)))
        med = [o["job_s"][0] for o in os_]
        err = [
            [m - o["job_s"][1] for m, o in zip(med, os_)],
            [o["job_s"][2] - m for m, o in zip(med, os_)],
        ]
        run = [o["run_s"][0] for o in os_]
        c = [colors.get(o["system"], "k") for o in os_]
        ax.bar([i - 0.2 for i in x], med, 0.4, yerr=err, capsize=3, color=c, label="job")
        ax.bar([i + 0.2 for i in x], run, 0.4, color=c, alpha=0.35, label="whole run")
        ax.set_xticks(x)
        ax.set_xticklabels(labels, rotation=55, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_title(f"{w}: seconds (log), median, min–max")
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in flat[panels:]:
        ax.axis("off")
    if ar_rows:
        ax = flat[panels - 1]
        xs = [r["bytes"] for r in ar_rows]
        for key, name, color in (
            ("heddle_p50_us", "heddle (Rust)", colors["heddle"]),
            ("heddle_py_p50_us", "heddle (Python)", "#9467bd"),
            ("mpi_p50_us", "Open MPI (mpi4py)", colors["mpi"]),
        ):
            pts = [(x, r[key]) for x, r in zip(xs, ar_rows) if r.get(key)]
            if pts:
                ax.plot(
                    [p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, color=color
                )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("bytes")
        ax.set_title("allreduce p50 latency (µs), 2 ranks")
        ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def machine() -> dict:
    cpu = "unknown"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    for line in open("/proc/meminfo"):
        if line.startswith("MemTotal:"):
            mem_kib = int(line.split()[1])
    os_name = platform.platform()
    try:
        for line in open("/etc/os-release"):
            if line.startswith("PRETTY_NAME="):
                os_name = (
                    line.split("=", 1)[1].strip().strip('"') + f" (kernel {platform.release()})"
                )
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(mem_kib / 2**20, 1),
        "os": os_name,
        "python": platform.python_version(),
    }


def write_docs(
    cmdline: str,
    repeat: int,
    quick: bool,
    sizes: Sizes,
    summary: list[dict],
    ar_md: str,
    mach: dict,
    vers: dict,
    started: str,
    duration_s: float,
    notes: list[str],
) -> None:
    fastest = []
    for w in WORKLOADS:
        for s in SYSTEMS:
            if s == "heddle":
                continue
            c = [o for o in summary if o["workload"] == w and o["system"] == s and o.get("fastest")]
            n = [o for o in summary if o["workload"] == w and o["system"] == s and o["job_s"][0]]
            if c and len(n) > 1:
                fastest.append(
                    f"- {w}, {s}: **{c[0]['variant']}** ({fmt_s(c[0]['job_s'])} s job time; "
                    f"other variants: "
                    + ", ".join(f"{o['variant']} {o['job_s'][0]:.2f} s" for o in n if o is not c[0])
                    + ")"
                )
            elif len(n) == 1:
                fastest.append(f"- {w}, {s}: {n[0]['variant']} (the only variant)")
    text = (
        f"""# Benchmarks: Heddle side by side with Open MPI, Spark, Dask, Ray and Flink

Generated by `benches/compare/run.py` (do not edit by hand: rerun the command).
Last run: {started} UTC, {duration_s / 60:.1f} minutes, {repeat} repeat(s){" (**--quick**: small data, a smoke test, not a measurement)" if quick else ""}.

## Command

```sh
{cmdline}
```

`make bench-compare` runs `python3 benches/compare/run.py --repeat 3`; `make bench-compare-quick` runs
`--quick --repeat 1` (small data, under 5 minutes once the peers are installed). Options:
`--workloads {",".join(WORKLOADS)}`, `--systems {",".join(SYSTEMS)}`, `--repeat N`, `--quick`, `--merge` (replace only
the rows of the workloads/systems/variants a run ran inside `results/latest.json`, keep the others, rebuild this page).

## Machine

- CPU: {mach["cpu"]}, {mach["cores"]} cores (a shared, noisy VM: other builds may run; look at min–max)
- Memory: {mach["memory_gib"]} GiB
- OS: {mach["os"]}
- Every system runs {WORKERS} workers (Heddle: `heddle run -n 2`; MPI: `mpirun -n 2`; Spark: `local[2]`, driver memory 8g;
  Dask: LocalCluster of 2 worker processes × 1 thread; Ray: `ray.init(num_cpus=2)`; Flink: PyFlink local mini-cluster,
  parallelism 2)
"""  # noqa: E501 (lines of the generated page)
        + "".join(f"- {s}: {v}\n" for s, v in vers.items())
        + f"""
## Workloads and data

| workload | data (seeded, generated by the harness) | job |
|---|---|---|
| wordcount | {sizes.megabytes} MB of text from Heddle's generator (`wordcount_task --generate --seed 1`: 12 words a line, 100,000-word Zipf vocabulary) | count every word; the full count table must equal a `collections.Counter` reference |
| kmeans | {sizes.points:,} × 2 float64 points in 16 Gaussian blobs (`.npy`) | 10 iterations of Lloyd's algorithm from the first 16 points; centers within 1e-6 of a numpy reference |
| sort | {sizes.records:,} records of 100 bytes as lines (10-byte alphanumeric key) = {sizes.records * 101 / 1e9:.2f} GB | sort by key into part files; checked: key order within and across files, record count, order-independent checksum |
| allreduce | float64 vectors of 8 B – 16 MiB, 2 ranks | `heddle bench collectives --vs mpi` (p50 per call, checked results) |
| tasks | {sizes.tasks:,} tasks, each squaring an integer | the sum must match |
| streaming | {sizes.events:,} `ts_ms,key` CSV events in {sizes.files} files (10,000 events/s of event time, up to 2 s out of order, 1,000 keys) | count per key in tumbling 10 s event-time windows (5 s watermark); every (window, key) count must equal a numpy reference |

## Results

Job time: measured inside each program, start-up excluded (after `SparkSession`/`Client`/`ray.init`/`MPI_Init`/
`heddle::init`), the same way for everyone; for K-means every system loads or caches its points before the clock starts.
Whole run: wall clock of the whole command (start-up, job and shutdown; the program's own output check subtracted).
Peak PSS: the largest sum of the proportional set size of every process of the run (JVM, Python workers, raylet, …),
sampled every 0.05 s for the first second, every 0.1 s until 5 s, then every 0.25 s, from `/proc/PID/smaps_rollup`. Ratios divide the median by the median of Heddle's (first) Rust variant.

{markdown_table(summary)}

![job times](benchmarks.png)

### Allreduce latency (2 ranks)

{ar_md}

### Each peer's fastest variant

{chr(10).join(fastest) if fastest else "- (no peer ran more than one variant)"}

## Notes

"""  # noqa: E501 (lines of the generated page)
        + "\n".join(f"- {n}" for n in notes)
        + "\n"
    )
    (DOCS / "benchmarks.md").write_text(text)


NOTES = [
    "Every system's output is verified against a reference (benches/compare/reference.py): the "
    "peers check their own "
    "output after the clock stops; Heddle's part files, centers and window counts are checked by "
    "the harness with the "
    "same code (Heddle's word count runs with `--no-verify`; its K-means, terasort and streaming "
    "window count also "
    "validate themselves in-process, its task programs check their sum).",
    "Heddle's terasort_dataflow runs with `--time-read`: its clock starts before each worker reads "
    "its share of the input, as "
    "the peers' clocks do.",
    "Runs are interleaved: each repeat runs every workload on every system, rotating the order of "
    "the systems, after a "
    "`sync` and an idle pause; medians over the repeats are shown with min–max.",
    "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (set on this VM for old OpenBLAS builds) are unset for "
    "every run; "
    "OMP/OPENBLAS/MKL threads are 1 per worker process.",
    "Spark uses 8 shuffle partitions with adaptive execution and 32 MiB input splits (the "
    "200-partition default is for "
    "clusters); Dask and Ray use 8 input partitions; MPI one per rank.",
    "Trivial tasks, Heddle: `tiny_tasks --via graph` (task API: a source vertex with one instance "
    "per task, placed "
    "round robin on the workers, each emitting its square once, and a reduce edge into one task; "
    "building and planning "
    "the graph are inside the clock), `--via ports` (CCR: each worker queues its share as closures "
    "on a one-thread "
    "`Dispatcher`, a multiple-item receive sums them, an allreduce adds the workers' sums) and "
    "examples/python/tasks.py (the task-graph version with Python task objects). Spark, Dask and "
    "Ray ship every "
    "task from a driver to worker processes; Heddle's workers each run their own share (SPMD), so "
    "only the sums "
    "cross processes.",
    "Streaming, Heddle: `stream_events` (Stream API: event time with a 5 s watermark, tumbling 10 "
    "s windows, counts "
    "kept in memory by each worker and written after the clock for the harness's check). The data "
    "API has no stream "
    "source of a directory of files yet, so it replays the files with `stream_from_vec`: every "
    "worker reads and "
    "parses all of them inside the clock and streams its half (the two halves of event time in "
    "parallel; a "
    "window's watermark is the least of its inputs'). examples/python/stream_events.py is the same "
    "job with heddle.data's Stream "
    "(`stream_from_list`, `Window.tumbling(10000).event_time(5000)`, `max` as the reduce and the "
    "window's record count "
    "as the count), and examples/python/sort.py sorts with heddle.data: natively by default "
    "(`s.text_file(p).sort(key_bytes=10).write_text(d)`: lines read, sorted and written as "
    "101-byte lines without a "
    "Python object per record), or with `--python` through Python (binary text blocks split into "
    "(key, record) "
    "bytes pairs in Python, `sort_by_key`, each sorted partition written as raw records; records "
    "cross workers "
    "pickled). Both are checked by the harness like the Rust programs.",
    "Word count, Heddle Python: examples/python/wordcount.py counts natively by default "
    "(`s.text_file(p).words().value_counts()`: no Python object per word), or with `--python` with "
    "a "
    "`collections.Counter` per 64 KiB text block.",
    "Flink (PyFlink 2.x, Table API SQL only: no Python UDF on the data path) runs word count, sort "
    "and the streaming "
    "window count; its results are written by filesystem sinks and read back by the checker "
    "(PyFlink's row-by-row "
    "collect is far too slow for large results).",
]


def merge_results(new: dict, path: Path) -> dict:
    """``new``'s runs merged into the results file ``path``: the rows of every (workload,
    system, variant) ``new`` ran replace that key's earlier rows; every other row stays (and
    the earlier allreduce runs, unless ``new`` ran allreduce). The earlier run's command, date
    and repeat count stay in front; each merge is listed in ``merged`` and in a note."""
    if not path.exists():
        log(f"--merge: {path} does not exist; writing this run's results alone")
        return new
    old = json.loads(path.read_text())
    if bool(old.get("quick")) != bool(new["quick"]) or old.get("sizes") != new["sizes"]:
        raise SystemExit(
            f"--merge: {path} was made with other data sizes (quick={old.get('quick')}, "
            f"sizes {old.get('sizes')}); rerun without --merge or with the same sizes"
        )
    ran = {(r["workload"], r["system"], r["variant"]) for r in new["runs"]}
    kept = [r for r in old["runs"] if (r["workload"], r["system"], r["variant"]) not in ran]
    replaced = len(old["runs"]) - len(kept)
    ar_new = bool(new["allreduce"]["runs"])
    merged = dict(old)
    merged["runs"] = kept + new["runs"]
    merged["allreduce"] = {"runs": new["allreduce"]["runs"] if ar_new else old["allreduce"]["runs"]}
    merged["workloads"] = [
        w for w in WORKLOADS if w in set(old.get("workloads", [])) | set(new["workloads"])
    ]
    merged["systems"] = [
        s for s in SYSTEMS if s in set(old.get("systems", [])) | set(new["systems"])
    ]
    merged["versions"] = dict(old.get("versions", {}))
    for k, v in new["versions"].items():
        was = merged.get("versions", {}).get(k)
        merged["versions"][k] = v if was in (None, v) else f"{was} (the merged rows: {v})"
    merged.pop("summary", None)
    entry = {
        "started_utc": new["started_utc"],
        "duration_s": new["duration_s"],
        "command": new["command"],
        "repeat": new["repeat"],
        "replaced_rows": replaced,
        "new_rows": len(new["runs"]),
        "variants": sorted(" / ".join(k) for k in ran),
    }
    merged["merged"] = [*old.get("merged", []), entry]
    merged["command"] = (
        old["command"]
        + f"\n# then, replacing only the rows it ran ({new['started_utc']} UTC):\n"
        + new["command"]
    )
    keys = ", ".join(f"{w} / {s} / {v}" for w, s, v in sorted(ran)) + (
        ", allreduce" if ar_new else ""
    )
    merged["notes"] = (
        old.get("notes", [])
        + new["notes"]
        + [
            f"Merged run ({new['started_utc']} UTC, {new['duration_s'] / 60:.1f} minutes, "
            f"{new['repeat']} repeat(s), "
            f"`{new['command']}`): its rows ({keys}) replace that key's rows of the earlier run; "
            "every other row is "
            f"from the run of {old['started_utc']} UTC (versions: "
            f"{', '.join(f'{k} {v}' for k, v in new['versions'].items())}). "
            "Ratios divide by the Heddle Rust base row of the same workload, so where the merge "
            "replaced that row the other "
            f"systems' ratios of that workload compare runs made at different times."
        ]
    )
    log(f"--merge: {len(new['runs'])} new rows replace {replaced} of {len(old['runs'])} in {path}")
    return merged


def report(results: dict, args) -> int:
    """Table, JSON, chart and docs from the runs of ``results`` (also for --report-from)."""
    rows, ar_runs = results["runs"], results["allreduce"]["runs"]
    sizes = Sizes(**results["sizes"])
    wl, sy = results.get("workloads", WORKLOADS), results.get("systems", SYSTEMS)
    vs = [v for v in variants() if v.workload in wl and v.system in sy]
    summary = summarize(rows, [(v.workload, v.system, v.variant) for v in vs])
    for v in vs:
        if not v.make_cmd:
            summary.append(
                {
                    "workload": v.workload,
                    "system": v.system,
                    "variant": v.variant,
                    "not_implemented": True,
                    "detail": v.note or "not yet implemented",
                    "job_s": (None, None, None),
                    "run_s": (None, None, None),
                    "peak_pss_mib": (None, None, None),
                }
            )
    order = {w: i for i, w in enumerate(WORKLOADS)}
    summary.sort(
        key=lambda o: (
            order.get(o["workload"], 99),
            SYSTEMS.index(o["system"]) if o["system"] in SYSTEMS else 99,
        )
    )
    for o in summary:
        for v in vs:
            if (
                v.note
                and v.make_cmd
                and (v.workload, v.system, v.variant) == (o["workload"], o["system"], o["variant"])
            ):
                o["note"] = v.note
    ar_md, ar_rows = allreduce_table(ar_runs) if ar_runs else ("(not run)", [])
    results["summary"], results["allreduce"]["rows"] = summary, ar_rows

    print()
    print(markdown_table(summary))
    if ar_runs:
        print()
        print(ar_md)
    RESULTS.mkdir(exist_ok=True)
    quick = results["quick"]
    json_path = args.json or RESULTS / ("latest-quick.json" if quick else "latest.json")
    json_path.write_text(json.dumps(results, indent=1, default=str))
    log(f"wrote {json_path}")
    docs = not args.no_docs and not quick
    png = (
        (DOCS / "benchmarks.png")
        if docs
        else (RESULTS / ("chart-quick.png" if quick else "chart.png"))
    )
    chart(summary, ar_rows, png)
    log(f"wrote {png}")
    if docs:
        notes = list(NOTES) + list(results.get("notes", []))
        loads = [r["load1"] for r in rows if r.get("load1") is not None]
        if loads:
            notes.append(
                "Load average (1 min) just before each run: median "
                f"{statistics.median(loads):.1f}, "
                f"max {max(loads):.1f} on {os.cpu_count()} cores. It includes the previous run's "
                "own load (up to about 2 "
                f"after a run that kept both cores busy); the rest is other work on the VM."
            )
        if results["repeat"] == 1:
            notes.append(
                "This run used `--repeat 1`: one measurement per cell (no min–max). Three repeats "
                "take about "
                "40 minutes on this 2-core VM (Spark and Flink start a JVM per run; Spark's 10,000 "
                "tasks alone "
                "take 5 minutes), more than the time budget of the run that produced this page; "
                "`make bench-compare` runs three."
            )
        write_docs(
            results["command"],
            results["repeat"],
            quick,
            sizes,
            summary,
            ar_md,
            results["machine"],
            results["versions"],
            results["started_utc"],
            results["duration_s"],
            notes,
        )
        log(f"wrote {DOCS / 'benchmarks.md'}")
    failed = [r for r in rows if not r["ok"]] + [r for r in ar_runs if not r["ok"]]
    if failed:
        log(f"{len(failed)} run(s) failed or did not verify")
    return 1 if failed else 0
