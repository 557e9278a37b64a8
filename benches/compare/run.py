#!/usr/bin/env python3
"""Side-by-side benchmark suite: Heddle against Open MPI (mpi4py), Spark, Dask, Ray and Flink.

    python3 benches/compare/run.py [--workloads wordcount,kmeans,sort,allreduce,tasks,streaming]
                                   [--systems heddle,mpi,spark,dask,ray,flink] [--repeat 3] [--quick] [--merge]

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
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BENCHES = HERE.parent
ROOT = BENCHES.parent
VENV = BENCHES / ".venv-compare"
DATA = BENCHES / ".data-compare"
RESULTS = HERE / "results"
DOCS = ROOT / "docs"
RELEASE = ROOT / "target" / "release"
HEDDLE = RELEASE / "heddle"
EXAMPLES = RELEASE / "examples"
PEERS = HERE / "peers"

WORKLOADS = ["wordcount", "kmeans", "sort", "allreduce", "tasks", "streaming"]
SYSTEMS = ["heddle", "mpi", "spark", "dask", "ray", "flink"]
MPIRUN_FLAGS = ["--bind-to", "none", "--mca", "pml", "ob1", "--mca", "btl", "self,vader",
                "--mca", "btl_vader_single_copy_mechanism", "none"]
WORKERS = 2
SWEEP = [8, 1024, 65536, 1 << 20, 16 << 20]  # allreduce bytes


def log(msg: str) -> None:
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# Virtualenvs

def in_own_venv() -> bool:
    return Path(sys.prefix).resolve() == VENV.resolve()


def ensure_venv(venv: Path, requirements: Path, check: str) -> Path:
    """Creates ``venv`` and installs ``requirements`` unless its stamp matches; returns python."""
    py = venv / "bin" / "python"
    stamp = venv / ".requirements.stamp"
    if not py.exists():
        log(f"creating {venv.relative_to(ROOT)}")
        base = shutil.which("python3") or sys.executable
        subprocess.run([base, "-m", "venv", str(venv)], check=True, timeout=600)
    fresh = stamp.exists() and stamp.read_bytes() == requirements.read_bytes()
    if not fresh or subprocess.run([str(py), "-c", check], capture_output=True, timeout=300).returncode:
        log(f"installing {requirements.relative_to(ROOT)} into {venv.relative_to(ROOT)}")
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "-r", str(requirements)], check=True, timeout=1800)
        shutil.copyfile(requirements, stamp)
    return py


def bootstrap() -> None:
    """Re-executes this script inside benches/.venv-compare (created on first use)."""
    if in_own_venv():
        return
    try:
        import venv  # noqa: F401
        import ensurepip  # noqa: F401
    except ImportError:
        apt_install(["python3-venv"])
    py = ensure_venv(VENV, HERE / "requirements-harness.txt", "import numpy, matplotlib")
    os.execv(str(py), [str(py), str(Path(__file__).resolve()), *sys.argv[1:]])


_apt_updated = False


def apt_install(packages: list[str]) -> None:
    global _apt_updated
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        subprocess.run(sudo + ["apt-get", "update", "-q"], check=True, env=env, timeout=900)
        _apt_updated = True
    subprocess.run(sudo + ["apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
                   check=True, env=env, timeout=1800)


def java_ok() -> bool:
    java = shutil.which("java")
    if not java:
        return False
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60).stderr
    try:
        major = int(out.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        return False
    return major >= 17


def setup_system(system: str) -> dict:
    """Installs a peer on demand; returns {python, env, versions}."""
    if system == "heddle":
        build_heddle()
        return {"python": None}
    if system == "mpi":
        out = subprocess.run(["bash", str(BENCHES / "mpi" / "setup.sh")], check=True,
                             stdout=subprocess.PIPE, text=True, timeout=1800).stdout
        return {"python": out.strip().splitlines()[-1]}
    if system == "spark":
        if not java_ok():
            log("installing openjdk-17-jre-headless (Spark's JVM)")
            apt_install(["openjdk-17-jre-headless"])
        py = ensure_venv(BENCHES / ".venv-spark", PEERS / "spark" / "requirements.txt",
                         "import pyspark, numpy")
        return {"python": str(py)}
    if system == "dask":
        py = ensure_venv(BENCHES / ".venv-dask", PEERS / "dask" / "requirements.txt",
                         "import dask.distributed, dask.dataframe, numpy")
        return {"python": str(py)}
    if system == "ray":
        py = ensure_venv(BENCHES / ".venv-ray", PEERS / "ray" / "requirements.txt", "import ray, numpy")
        return {"python": str(py)}
    if system == "flink":
        if not java_ok():
            log("installing openjdk-17-jre-headless (Flink's JVM)")
            apt_install(["openjdk-17-jre-headless"])
        py = ensure_venv(BENCHES / ".venv-flink", PEERS / "flink" / "requirements.txt", "import pyflink, numpy")
        return {"python": str(py)}
    raise ValueError(system)


def build_heddle() -> None:
    need = [HEDDLE] + [EXAMPLES / n for n in ("wordcount_task", "kmeans_task", "terasort_dataflow", "terasort", "bench_collectives",
                                              "tiny_tasks", "stream_events")]
    if all(p.exists() for p in need):
        return
    log("building Heddle (cargo build --release --bins --examples)")
    subprocess.run(["cargo", "build", "-j2", "--release", "--bins", "--examples"], cwd=ROOT,
                   check=True, timeout=3600)


def versions(setups: dict) -> dict:
    out = {}
    for system, s in setups.items():
        py = s.get("python")
        if system == "heddle":
            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True, timeout=60).stdout.strip()
            out["heddle"] = f"commit {rev}"
            continue
        mods = {"mpi": ["mpi4py", "numpy"], "spark": ["pyspark", "numpy"],
                "dask": ["dask", "distributed", "numpy", "pandas"], "ray": ["ray", "numpy"],
                "flink": ["apache-flink", "numpy"]}[system]
        code = ("import importlib.metadata as m, sys; print(', '.join(f'{n} {m.version(n)}' for n in "
                f"{mods!r}) + ', Python ' + sys.version.split()[0])")
        v = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120).stdout.strip()
        if system == "mpi":
            o = subprocess.run(["mpirun", "--version"], capture_output=True, text=True, timeout=60).stdout
            v = (o.splitlines()[0].strip() if o else "Open MPI") + ", " + v
        if system in ("spark", "flink"):
            j = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr
            v += ", " + (j.splitlines()[0].strip() if j else "java")
        out[system] = v
    return out


# ---------------------------------------------------------------------------------------------
# Data

@dataclass
class Sizes:
    megabytes: int
    points: int
    records: int
    tasks: int
    events: int
    files: int = 20  # of the streaming input (micro-batches, for Spark)


FULL = Sizes(megabytes=200, points=1_000_000, records=10_000_000, tasks=10_000, events=5_000_000, files=20)
QUICK = Sizes(megabytes=20, points=100_000, records=500_000, tasks=200, events=200_000, files=5)


def prepare_data(workloads: list[str], sizes: Sizes) -> dict:
    import reference

    DATA.mkdir(parents=True, exist_ok=True)
    (DATA / "tmp").mkdir(exist_ok=True)
    data: dict = {}
    if "wordcount" in workloads:
        text = DATA / f"heddle-words-{sizes.megabytes}mb-seed1.txt"
        if not text.exists():
            build_heddle()
            log(f"generating {text.name} with Heddle's generator (wordcount_task --generate --seed 1)")
            subprocess.run([str(EXAMPLES / "wordcount_task"), "--generate", "--seed", "1", "--megabytes",
                            str(sizes.megabytes), "--no-verify"], check=True, timeout=1200,
                           env=dict(os.environ, TMPDIR=str(DATA)), stdout=subprocess.DEVNULL)
        log("word-count reference (Counter, cached)")
        data["wordcount"] = {"input": text, "ref": reference.wordcount_reference(text)}
    if "kmeans" in workloads:
        pts = reference.generate_points(DATA / f"points-{sizes.points}-seed1.npy", sizes.points, seed=1)
        log("K-means reference (numpy Lloyd, cached)")
        data["kmeans"] = {"input": pts, "ref": reference.kmeans_reference(pts, 16, 10)}
    if "sort" in workloads:
        path = DATA / f"records-{sizes.records}-seed7.txt"
        if not path.exists():
            log(f"generating {sizes.records} sort records ({sizes.records * 101 >> 20} MiB)")
        reference.generate_records(path, sizes.records, seed=7)
        log("sort reference (count and checksum, cached)")
        data["sort"] = {"input": path, "ref": reference.input_reference(path)}
    if "streaming" in workloads:
        log(f"streaming events ({sizes.events}, cached) and their window counts")
        d = reference.generate_events(DATA / f"events-{sizes.events}-f{sizes.files}-seed3", sizes.events,
                                      files=sizes.files, seed=3)
        data["streaming"] = {"input": d, "ref": reference.streaming_reference(d)}
    return data


# ---------------------------------------------------------------------------------------------
# Runs

@dataclass
class Variant:
    workload: str
    system: str
    variant: str
    make_cmd: object = None          # (data, out, sizes, setup) -> argv, or None: not implemented
    note: str = ""
    harness_check: object = None     # (data, out) -> (ok, detail) for Heddle's outputs
    max_repeats: int = 0             # run in the first N repeats only (0: every repeat)
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
            r = subprocess.run([py, str(example), "--help"], capture_output=True, timeout=120, cwd=str(ROOT))
            _example_ok[example] = r.returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _example_ok[example] = False
    return _example_ok[example]


def variants() -> list[Variant]:
    v = [
        # word count ---------------------------------------------------------------------
        Variant("wordcount", "heddle", "Rust task API (wordcount_task)",
                lambda d, out, s, st: heddle_run("wordcount_task", "--input", d["input"], "--output", out, "--no-verify"),
                harness_check=check_heddle_wordcount),
        Variant("wordcount", "mpi", "mpi4py, Counter + gather", peer("mpi", "wordcount.py")),
        Variant("wordcount", "spark", "DataFrame", peer("spark", "wordcount_df.py")),
        Variant("wordcount", "spark", "RDD", peer("spark", "wordcount_rdd.py")),
        Variant("wordcount", "dask", "bag, Counter per partition", peer("dask", "wordcount_bag.py")),
        Variant("wordcount", "ray", "tasks, Counter per range", peer("ray", "wordcount_tasks.py")),
        Variant("wordcount", "flink", "Table API SQL (UNNEST)", peer("flink", "wordcount_sql.py")),
        # K-means ------------------------------------------------------------------------
        Variant("kmeans", "heddle", "Rust task API (kmeans_task)",
                lambda d, out, s, st: heddle_run("kmeans_task", "--input", d["input"], "--k", 16, "--iterations", 10,
                                                 "--output", out),
                harness_check=check_heddle_kmeans),
        Variant("kmeans", "mpi", "mpi4py + numpy, Allreduce", peer("mpi", "kmeans.py")),
        Variant("kmeans", "spark", "RDD numpy blocks", peer("spark", "kmeans_numpy.py")),
        Variant("kmeans", "spark", "MLlib", peer("spark", "kmeans_mllib.py")),
        Variant("kmeans", "dask", "array", peer("dask", "kmeans_array.py")),
        Variant("kmeans", "ray", "tasks over numpy blocks", peer("ray", "kmeans_tasks.py")),
        Variant("kmeans", "flink", "not included", None, note="K-means is in Flink ML, a separate library (not on PyPI with apache-flink)"),
        # sort ---------------------------------------------------------------------------
        Variant("sort", "heddle", "Rust dataflow sort (terasort_dataflow)",
                lambda d, out, s, st: heddle_run("terasort_dataflow", "--input", d["input"], "--time-read", "--output", out),
                harness_check=check_heddle_sort),
        Variant("sort", "heddle", "Rust data API, sort_by_key (terasort)",
                lambda d, out, s, st: heddle_run("terasort", "--input", d["input"], "--output", out),
                harness_check=check_heddle_sort),
        Variant("sort", "mpi", "mpi4py + numpy sample sort", peer("mpi", "sort.py")),
        Variant("sort", "spark", "DataFrame", peer("spark", "sort_df.py")),
        Variant("sort", "spark", "RDD", peer("spark", "sort_rdd.py")),
        Variant("sort", "dask", "DataFrame sort_values", peer("dask", "sort_df.py")),
        Variant("sort", "ray", "tasks, numpy sample sort", peer("ray", "sort_tasks.py")),
        Variant("sort", "flink", "Table API SQL ORDER BY", peer("flink", "sort_sql.py"),
                note="a global ORDER BY runs in one task"),
        # trivial tasks --------------------------------------------------------------------
        Variant("tasks", "heddle", "Rust task API, a task instance each + reduce edge (tiny_tasks --via graph)",
                lambda d, out, s, st: heddle_run("tiny_tasks", "--tasks", s.tasks, "--via", "graph")),
        Variant("tasks", "heddle", "Rust CCR ports, closures on 1-thread dispatchers + allreduce (tiny_tasks --via ports)",
                lambda d, out, s, st: heddle_run("tiny_tasks", "--tasks", s.tasks, "--via", "ports")),
        Variant("tasks", "spark", "RDD, 1 partition per task", peer("spark", "tasks.py"), max_repeats=1,
                note="run in the first repeat only (about 30 ms a task: 5 minutes for 10,000)"),
        Variant("tasks", "dask", "futures (client.map)", peer("dask", "tasks.py")),
        Variant("tasks", "ray", "tasks", peer("ray", "tasks.py")),
        # streaming ------------------------------------------------------------------------
        Variant("streaming", "heddle", "Rust Stream API, event-time tumbling windows (stream_events)",
                lambda d, out, s, st: heddle_run("stream_events", "--input", Path(d["input"]) / "part-*.csv",
                                                 "--output", out),
                harness_check=check_heddle_streaming,
                note="replays the files with stream_from_vec: each worker reads and parses all of them inside the clock"),
        Variant("streaming", "spark", "Structured Streaming", peer("spark", "streaming_window.py")),
        Variant("tasks", "mpi", "not applicable", None, note="MPI has no task API"),
        Variant("streaming", "mpi", "not applicable", None, note="MPI has no streaming API"),
        Variant("streaming", "dask", "not supported", None, note="Dask has no streaming API (streamz is a separate project)"),
        Variant("streaming", "ray", "not supported", None, note="Ray has no streaming API (Ray Data is batch)"),
        Variant("streaming", "flink", "Table API SQL, TUMBLE window", peer("flink", "streaming_window.py"),
                note="reads the same events as one file (one source reader keeps event time in order)"),
        Variant("tasks", "flink", "not applicable", None, note="Flink has no API for independent tasks"),
    ]
    # The Python front end's versions (examples/python/NAME.py), run when the heddle package
    # installed in .venv-py (make python-install) can import them: (workload, example,
    # variant, extra arguments, harness check[, note]).
    python_rows = [
        ("wordcount", "wordcount", "Python heddle.data, native words().value_counts()",
         lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify"], check_heddle_wordcount),
        ("wordcount", "wordcount", "Python heddle.data, Counter per text block in Python (--python)",
         lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify", "--python"], check_heddle_wordcount),
        ("kmeans", "kmeans", "Python (heddle.data)",
         lambda d, out, s: ["--input", d["input"], "--k", 16, "--iterations", 10, "--output", out], check_heddle_kmeans),
        ("tasks", "tasks", "Python heddle.task, a task instance each + reduce edge (tasks.py)",
         lambda d, out, s: ["--tasks", s.tasks], None),
        ("sort", "sort", "Python heddle.data, sort_by_key of (key, record) bytes pairs (sort.py)",
         lambda d, out, s: ["--input", d["input"], "--output", out, "--no-verify"], check_heddle_sort,
         "binary text blocks split into pairs in Python, records pickled across workers; the clock "
         "includes reading and writing"),
        ("streaming", "stream_events", "Python Stream, event-time tumbling windows (stream_events.py)",
         lambda d, out, s: ["--input", Path(d["input"]) / "part-*.csv", "--output", out], check_heddle_streaming,
         "replays the files with stream_from_list: each worker reads and parses all of them inside the clock"),
    ]
    py = str(ROOT / ".venv-py" / "bin" / "python")
    for workload, name, label, extra, check, *note in python_rows:
        ex = heddle_python_example(name)
        if not ex:
            continue
        if not python_example_runs(py, ex):
            v.append(Variant(workload, "heddle", label, None,
                             note=f"examples/python/{name}.py is there but .venv-py's heddle cannot run it "
                                  "(make python-install)"))
            continue
        make = (lambda d, out, s, st, ex=ex, extra=extra:
                [py, "-m", "heddle", "run", "-n", str(WORKERS), str(ex), *map(str, extra(d, out, s))])
        v.append(Variant(workload, "heddle", label, make, harness_check=check, note=note[0] if note else ""))
    return v


class TreeSampler(threading.Thread):
    """Samples the summed PSS of a process tree (descendants and same-session processes)."""

    def __init__(self, root_pid: int, interval: float = 0.05):
        super().__init__(daemon=True)
        self.root, self.interval = root_pid, interval
        self.peak_kib = 0
        self.seen: set[int] = set()
        self.stop_event = threading.Event()

    def tree(self) -> list[int]:
        parent, session = {}, {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                with open(f"/proc/{entry.name}/stat", "rb") as f:
                    stat = f.read().decode(errors="replace")
                fields = stat[stat.rindex(")") + 2:].split()
                pid = int(entry.name)
                parent[pid], session[pid] = int(fields[1]), int(fields[3])
            except (OSError, ValueError):
                continue
        members = {p for p, s in session.items() if s == self.root} | {self.root}
        grew = True
        while grew:
            new = {p for p, pp in parent.items() if pp in members and p not in members}
            members |= new
            grew = bool(new)
        return [p for p in members if p in parent]

    def sample(self) -> None:
        total = 0
        for pid in self.tree():
            self.seen.add(pid)
            try:
                with open(f"/proc/{pid}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            total += int(line.split()[1])
                            break
            except OSError:
                continue
        self.peak_kib = max(self.peak_kib, total)

    def run(self) -> None:
        # Dense at first (short runs), then sparse: reading smaps_rollup of a large process
        # costs CPU that the run itself needs on a 2-core machine.
        t0 = time.perf_counter()
        while not self.stop_event.is_set():
            self.sample()
            elapsed = time.perf_counter() - t0
            self.stop_event.wait(self.interval if elapsed < 1 else 0.1 if elapsed < 5 else 0.25)


def parse_result(stdout: str, key: str = "job_s") -> dict | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("[") and "] " in line[:8]:
            line = line.split("] ", 1)[1]
        if line.startswith("{") and key in line:
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


def base_env() -> dict:
    env = dict(os.environ)
    # Current numpy is slower with these (set on this VM for old OpenBLAS builds): unset both.
    env.pop("OPENBLAS_CORETYPE", None)
    env.pop("OPENBLAS_L2_SIZE", None)
    env.update({
        "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "TMPDIR": str(DATA / "tmp"), "SPARK_LOCAL_DIRS": str(DATA / "tmp"), "SPARK_LOCAL_IP": "127.0.0.1",
        "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
    })
    return env


def kill_tree(proc: subprocess.Popen, sampler: TreeSampler) -> None:
    """Ends what is left of a run: its process group, then any process it started."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        left = [p for p in sampler.tree() if p != os.getpid()]
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        if not left:
            return
        time.sleep(1.0)


