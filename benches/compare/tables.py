"""The figures of a comparison run: medians and ratios of the runs (``summarize``), the
markdown tables of the workloads and of Allreduce, and the chart."""

from __future__ import annotations

import statistics
from pathlib import Path

from config import SYSTEMS, WORKLOADS


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
        "polars": "#9467bd",
        "duckdb": "#bcbd22",
        "sklearn": "#17becf",
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
