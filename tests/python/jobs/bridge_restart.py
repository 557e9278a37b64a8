"""A job whose bridged filter crashes, run under ``heddle run --restarts 1``.

``bridge_restart.py DIR TRANSPORT``: 6 steps of ``DataSet.iterate`` over "0".."99", each
step piping the records through ``affine_filter.py`` over TRANSPORT, with checkpoints
every 2 steps in DIR. In the first attempt the filter on the last rank crashes in step 5,
which fails the job; the second attempt resumes after the checkpoint of step 4. Rank 0
prints the attempt, the step it resumed from, and the result as integers.
"""

import os
import sys

import heddle
from heddle.data import Session

FILTER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "affine_filter.py")


def main() -> None:
    directory, transport = sys.argv[1], sys.argv[2]
    comm = heddle.init()
    session = Session(comm)
    calls = [0]

    def step(d):
        calls[0] += 1
        args = [str(calls[0]), str(comm.size - 1), "5"]
        return d.pipe([sys.executable, FILTER], transport, args=args)

    data = session.range(100).map(str)
    last, steps = data.iterate(
        6, step, lambda _a, _b: False, checkpoint_dir=directory, checkpoint_every=2
    )
    result = [int(x) for x in last.collect() or []]
    if comm.rank == 0:
        print(f"attempt={comm.attempt} resumed_from={steps - calls[0]} steps={steps} {result}")


main()
