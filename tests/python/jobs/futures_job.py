"""heddle.futures in a job: CommExecutor on every rank, the root checking each result
against Python's own map, sum and exceptions; one JSON line per rank."""

import json
import mmap
import os
import sys
import time
from concurrent.futures import FIRST_COMPLETED, Future, as_completed, wait

import numpy as np

from heddle.comm import init
from heddle.futures import BrokenExecutor, CommExecutor, RemoteTraceback


def square(x):
    return x * x


def add(a, b=0):
    return a + b


def fail(x):
    raise KeyError(f"no key {x}")


def rank_of_worker(_):
    return int(os.environ["HEDDLE_RANK"])


def array(n):
    return np.arange(n, dtype=np.float64) * 2


KEPT = None


def keep_array(n):
    """An array this worker remembers, to tell whether a later task gets the same object."""
    global KEPT
    KEPT = np.arange(n, dtype=np.float64)
    return KEPT


def same_object(a, scale=1.0):
    """Whether ``a`` is the kept array itself (resolved here, not sent back by the root)."""
    return a is KEPT, float(a.sum()) * scale


def mapped(a):
    """Whether ``a`` views a memory map (a result shared through the job directory)."""
    base = a
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    return isinstance(base, mmap.mmap)


def nap(seconds):
    time.sleep(seconds)
    return seconds


comm = init()
checks = []


def check(name, ok):
    if not ok:
        raise AssertionError(f"futures check failed: {name}")
    checks.append(name)


with CommExecutor(comm, root=0) as ex:
    if ex is not None:
        xs = list(range(-50, 250))
        check("map", list(ex.map(square, xs)) == [x * x for x in xs])
        for chunk in (1, 7, 1000):
            check(
                f"map chunk {chunk}",
                list(ex.map(add, xs, xs, chunksize=chunk)) == [2 * x for x in xs],
            )
        check("starmap", list(ex.starmap(add, [(1, 2), (3, 4)])) == [3, 7])
        check("map empty", list(ex.map(square, [])) == [])
        fs = [ex.submit(square, i) for i in range(500)]
        check(
            "as_completed",
            sorted(f.result() for f in as_completed(fs)) == [i * i for i in range(500)],
        )
        check("kwargs", ex.submit(add, 1, b=41).result() == 42)
        a = ex.submit(square, 6)
        b = ex.submit(add, a, b=ex.submit(square, 2))
        check("future arguments", b.result() == 40)
        # Resolved where it runs: the dependent task gets the very object its argument's
        # task returned on that worker (the value does not travel back from the root), as
        # long as the argument's future lives.
        kept = ex.submit(keep_array, 200_000)
        want = (True, 199_999 * 100_000.0)
        check("argument resolved on its worker", ex.submit(same_object, kept).result() == want)
        kept.result()
        check("kept while its future lives", ex.submit(same_object, kept).result() == want)
        again = ex.submit(same_object, ex.submit(keep_array, 1000))
        check("chain on one worker", again.result() == (True, 999 * 500.0))
        foreign = Future()
        foreign.set_result(kept.result())
        check("another executor's future", ex.submit(same_object, foreign).result()[0] is False)
        bad = ex.submit(fail, "k")
        try:
            bad.result()
            check("exception raised", False)
        except KeyError as e:
            check("exception raised", "no key k" in str(e))
            check(
                "remote traceback",
                isinstance(e.__cause__, RemoteTraceback) and "in fail" in str(e.__cause__),
            )
        dep = ex.submit(add, bad, 1)
        check(
            "argument failed",
            isinstance(dep.exception(), RuntimeError)
            and "argument's future failed" in str(dep.exception()),
        )
        try:
            ex.submit(lambda x: x, 1).result()
            check("unpicklable", False)
        except Exception as e:
            check("unpicklable", "lambda" in str(e) or "pickle" in str(e).lower())
        arr = ex.submit(array, 300_000).result()
        check("numpy result", arr.shape == (300_000,) and arr[-1] == 599_998.0)
        check("numpy zero copy", not arr.flags.owndata)
        # Large results on this host: mapped from the job directory, nothing left there.
        big = ex.submit(array, 2_000_000).result()
        check("large result mapped", mapped(big) and big[-1] == 3_999_998.0)
        big[0] = -1.0  # copy-on-write: the array is the caller's to change
        check("large result writable", big[0] == -1.0)
        small = ex.submit(array, 1000).result()
        check("small result in the message", not mapped(small))
        leftovers = [f for f in os.listdir(os.environ["HEDDLE_JOB_DIR"]) if "result-" in f]
        check("no shared files left", leftovers == [])
        ranks = set(ex.map(rank_of_worker, range(200)))
        check("both workers used", ranks == set(range(1, comm.size)))
        slow = ex.submit(nap, 0.3)
        quick = ex.submit(nap, 0.0)
        done, _ = wait([slow, quick], return_when=FIRST_COMPLETED)
        check("wait first completed", quick in done)
        # Longer than HEDDLE_TIMEOUT_S with nothing to do: idle workers must not fail.
        time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
        check("after idle", ex.submit(square, 9).result() == 81)
        queued = [ex.submit(nap, 0.05) for _ in range(100)]
        ex.shutdown(wait=True, cancel_futures=True)
        check(
            "cancel_futures",
            any(f.cancelled() for f in queued)
            and all(f.cancelled() or f.result() == 0.05 for f in queued),
        )
        try:
            ex.submit(square, 1)
            check("after shutdown", False)
        except RuntimeError as e:
            check("after shutdown", "shutdown" in str(e))
        check("broken class", issubclass(BrokenExecutor, RuntimeError))

print(json.dumps({"rank": comm.rank, "ok": True, "checks": len(checks), "worker": comm.rank != 0}))