def execute(v: Variant, d: dict | None, sizes: Sizes, setup: dict, timeout: float, pause: float,
            index: int) -> dict:
    out = DATA / "out" / f"{v.workload}-{v.system}-{index}"
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = v.make_cmd(d, out, sizes, setup)
    env = base_env()
    env.update({"PYSPARK_PYTHON": setup.get("python") or "", "PYSPARK_DRIVER_PYTHON": setup.get("python") or ""})
    subprocess.run(["sync"], timeout=300)
    time.sleep(pause)
    load1 = os.getloadavg()[0]
    logf = DATA / "logs" / f"{v.workload}-{v.system}-{index}.log"
    logf.parent.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            cwd=str(DATA), start_new_session=True)
    sampler = TreeSampler(proc.pid)
    sampler.start()
    timed_out = False
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_tree(proc, sampler)
        stdout, _ = proc.communicate()
    wall = time.perf_counter() - t0
    sampler.stop_event.set()
    sampler.join()
    kill_tree(proc, sampler)
    logf.write_text(" ".join(cmd) + "\n\n" + (stdout or ""))
    res = parse_result(stdout or "") or {}
    row = {"workload": v.workload, "system": v.system, "variant": v.variant, "exit": proc.returncode,
           "timed_out": timed_out, "wall_s": round(wall, 3), "peak_pss_mib": round(sampler.peak_kib / 1024, 1),
           "job_s": res.get("job_s"), "verify_s": res.get("verify_s", 0.0) or 0.0, "log": str(logf.relative_to(ROOT)),
           "load1": round(load1, 2)}
    row["run_s"] = round(wall - row["verify_s"], 3)
    ok = bool(res.get("ok")) and proc.returncode == 0 and not timed_out
    detail = res.get("detail", "")
    if ok and v.harness_check:
        ok, detail = v.harness_check(d, out)
    if not res:
        detail = "timed out" if timed_out else f"no result line (exit {proc.returncode}); see {row['log']}"
    row.update(ok=ok, detail=detail)
    shutil.rmtree(out, ignore_errors=True)
    return row


