"""Installing and describing the systems: the harness's own virtualenv (``bootstrap``), the
peers' virtualenvs, Debian packages and Java, building Heddle, and each system's versions."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from config import BENCHES, EXAMPLES, HEDDLE, HERE, NATIVE, PEERS, ROOT, VENV, log


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
    if (
        not fresh
        or subprocess.run(
            [str(py), "-c", check], check=False, capture_output=True, timeout=300
        ).returncode
    ):
        log(f"installing {requirements.relative_to(ROOT)} into {venv.relative_to(ROOT)}")
        subprocess.run(
            [
                str(py),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "-r",
                str(requirements),
            ],
            check=True,
            timeout=1800,
        )
        shutil.copyfile(requirements, stamp)
    return py


def bootstrap(script: Path) -> None:
    """Re-executes ``script`` (run.py) inside benches/.venv-compare (created on first use)."""
    if in_own_venv():
        return
    try:
        import ensurepip  # noqa: F401
        import venv  # noqa: F401
    except ImportError:
        apt_install(["python3-venv"])
    py = ensure_venv(VENV, HERE / "requirements-harness.txt", "import numpy, matplotlib")
    os.execv(str(py), [str(py), str(script.resolve()), *sys.argv[1:]])


_apt_updated = False


def apt_install(packages: list[str]) -> None:
    global _apt_updated
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    if not _apt_updated:
        subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, env=env, timeout=900)
        _apt_updated = True
    subprocess.run(
        [*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", *packages],
        check=True,
        env=env,
        timeout=1800,
    )


def java_ok() -> bool:
    java = shutil.which("java")
    if not java:
        return False
    out = subprocess.run(
        [java, "-version"], check=False, capture_output=True, text=True, timeout=60
    ).stderr
    try:
        major = int(out.split('"')[1].split(".")[0])
    except (IndexError, ValueError):
        return False
    return major >= 17


# Peers that run in a virtual environment of their own: (its directory under benches/, the
# peers/ folder with its requirements.txt, the import that proves it works, needs Java).
PYTHON_PEERS: dict[str, tuple[str, str, str, bool]] = {
    "spark": (".venv-spark", "spark", "import pyspark, numpy", True),
    "dask": (".venv-dask", "dask", "import dask.distributed, dask.dataframe, numpy", False),
    "ray": (".venv-ray", "ray", "import ray, numpy", False),
    "flink": (".venv-flink", "flink", "import pyflink, numpy", True),
    "bytewax": (".venv-bytewax", "bytewax", "import bytewax.operators.windowing, numpy", False),
    **dict.fromkeys(
        NATIVE,
        (".venv-native", "native", "import polars, duckdb, datafusion, sklearn, numpy", False),
    ),
}


def setup_system(system: str) -> dict:
    """Installs a peer on demand; returns {python, env, versions}."""
    if system == "heddle":
        build_heddle()
        return {"python": None}
    if system == "mpi":
        out = subprocess.run(
            ["bash", str(BENCHES / "mpi" / "setup.sh")],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
            timeout=1800,
        ).stdout
        return {"python": out.strip().splitlines()[-1]}
    if system in PYTHON_PEERS:
        venv, peers, probe, jvm = PYTHON_PEERS[system]
        if jvm and not java_ok():
            log(f"installing openjdk-17-jre-headless ({system}'s JVM)")
            apt_install(["openjdk-17-jre-headless"])
        py = ensure_venv(BENCHES / venv, PEERS / peers / "requirements.txt", probe)
        return {"python": str(py)}
    raise ValueError(system)


def build_heddle() -> None:
    need = [HEDDLE] + [
        EXAMPLES / n
        for n in (
            "wordcount_task",
            "kmeans_task",
            "mds",
            "terasort_dataflow",
            "terasort",
            "bench_collectives",
            "tiny_tasks",
            "stream_events",
        )
    ]
    if all(p.exists() for p in need):
        return
    log("building Heddle (cargo build --release --bins --examples)")
    subprocess.run(
        ["cargo", "build", "-j2", "--release", "--bins", "--examples"],
        cwd=ROOT,
        check=True,
        timeout=3600,
    )


def versions(setups: dict) -> dict:
    out = {}
    for system, s in setups.items():
        py = s.get("python")
        if system == "heddle":
            rev = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"],
                check=False,
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout.strip()
            out["heddle"] = f"commit {rev}"
            continue
        mods = {
            "mpi": ["mpi4py", "numpy"],
            "spark": ["pyspark", "numpy"],
            "dask": ["dask", "distributed", "numpy", "pandas"],
            "ray": ["ray", "numpy"],
            "flink": ["apache-flink", "numpy"],
            "bytewax": ["bytewax", "numpy"],
            "polars": ["polars"],
            "duckdb": ["duckdb"],
            "datafusion": ["datafusion", "pyarrow"],
            "sklearn": ["scikit-learn", "numpy"],
        }[system]
        code = (
            "import importlib.metadata as m, sys; print(', '.join(f'{n} {m.version(n)}' for n in "
            f"{mods!r}) + ', Python ' + sys.version.split()[0])"
        )
        v = subprocess.run(
            [py, "-c", code], check=False, capture_output=True, text=True, timeout=120
        ).stdout.strip()
        if system == "mpi":
            o = subprocess.run(
                ["mpirun", "--version"], check=False, capture_output=True, text=True, timeout=60
            ).stdout
            v = (o.splitlines()[0].strip() if o else "Open MPI") + ", " + v
        if system in ("spark", "flink"):
            j = subprocess.run(
                ["java", "-version"], check=False, capture_output=True, text=True, timeout=60
            ).stderr
            v += ", " + (j.splitlines()[0].strip() if j else "java")
        out[system] = v
    return out
