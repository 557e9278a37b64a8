"""``python -m heddle.futures script.py [args...]`` (or ``-m module``) under ``heddle run``:
rank 0 runs the script, in which ``PoolExecutor()`` sends tasks to the other ranks; they
import the script as ``__mp_main__`` (so its top-level functions can be unpickled; code under
``if __name__ == "__main__":`` does not run there) and serve until rank 0 is done."""

from __future__ import annotations

import runpy
import sys

import heddle.futures as futures
from heddle.comm import init
from heddle.futures._executor import stop_workers
from heddle.futures._worker import serve

USAGE = "usage: python -m heddle.futures SCRIPT [ARGS...] | -m MODULE [ARGS...]"


def _run(target: list[str], run_name: str) -> None:
    if target[0] == "-m":
        runpy.run_module(target[1], run_name=run_name, alter_sys=True)
    else:
        runpy.run_path(target[0], run_name=run_name)


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help") or (argv[0] == "-m" and len(argv) < 2):
        print(USAGE, file=sys.stderr)
        return 2
    target = argv[:2] if argv[0] == "-m" else argv[:1]
    sys.argv = [target[-1], *argv[len(target) :]]
    world = init()
    comm = world.split(0, world.rank)
    assert comm is not None
    futures._server_comm = comm
    if world.rank == 0:
        try:
            _run(target, "__main__")
        finally:
            stop_workers(comm, list(range(1, comm.size)))
        return 0
    if target[0] != "-m":
        module = runpy.run_path(target[0], run_name="__mp_main__")
        main_module = type(sys)("__mp_main__")
        main_module.__dict__.update(module)
        sys.modules["__mp_main__"] = sys.modules["__main__"] = main_module
    serve(comm, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