def run_allreduce(quick: bool, timeout: float, pause: float, systems: list[str]) -> dict:
    """Heddle vs mpi4py allreduce latency sweep, through `heddle bench collectives`."""
    out = DATA / "allreduce.json"
    out.unlink(missing_ok=True)
    cmd = [str(HEDDLE), "bench", "collectives", "--vs", "mpi", "--ranks", str(WORKERS), "--collectives",
           "allreduce", "--sizes", ",".join(map(str, SWEEP)), "--json", str(out)]
    if quick:
        cmd.append("--quick")
    subprocess.run(["sync"], timeout=300)
    time.sleep(pause)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=base_env(), cwd=str(DATA))
    wall = time.perf_counter() - t0
    (DATA / "logs").mkdir(exist_ok=True)
    (DATA / "logs" / "allreduce.log").write_text(p.stdout + p.stderr)
    if p.returncode != 0 or not out.exists():
        return {"ok": False, "records": [], "wall_s": wall}
    data = json.loads(out.read_text())
    records = data.get("records", [])
    # Heddle's Python front end (heddle.comm in .venv-py, made by `make test-python`), the
    # mpi4py-style loop of benches/python/bench_allreduce.py, when it is installed.
    py = ROOT / ".venv-py" / "bin" / "python"
    script = BENCHES / "python" / "bench_allreduce.py"
    if "heddle" in systems and py.exists() and script.exists() and \
            subprocess.run([str(py), "-c", "import heddle"], capture_output=True, timeout=120).returncode == 0:
        iters = ["--iters", "200", "--warmup", "20"] if quick else ["--iters", "2000", "--warmup", "200"]
        for size in SWEEP:
            p = subprocess.run([str(py), "-m", "heddle", "run", "-n", str(WORKERS), str(script), "--side", "heddle",
                                "--bytes", str(size), *iters], capture_output=True, text=True, timeout=timeout,
                               env=base_env(), cwd=str(DATA))
            rec = parse_result(p.stdout, key="p50_us")
            if p.returncode == 0 and rec:
                rec["system"] = "heddle-py"
                records.append(rec)
            else:
                records.append({"system": "heddle-py", "bytes": size, "p50_us": None, "verified": False})
    return {"ok": True, "records": records, "wall_s": round(wall, 3)}


