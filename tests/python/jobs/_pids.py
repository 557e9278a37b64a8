"""Helper of the job scripts: record this worker's pid for the tests' orphan checks."""

import os
import sys
from pathlib import Path


def record(rank: int) -> None:
    d = Path(sys.argv[1])
    tmp = d / f"{rank}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.rename(d / f"{rank}.pid")
