"""Shared settings of the comparison harness: paths, the workloads and systems, the worker
count, the allreduce sweep, Open MPI's flags, the data sizes (FULL, QUICK) and ``log``."""

from __future__ import annotations

import sys
from dataclasses import dataclass
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

WORKLOADS = [
    "wordcount",
    "wordcount_dense",
    "kmeans",
    "mds",
    "sort",
    "allreduce",
    "tasks",
    "streaming",
]
SYSTEMS = [
    "heddle",
    "mpi",
    "spark",
    "dask",
    "ray",
    "flink",
    "bytewax",
    "polars",
    "duckdb",
    "datafusion",
    "sklearn",
]
# The engines a user would pick on one machine: one virtualenv (benches/.venv-native).
NATIVE = ("polars", "duckdb", "datafusion", "sklearn")
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
WORKERS = 2
SWEEP = [8, 1024, 65536, 1 << 20, 16 << 20]  # allreduce bytes


def log(msg: str) -> None:
    print(f"[compare] {msg}", file=sys.stderr, flush=True)


@dataclass
class Sizes:
    megabytes: int
    points: int
    records: int
    tasks: int
    events: int
    files: int = 20  # of the streaming input (micro-batches, for Spark)
    mds_points: int = 4000  # of the MDS workload's dissimilarity matrix


FULL = Sizes(
    megabytes=200, points=1_000_000, records=10_000_000, tasks=10_000, events=5_000_000, files=20
)
QUICK = Sizes(
    megabytes=20,
    points=100_000,
    records=500_000,
    tasks=200,
    events=200_000,
    files=5,
    mds_points=500,
)