# ---------------------------------------------------------------------------------------------
# Report

def summarize(rows: list[dict], listed: list[tuple[str, str, str]]) -> list[dict]:
    """Medians and min-max per (workload, system, variant); ratios to the Heddle Rust
    variant listed first in ``listed`` (the (workload, system, variant) of ``variants()``)."""
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["workload"], r["system"], r["variant"]), []).append(r)
    out = []
    for (w, s, var), rs in groups.items():
        good = [r for r in rs if r["ok"] and r["job_s"] is not None]
        def stats(key):
            xs = [r[key] for r in good]
            return (statistics.median(xs), min(xs), max(xs)) if xs else (None, None, None)
        out.append({"workload": w, "system": s, "variant": var, "runs": len(rs), "ok_runs": len(good),
                    "verified": bool(rs) and len(good) == len(rs), "job_s": stats("job_s"),
                    "run_s": stats("run_s"), "peak_pss_mib": stats("peak_pss_mib"),
                    "detail": next((r["detail"] for r in rs if not r["ok"]), rs[-1]["detail"])})
    position = {key: i for i, key in enumerate(listed)}
    for w in {o["workload"] for o in out}:
        base = sorted((o for o in out if o["workload"] == w and o["system"] == "heddle" and o["job_s"][0]
                       and o["variant"].startswith("Rust")),
                      key=lambda o: position.get((o["workload"], o["system"], o["variant"]), len(listed)))
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
    out.sort(key=lambda o: (order.get(o["workload"], 99), sysorder.get(o["system"], 99),
                            o["job_s"][0] if o["job_s"][0] is not None else 1e9))
    return out


