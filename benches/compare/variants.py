"""The variants: every (workload, system, variant) the harness knows, each with the command
that runs it (Heddle's Rust examples, its Python examples, the peer programs under peers/),
a note, and, for Heddle, the check of its output files against the reference."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path

from config import EXAMPLES, HEDDLE, MPIRUN_FLAGS, PEERS, ROOT, WORKERS


@dataclass
class Variant:
    workload: str
    system: str
    variant: str
    make_cmd: object = None  # (data, out, sizes, setup) -> argv, or None: not implemented
    note: str = ""
    harness_check: object = None  # (data, out) -> (ok, detail) for Heddle's outputs
    max_repeats: int = 0  # run in the first N repeats only (0: every repeat)
    env: dict = field(default_factory=dict)


def heddle_run(example: str, *args) -> list[str]:
    return [str(HEDDLE), "run", "-n", str(WORKERS), "--", str(EXAMPLES / example), *map(str, args)]


def peer(system: str, script: str):
    def make(d, out, sizes, setup):
        py = setup["python"]
        args = [str(PEERS / system / script), "--workers", str(WORKERS)]
        if d:
            args += ["--input", str(d["input"]), "--ref", str(d["ref"])]
        else:
            args += ["--input", "-"]
        args += ["--output", str(out), "--tasks", str(sizes.tasks)]
        if system == "mpi":
            return ["mpirun", "-n", str(WORKERS), *MPIRUN_FLAGS, py, *args]
        return [py, *args]

    return make


def check_heddle_wordcount(d, out):
    import reference

    return reference.check_wordcount(reference.read_wordcount_dir(out), d["ref"])


def coords_file(out) -> Path:
    """``out``/coords.npy, its directory made (the run's output directory)."""
    Path(out).mkdir(parents=True, exist_ok=True)
    return Path(out) / "coords.npy"


def check_heddle_mds(d, out):
    import reference

    return reference.check_mds(Path(out) / "coords.npy", d["input"])


def check_heddle_kmeans(d, out):
    import reference

    return reference.check_kmeans(reference.read_centers_csv(Path(out) / "centers.csv"), d["ref"])


def check_heddle_sort(d, out):
    import reference

    return reference.check_sorted_dir(out, d["ref"])


def check_heddle_streaming(d, out):
    import reference

    return reference.check_window_counts(reference.read_window_counts_dir(out), d["ref"])


def heddle_python_example(name: str) -> Path | None:
    p = ROOT / "examples" / "python" / f"{name}.py"
    return p if p.exists() and (ROOT / ".venv-py" / "bin" / "python").exists() else None


_example_ok: dict = {}


def python_example_runs(py: str, example: Path) -> bool:
    """Whether ``example --help`` runs in .venv-py (its imports resolve), cached."""
    if example not in _example_ok:
        try:
            r = subprocess.run(
                [py, str(example), "--help"],
                check=False,
                capture_output=True,
                timeout=120,
                cwd=str(ROOT),
            )
            _example_ok[example] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _example_ok[example] = False
    return _example_ok[example]


def variants() -> list[Variant]:
    v = [
        # word count ---------------------------------------------------------------------
        Variant(
            "wordcount",
            "heddle",
            "Rust task API (wordcount_task)",
            lambda d, out, s, st: heddle_run(
                "wordcount_task", "--input", d["input"], "--output", out, "--no-verify"
            ),
            harness_check=check_heddle_wordcount,
        ),
        Variant(
            "wordcount",
            "heddle",
            "Rust data API (wordcount: flat_map_reduce_by_key)",
            lambda d, out, s, st: heddle_run(
                "wordcount", "--input", d["input"], "--output", out, "--no-verify"
            ),
            harness_check=check_heddle_wordcount,
        ),
        Variant("wordcount", "mpi", "mpi4py, Counter + gather", peer("mpi", "wordcount.py")),
        Variant("wordcount", "spark", "DataFrame", peer("spark", "wordcount_df.py")),
        Variant("wordcount", "spark", "RDD", peer("spark", "wordcount_rdd.py")),
        Variant(
            "wordcount", "dask", "bag, Counter per partition", peer("dask", "wordcount_bag.py")
        ),
        Variant("wordcount", "ray", "tasks, Counter per range", peer("ray", "wordcount_tasks.py")),
        Variant("wordcount", "flink", "Table API SQL (UNNEST)", peer("flink", "wordcount_sql.py")),
        Variant(
            "wordcount",
            "polars",
            "lazy, str.extract_all + group_by",
            peer("native", "wordcount_polars.py"),
        ),
        Variant(
            "wordcount",
            "duckdb",
            "SQL, regexp_split_to_array + GROUP BY",
            peer("native", "wordcount_duckdb.py"),
        ),
        Variant(
            "wordcount",
            "datafusion",
            "SQL, string_to_array + unnest + GROUP BY",
            peer("native", "wordcount_datafusion.py"),
        ),
        # K-means ------------------------------------------------------------------------
        Variant(
            "kmeans",
            "heddle",
            "Rust task API (kmeans_task)",
            lambda d, out, s, st: heddle_run(
                "kmeans_task", "--input", d["input"], "--k", 16, "--iterations", 10, "--output", out
            ),
            harness_check=check_heddle_kmeans,
        ),
        Variant("kmeans", "mpi", "mpi4py + numpy, Allreduce", peer("mpi", "kmeans.py")),
        Variant("kmeans", "spark", "RDD numpy blocks", peer("spark", "kmeans_numpy.py")),
        Variant("kmeans", "spark", "MLlib", peer("spark", "kmeans_mllib.py")),
        Variant("kmeans", "dask", "array", peer("dask", "kmeans_array.py")),
        Variant("kmeans", "ray", "tasks over numpy blocks", peer("ray", "kmeans_tasks.py")),
        Variant(
            "kmeans",
            "sklearn",
            "KMeans(algorithm='lloyd')",
            peer("native", "kmeans_sklearn.py"),
            note="one process, its BLAS and OpenMP pools on the 2 cores",
        ),
        Variant(
            "kmeans",
            "flink",
            "not included",
            None,
            note="K-means is in Flink ML, a separate library (not on PyPI with apache-flink)",
        ),
        # mds ----------------------------------------------------------------------------
        Variant(
            "mds",
            "heddle",
            "Rust heddle::apps::mds, DA-SMACOF (mds)",
            lambda d, out, s, st: heddle_run(
                "mds", "--input", d["input"], "--dim", 3, "--output", coords_file(out)
            ),
            harness_check=check_heddle_mds,
        ),
        Variant(
            "mds",
            "sklearn",
            "MDS(metric_mds=True, n_init=1)",
            peer("native", "mds_sklearn.py"),
            note="SMACOF from a random start, at most 300 iterations; one process, its BLAS "
            "pools on the 2 cores",
        ),
        # sort ---------------------------------------------------------------------------
        Variant(
            "sort",
            "heddle",
            "Rust dataflow sort (terasort_dataflow)",
            lambda d, out, s, st: heddle_run(
                "terasort_dataflow", "--input", d["input"], "--time-read", "--output", out
            ),
            harness_check=check_heddle_sort,
        ),
        Variant(
            "sort",
            "heddle",
            "Rust data API, sort_by_key (terasort)",
            lambda d, out, s, st: heddle_run("terasort", "--input", d["input"], "--output", out),
            harness_check=check_heddle_sort,
        ),
        Variant("sort", "mpi", "mpi4py + numpy sample sort", peer("mpi", "sort.py")),
        Variant("sort", "spark", "DataFrame", peer("spark", "sort_df.py")),
        Variant("sort", "spark", "RDD", peer("spark", "sort_rdd.py")),
        Variant("sort", "dask", "DataFrame sort_values", peer("dask", "sort_df.py")),
        Variant("sort", "ray", "tasks, numpy sample sort", peer("ray", "sort_tasks.py")),
        Variant(
            "sort",
            "polars",
            "read_csv, sort on the key, write_csv",
            peer("native", "sort_polars.py"),
        ),
        Variant(
            "sort",
            "duckdb",
            "COPY (… ORDER BY key) TO csv",
            peer("native", "sort_duckdb.py"),
        ),
        Variant(
            "sort",
            "datafusion",
            "COPY (… ORDER BY key) TO csv",
            peer("native", "sort_datafusion.py"),
        ),
        Variant(
            "sort",
            "flink",
            "Table API SQL ORDER BY",
            peer("flink", "sort_sql.py"),
            note="a global ORDER BY runs in one task",
        ),
        # trivial tasks --------------------------------------------------------------------
        Variant(
            "tasks",
            "heddle",
            "Rust task API, a task instance each + reduce edge (tiny_tasks --via graph)",
            lambda d, out, s, st: heddle_run("tiny_tasks", "--tasks", s.tasks, "--via", "graph"),
        ),
        Variant(
            "tasks",
            "heddle",
            "Rust CCR ports, closures on 1-thread dispatchers + allreduce (tiny_tasks --via ports)",
            lambda d, out, s, st: heddle_run("tiny_tasks", "--tasks", s.tasks, "--via", "ports"),
        ),
        Variant(
            "tasks",
            "heddle",
            "Rust heddle::futures, Executor::submit per task (futures_tasks)",
            lambda d, out, s, st: [
                str(HEDDLE),
                "run",
                "-n",
                str(WORKERS + 1),
                "--",
                str(EXAMPLES / "futures_tasks"),
                "--tasks",
                str(s.tasks),
            ],
            note=f"a driver rank and {WORKERS} worker ranks, as Ray's and Dask's driver and "
            "workers",
        ),
        Variant(
            "tasks",
            "spark",
            "RDD, 1 partition per task",
            peer("spark", "tasks.py"),
            max_repeats=1,
            note="run in the first repeat only (about 30 ms a task: 5 minutes for 10,000)",
        ),
        Variant("tasks", "dask", "futures (client.map)", peer("dask", "tasks.py")),
        Variant("tasks", "ray", "tasks", peer("ray", "tasks.py")),
        # streaming ------------------------------------------------------------------------
        Variant(
            "streaming",
            "heddle",
            "Rust Stream API, event-time tumbling windows (stream_events)",
            lambda d, out, s, st: heddle_run(
                "stream_events", "--input", Path(d["input"]) / "part-*.csv", "--output", out
            ),
            harness_check=check_heddle_streaming,
            note="replays the files with stream_from_vec: each worker reads and parses all of them "
            "inside the clock",
        ),
        Variant("streaming", "spark", "Structured Streaming", peer("spark", "streaming_window.py")),
        Variant(
            "streaming",
            "bytewax",
            "count_window, tumbling event-time windows",
            peer("bytewax", "streaming_window.py"),
            note="Bytewax's workers are threads of one process (cli_main, workers_per_process)",
        ),
        Variant("tasks", "mpi", "not applicable", None, note="MPI has no task API"),
        Variant("streaming", "mpi", "not applicable", None, note="MPI has no streaming API"),
        Variant(
            "streaming",
            "dask",
            "not supported",
            None,
            note="Dask has no streaming API (streamz is a separate project)",
        ),
        Variant(
            "streaming",
            "ray",
            "not supported",
            None,
            note="Ray has no streaming API (Ray Data is batch)",
        ),
        Variant(
            "streaming",
            "flink",
            "Table API SQL, TUMBLE window",
            peer("flink", "streaming_window.py"),
            note="reads the same events as one file (one source reader keeps event time in order)",
        ),
        Variant(
            "tasks", "flink", "not applicable", None, note="Flink has no API for independent tasks"
        ),
    ]
    # The Python front end's versions (examples/python/NAME.py), run when the heddle package
    # installed in .venv-py (make python-install) can import them: (workload, example,
    # variant, extra arguments, harness check[, note]).
    python_rows = [
        (
            "wordcount",
            "wordcount",
            "Python heddle.data, native words().value_counts()",
            lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify"],
            check_heddle_wordcount,
        ),
        (
            "wordcount",
            "wordcount",
            "Python heddle.data, Counter per text block in Python (--python)",
            lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify", "--python"],
            check_heddle_wordcount,
        ),
        (
            "kmeans",
            "kmeans",
            "Python (heddle.data)",
            lambda d, out, s: [
                "--input",
                d["input"],
                "--k",
                16,
                "--iterations",
                10,
                "--output",
                out,
            ],
            check_heddle_kmeans,
        ),
        (
            "mds",
            "mds",
            "Python heddle.apps.mds (mds.py)",
            lambda d, out, s: ["--input", d["input"], "--dim", 3, "--output", coords_file(out)],
            check_heddle_mds,
        ),
        (
            "tasks",
            "tasks",
            "Python heddle.task, a task instance each + reduce edge (tasks.py)",
            lambda d, out, s: ["--tasks", s.tasks],
            None,
        ),
        (
            "sort",
            "sort",
            "Python heddle.data, native text_file(..).sort(key_bytes=10).write_text(..) (sort.py)",
            lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify"],
            check_heddle_sort,
            "lines read, sorted (external sort, 1 GiB budget per partition) and written natively "
            "as 101-byte lines; "
            "the clock includes reading and writing",
        ),
        (
            "sort",
            "sort",
            "Python heddle.data, sort_by_key of (key, record) bytes pairs in Python (sort.py "
            "--python)",
            lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify", "--python"],
            check_heddle_sort,
            "binary text blocks split into pairs in Python, records pickled across workers; the "
            "clock "
            "includes reading and writing",
        ),
        (
            "streaming",
            "stream_events",
            "Python Stream, event-time tumbling windows (stream_events.py)",
            lambda d, out, s: ["--input", Path(d["input"]) / "part-*.csv", "--output", out],
            check_heddle_streaming,
            "replays the files with stream_from_list: each worker reads and parses all of them "
            "inside the clock",
        ),
    ]
    py = str(ROOT / ".venv-py" / "bin" / "python")
    for workload, name, label, extra, check, *note in python_rows:
        ex = heddle_python_example(name)
        if not ex:
            continue
        if not python_example_runs(py, ex):
            v.append(
                Variant(
                    workload,
                    "heddle",
                    label,
                    None,
                    note=f"examples/python/{name}.py is there but .venv-py's heddle cannot run it "
                    "(make python-install)",
                )
            )
            continue

        def make(d, out, s, st, ex=ex, extra=extra):
            return [
                py,
                "-m",
                "heddle",
                "run",
                "-n",
                str(WORKERS),
                str(ex),
                *map(str, extra(d, out, s)),
            ]

        v.append(
            Variant(
                workload, "heddle", label, make, harness_check=check, note=note[0] if note else ""
            )
        )
    # heddle.futures: a driver rank submits, WORKERS ranks run the tasks (as Ray's and Dask's
    # driver and their WORKERS worker processes).
    futures_ex = heddle_python_example("futures_tasks")
    if futures_ex and python_example_runs(py, futures_ex):

        def make_futures(d, out, s, st, ex=futures_ex):
            return [
                py,
                "-m",
                "heddle",
                "run",
                "-n",
                str(WORKERS + 1),
                str(ex),
                "--tasks",
                str(s.tasks),
            ]

        v.append(
            Variant(
                "tasks",
                "heddle",
                "Python heddle.futures, executor.submit per task (futures_tasks.py)",
                make_futures,
                note=f"a driver rank and {WORKERS} worker ranks, as Ray's and Dask's driver and "
                "workers",
            )
        )
    # The same word counts on the dense text (the most frequent words the shortest).
    v += [replace(x, workload="wordcount_dense") for x in v if x.workload == "wordcount"]
    return v
