"""Measuring one run: spawning its command with the harness's environment and a time limit,
sampling the peak PSS of its process tree, reading its JSON result line, checking its output,
and ending whatever it left behind; and the allreduce latency sweep."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time

from config import BENCHES, DATA, HEDDLE, ROOT, SWEEP, WORKERS, Sizes
from variants import Variant


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
                fields = stat[stat.rindex(")") + 2 :].split()
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
    env.update(
        {
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "TMPDIR": str(DATA / "tmp"),
            "SPARK_LOCAL_DIRS": str(DATA / "tmp"),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "RAY_USAGE_STATS_ENABLED": "0",
            "PYTHONUNBUFFERED": "1",
        }
    )
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


def execute(
    v: Variant, d: dict | None, sizes: Sizes, setup: dict, timeout: float, pause: float, index: int
) -> dict:
    out = DATA / "out" / f"{v.workload}-{v.system}-{index}"
    shutil.rmtree(out, ignore_errors=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = v.make_cmd(d, out, sizes, setup)
    env = base_env()
    env.update(
        {
            "PYSPARK_PYTHON": setup.get("python") or "",
            "PYSPARK_DRIVER_PYTHON": setup.get("python") or "",
        }
    )
    subprocess.run(["sync"], check=False, timeout=300)
    time.sleep(pause)
    load1 = os.getloadavg()[0]
    logf = DATA / "logs" / f"{v.workload}-{v.system}-{index}.log"
    logf.parent.mkdir(exist_ok=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=str(DATA),
        start_new_session=True,
    )
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
    row = {
        "workload": v.workload,
        "system": v.system,
        "variant": v.variant,
        "exit": proc.returncode,
        "timed_out": timed_out,
        "wall_s": round(wall, 3),
        "peak_pss_mib": round(sampler.peak_kib / 1024, 1),
        "job_s": res.get("job_s"),
        "verify_s": res.get("verify_s", 0.0) or 0.0,
        "log": str(logf.relative_to(ROOT)),
        "load1": round(load1, 2),
    }
    row["run_s"] = round(wall - row["verify_s"], 3)
    ok = bool(res.get("ok")) and proc.returncode == 0 and not timed_out
    detail = res.get("detail", "")
    if ok and v.harness_check:
        ok, detail = v.harness_check(d, out)
    if not res:
        detail = (
            "timed out"
            if timed_out
            else f"no result line (exit {proc.returncode}); see {row['log']}"
        )
    row.update(ok=ok, detail=detail)
    shutil.rmtree(out, ignore_errors=True)
    return row


def run_allreduce(quick: bool, timeout: float, pause: float, systems: list[str]) -> dict:
    """Heddle vs mpi4py allreduce latency sweep, through `heddle bench collectives`."""
    out = DATA / "allreduce.json"
    out.unlink(missing_ok=True)
    cmd = [
        str(HEDDLE),
        "bench",
        "collectives",
        "--vs",
        "mpi",
        "--ranks",
        str(WORKERS),
        "--collectives",
        "allreduce",
        "--sizes",
        ",".join(map(str, SWEEP)),
        "--json",
        str(out),
    ]
    if quick:
        cmd.append("--quick")
    subprocess.run(["sync"], check=False, timeout=300)
    time.sleep(pause)
    t0 = time.perf_counter()
    p = subprocess.run(
        cmd,
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=base_env(),
        cwd=str(DATA),
    )
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
    if (
        "heddle" in systems
        and py.exists()
        and script.exists()
        and subprocess.run(
            [str(py), "-c", "import heddle"], check=False, capture_output=True, timeout=120
        ).returncode
        == 0
    ):
        iters = (
            ["--iters", "200", "--warmup", "20"]
            if quick
            else ["--iters", "2000", "--warmup", "200"]
        )
        for size in SWEEP:
            p = subprocess.run(
                [
                    str(py),
                    "-m",
                    "heddle",
                    "run",
                    "-n",
                    str(WORKERS),
                    str(script),
                    "--side",
                    "heddle",
                    "--bytes",
                    str(size),
                    *iters,
                ],
                check=False,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=base_env(),
                cwd=str(DATA),
            )
            rec = parse_result(p.stdout, key="p50_us")
            if p.returncode == 0 and rec:
                rec["system"] = "heddle-py"
                records.append(rec)
            else:
                records.append(
                    {"system": "heddle-py", "bytes": size, "p50_us": None, "verified": False}
                )
    return {"ok": True, "records": records, "wall_s": round(wall, 3)}