def fmt_s(t) -> str:
    med, lo, hi = t
    if med is None:
        return "—"
    def f(x):
        # Two significant digits below 10 ms (trivial tasks), else 3 decimals below 1 s.
        return f"{x:.2g}" if x < 0.01 else f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"
    return f"{f(med)} ({f(lo)}–{f(hi)})" if hi is not None and hi != lo else f(med)


def fmt_ratio(r) -> str:
    """1.0×, 12.3×; two significant digits below 0.1× (a Heddle variant faster than the base)."""
    if not r:
        return "—"
    return f"{r:.1f}×" if r >= 0.1 else f"{r:.2g}×"


def markdown_table(summary: list[dict]) -> str:
    lines = ["| workload | system | variant | job s, median (min–max) | whole run s, median (min–max) | "
             "peak PSS MiB | job / Heddle | run / Heddle | verified |",
             "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for o in summary:
        variant = o["variant"] + (" **(fastest)**" if o.get("fastest") and o["system"] != "heddle" else "")
        if o.get("note"):
            variant += f" — _{o['note']}_"
        if o.get("not_implemented"):
            lines.append(f"| {o['workload']} | {o['system']} | {o['variant']} | — | — | — | — | — | {o['detail']} |")
            continue
        pss = f"{o['peak_pss_mib'][0]:.0f}" if o["peak_pss_mib"][0] is not None else "—"
        jr, rr = fmt_ratio(o.get("job_ratio")), fmt_ratio(o.get("run_ratio"))
        ver = "yes" if o["verified"] else f"**NO** ({o['ok_runs']}/{o['runs']}: {o['detail']})"
        lines.append(f"| {o['workload']} | {o['system']} | {variant} | {fmt_s(o['job_s'])} | {fmt_s(o['run_s'])} | "
                     f"{pss} | {jr} | {rr} | {ver} |")
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
        rows.append({"bytes": b, "heddle_p50_us": hp, "mpi_p50_us": mp, "heddle_py_p50_us": yp,
                     "heddle_runs": [r["p50_us"] for r in h], "mpi_runs": [r["p50_us"] for r in m],
                     "heddle_py_runs": [r["p50_us"] for r in hy],
                     "verified": all(r.get("verified") for r in h + m + acc.get((b, "heddle-py"), [])) and bool(h and m)})
    lines = ["| bytes | Heddle (Rust) p50 µs (min–max) | Heddle (Python heddle.comm) p50 µs | Open MPI (mpi4py) p50 µs (min–max) "
             "| Heddle Rust / MPI | Heddle Python / MPI | verified |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    def f(xs):
        if not xs:
            return "—"
        med = statistics.median(xs)
        return f"{med:.2f} ({min(xs):.2f}–{max(xs):.2f})" if len(xs) > 1 else f"{med:.2f}"
    for r in rows:
        ratio = f"{r['heddle_p50_us'] / r['mpi_p50_us']:.2f}" if r["heddle_p50_us"] and r["mpi_p50_us"] else "—"
        pyratio = f"{r['heddle_py_p50_us'] / r['mpi_p50_us']:.2f}" if r["heddle_py_p50_us"] and r["mpi_p50_us"] else "—"
        size = r["bytes"]
        label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB" if size >= 1024 else f"{size} B"
        lines.append(f"| {label} | {f(r['heddle_runs'])} | {f(r['heddle_py_runs'])} | {f(r['mpi_runs'])} | {ratio} | {pyratio} "
                     f"| {'yes' if r['verified'] else 'NO'} |")
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
    colors = {"heddle": "#d62728", "mpi": "#7f7f7f", "spark": "#ff7f0e", "dask": "#1f77b4", "ray": "#2ca02c",
              "flink": "#8c564b"}
    for ax, w in zip(flat, wls):
        os_ = [o for o in summary if o["workload"] == w and o["job_s"][0]]
        labels = [f"{o['system']}: {o['variant'][:26]}" for o in os_]
        x = list(range(len(os_)))
        med = [o["job_s"][0] for o in os_]
        err = [[m - o["job_s"][1] for m, o in zip(med, os_)], [o["job_s"][2] - m for m, o in zip(med, os_)]]
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
        for key, name, color in (("heddle_p50_us", "heddle (Rust)", colors["heddle"]),
                                 ("heddle_py_p50_us", "heddle (Python)", "#9467bd"), ("mpi_p50_us", "Open MPI (mpi4py)", colors["mpi"])):
            pts = [(x, r[key]) for x, r in zip(xs, ar_rows) if r.get(key)]
            if pts:
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name, color=color)
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
                os_name = line.split("=", 1)[1].strip().strip('"') + f" (kernel {platform.release()})"
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": round(mem_kib / 2**20, 1), "os": os_name,
            "python": platform.python_version()}


def write_docs(cmdline: str, repeat: int, quick: bool, sizes: Sizes, summary: list[dict], ar_md: str, mach: dict, vers: dict,
               started: str, duration_s: float, notes: list[str]) -> None:
    fastest = []
    for w in WORKLOADS:
        for s in SYSTEMS:
            if s == "heddle":
                continue
            c = [o for o in summary if o["workload"] == w and o["system"] == s and o.get("fastest")]
            n = [o for o in summary if o["workload"] == w and o["system"] == s and o["job_s"][0]]
            if c and len(n) > 1:
                fastest.append(f"- {w}, {s}: **{c[0]['variant']}** ({fmt_s(c[0]['job_s'])} s job time; "
                               f"other variants: " + ", ".join(f"{o['variant']} {o['job_s'][0]:.2f} s" for o in n if o is not c[0]) + ")")
            elif len(n) == 1:
                fastest.append(f"- {w}, {s}: {n[0]['variant']} (the only variant)")
    text = f"""# Benchmarks: Heddle side by side with Open MPI, Spark, Dask, Ray and Flink

Generated by `benches/compare/run.py` (do not edit by hand: rerun the command).
Last run: {started} UTC, {duration_s / 60:.1f} minutes, {repeat} repeat(s){' (**--quick**: small data, a smoke test, not a measurement)' if quick else ''}.

## Command

```sh
{cmdline}
```

`make bench-compare` runs `python3 benches/compare/run.py --repeat 3`; `make bench-compare-quick` runs
`--quick --repeat 1` (small data, under 5 minutes once the peers are installed). Options:
`--workloads {",".join(WORKLOADS)}`, `--systems {",".join(SYSTEMS)}`, `--repeat N`, `--quick`, `--merge` (replace only
the rows of the workloads/systems/variants a run ran inside `results/latest.json`, keep the others, rebuild this page).

## Machine

- CPU: {mach['cpu']}, {mach['cores']} cores (a shared, noisy VM: other builds may run; look at min–max)
- Memory: {mach['memory_gib']} GiB
- OS: {mach['os']}
- Every system runs {WORKERS} workers (Heddle: `heddle run -n 2`; MPI: `mpirun -n 2`; Spark: `local[2]`, driver memory 8g;
  Dask: LocalCluster of 2 worker processes × 1 thread; Ray: `ray.init(num_cpus=2)`; Flink: PyFlink local mini-cluster,
  parallelism 2)
""" + "".join(f"- {s}: {v}\n" for s, v in vers.items()) + f"""
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

{chr(10).join(fastest) if fastest else '- (no peer ran more than one variant)'}

## Notes

""" + "\n".join(f"- {n}" for n in notes) + "\n"
    (DOCS / "benchmarks.md").write_text(text)


NOTES = [
    "Every system's output is verified against a reference (benches/compare/reference.py): the peers check their own "
    "output after the clock stops; Heddle's part files, centers and window counts are checked by the harness with the "
    "same code (Heddle's word count runs with `--no-verify`; its K-means, terasort and streaming window count also "
    "validate themselves in-process, its task programs check their sum).",
    "Heddle's terasort_dataflow runs with `--time-read`: its clock starts before each worker reads its share of the input, as "
    "the peers' clocks do.",
    "Runs are interleaved: each repeat runs every workload on every system, rotating the order of the systems, after a "
    "`sync` and an idle pause; medians over the repeats are shown with min–max.",
    "OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (set on this VM for old OpenBLAS builds) are unset for every run; "
    "OMP/OPENBLAS/MKL threads are 1 per worker process.",
    "Spark uses 8 shuffle partitions with adaptive execution and 32 MiB input splits (the 200-partition default is for "
    "clusters); Dask and Ray use 8 input partitions; MPI one per rank.",
    "Trivial tasks, Heddle: `tiny_tasks --via graph` (task API: a source vertex with one instance per task, placed "
    "round robin on the workers, each emitting its square once, and a reduce edge into one task; building and planning "
    "the graph are inside the clock), `--via ports` (CCR: each worker queues its share as closures on a one-thread "
    "`Dispatcher`, a multiple-item receive sums them, an allreduce adds the workers' sums) and "
    "examples/python/tasks.py (the task-graph version with Python task objects). Spark, Dask and Ray ship every "
    "task from a driver to worker processes; Heddle's workers each run their own share (SPMD), so only the sums "
    "cross processes.",
    "Streaming, Heddle: `stream_events` (Stream API: event time with a 5 s watermark, tumbling 10 s windows, counts "
    "kept in memory by each worker and written after the clock for the harness's check). The data API has no stream "
    "source of a directory of files yet, so it replays the files with `stream_from_vec`: every worker reads and "
    "parses all of them inside the clock and streams its half (the two halves of event time in parallel; a "
    "window's watermark is the least of its inputs'). examples/python/stream_events.py is the same job with heddle.data's Stream "
    "(`stream_from_list`, `Window.tumbling(10000).event_time(5000)`, `max` as the reduce and the window's record count "
    "as the count), and examples/python/sort.py sorts with heddle.data (binary text blocks split into (key, record) "
    "bytes pairs in Python, `sort_by_key`, each sorted partition written as raw records; records cross workers "
    "pickled). Both are checked by the harness like the Rust programs.",
    "Flink (PyFlink 2.x, Table API SQL only: no Python UDF on the data path) runs word count, sort and the streaming "
    "window count; its results are written by filesystem sinks and read back by the checker (PyFlink's row-by-row "
    "collect is far too slow for large results).",
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="small data end to end (a smoke test: results/latest-quick.json, docs untouched)")
    ap.add_argument("--pause", type=float, default=None, help="idle seconds before each run (default 3, quick 0.5)")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md and the chart")
    ap.add_argument("--json", type=Path, default=None, help="results file (default benches/compare/results/latest[-quick].json)")
    ap.add_argument("--note", action="append", default=[], help="a remark about this run for docs/benchmarks.md")
    ap.add_argument("--merge", action="store_true",
                    help="replace only the (workload, system, variant) rows this run ran inside the existing results "
                         "file (and its allreduce runs if allreduce ran), keep every other row, and rebuild the "
                         "table, chart and docs from the merged results")
    ap.add_argument("--report-from", type=Path, default=None,
                    help="only rebuild the table, chart and docs from a results JSON of an earlier run")
    args = ap.parse_args()
    bootstrap()
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
    timeouts = {"wordcount": 600, "kmeans": 600, "sort": 1200, "tasks": 900, "allreduce": 900, "streaming": 900}
    if args.quick:
        timeouts = {k: 180 for k in timeouts}
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
            runnable = [v for v in vs if v.workload == w and v.make_cmd and (not v.max_repeats or rep < v.max_repeats)]
            if not runnable:
                continue
            shift = rep % len(runnable)
            for i, v in enumerate(runnable[shift:] + runnable[:shift]):
                log(f"[{rep + 1}/{args.repeat}] {w}: {v.system} ({v.variant})")
                row = execute(v, data.get(w), sizes, setups[v.system], timeouts[w], pause, i)
                row["repeat"] = rep
                rows.append(row)
                log(f"    job {row['job_s']} s, run {row['run_s']} s, peak PSS {row['peak_pss_mib']:.0f} MiB, "
                    f"{'ok' if row['ok'] else 'FAILED'}: {row['detail']}")

    duration = time.perf_counter() - t_start
    results = {"started_utc": started, "duration_s": round(duration, 1),
               "command": ("python3 benches/compare/run.py " + " ".join(sys.argv[1:])).strip(),
               "quick": args.quick, "repeat": args.repeat, "workloads": workloads, "systems": systems,
               "sizes": sizes.__dict__, "machine": machine(), "versions": versions(setups),
               "runs": rows, "allreduce": {"runs": ar_runs}, "notes": args.note}
    if args.merge:
        results = merge_results(results, args.json or RESULTS / ("latest-quick.json" if args.quick else "latest.json"))
    return report(results, args)


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
        raise SystemExit(f"--merge: {path} was made with other data sizes (quick={old.get('quick')}, "
                         f"sizes {old.get('sizes')}); rerun without --merge or with the same sizes")
    ran = {(r["workload"], r["system"], r["variant"]) for r in new["runs"]}
    kept = [r for r in old["runs"] if (r["workload"], r["system"], r["variant"]) not in ran]
    replaced = len(old["runs"]) - len(kept)
    ar_new = bool(new["allreduce"]["runs"])
    merged = dict(old)
    merged["runs"] = kept + new["runs"]
    merged["allreduce"] = {"runs": new["allreduce"]["runs"] if ar_new else old["allreduce"]["runs"]}
    merged["workloads"] = [w for w in WORKLOADS if w in set(old.get("workloads", [])) | set(new["workloads"])]
    merged["systems"] = [s for s in SYSTEMS if s in set(old.get("systems", [])) | set(new["systems"])]
    merged["versions"] = dict(old.get("versions", {}))
    for k, v in new["versions"].items():
        was = merged.get("versions", {}).get(k)
        merged["versions"][k] = v if was in (None, v) else f"{was} (the merged rows: {v})"
    merged.pop("summary", None)
    entry = {"started_utc": new["started_utc"], "duration_s": new["duration_s"], "command": new["command"],
             "repeat": new["repeat"], "replaced_rows": replaced, "new_rows": len(new["runs"]),
             "variants": sorted(" / ".join(k) for k in ran)}
    merged["merged"] = old.get("merged", []) + [entry]
    merged["command"] = old["command"] + f"\n# then, replacing only the rows it ran ({new['started_utc']} UTC):\n" + new["command"]
    keys = ", ".join(f"{w} / {s} / {v}" for w, s, v in sorted(ran)) + (", allreduce" if ar_new else "")
    merged["notes"] = old.get("notes", []) + new["notes"] + [
        f"Merged run ({new['started_utc']} UTC, {new['duration_s'] / 60:.1f} minutes, {new['repeat']} repeat(s), "
        f"`{new['command']}`): its rows ({keys}) replace that key's rows of the earlier run; every other row is "
        f"from the run of {old['started_utc']} UTC (versions: {', '.join(f'{k} {v}' for k, v in new['versions'].items())}). "
        f"Ratios divide by the Heddle Rust base row of the same workload, so where the merge replaced that row the other "
        f"systems' ratios of that workload compare runs made at different times."]
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
            summary.append({"workload": v.workload, "system": v.system, "variant": v.variant, "not_implemented": True,
                            "detail": v.note or "not yet implemented", "job_s": (None, None, None),
                            "run_s": (None, None, None), "peak_pss_mib": (None, None, None)})
    order = {w: i for i, w in enumerate(WORKLOADS)}
    summary.sort(key=lambda o: (order.get(o["workload"], 99), SYSTEMS.index(o["system"]) if o["system"] in SYSTEMS else 99))
    for o in summary:
        for v in vs:
            if v.note and v.make_cmd and (v.workload, v.system, v.variant) == (o["workload"], o["system"], o["variant"]):
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
    png = (DOCS / "benchmarks.png") if docs else (RESULTS / ("chart-quick.png" if quick else "chart.png"))
    chart(summary, ar_rows, png)
    log(f"wrote {png}")
    if docs:
        notes = list(NOTES) + list(results.get("notes", []))
        loads = [r["load1"] for r in rows if r.get("load1") is not None]
        if loads:
            notes.append(f"Load average (1 min) just before each run: median {statistics.median(loads):.1f}, "
                         f"max {max(loads):.1f} on {os.cpu_count()} cores. It includes the previous run's own load (up to about 2 "
                         f"after a run that kept both cores busy); the rest is other work on the VM.")
        if results["repeat"] == 1:
            notes.append("This run used `--repeat 1`: one measurement per cell (no min–max). Three repeats take about "
                         "40 minutes on this 2-core VM (Spark and Flink start a JVM per run; Spark's 10,000 tasks alone "
                         "take 5 minutes), more than the time budget of the run that produced this page; "
                         "`make bench-compare` runs three.")
        write_docs(results["command"], results["repeat"], quick, sizes, summary, ar_md, results["machine"],
                   results["versions"], results["started_utc"], results["duration_s"], notes)
        log(f"wrote {DOCS / 'benchmarks.md'}")
    failed = [r for r in rows if not r["ok"]] + [r for r in ar_runs if not r["ok"]]
    if failed:
        log(f"{len(failed)} run(s) failed or did not verify")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
