"""A job that survives a killed worker (run under ``heddle run --restarts 1``).

``resume.py DIR KILL_AT dataset``: 9 steps of ``DataSet.iterate`` over 0..99 with
checkpoints every 3 steps in DIR; ``resume.py DIR KILL_AT loop``: 12 steps of a loop over
a state held on every worker, with ``Session.loop_checkpoints`` every 4. In the job's first
attempt the last rank kills itself (SIGKILL) after step KILL_AT. Rank 0 prints the attempt,
the step it resumed from, and the result.
"""

import os
import signal
import sys

import heddle
from heddle.data import Session


def affine(x: int) -> int:
    return (x * 7 + 3) % 1_000_003


def main() -> None:
    directory, kill_at, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    comm = heddle.init()
    session = Session(comm)
    last_rank = comm.size - 1

    def maybe_die(step: int) -> None:
        if step == kill_at and comm.attempt == 0 and comm.rank == last_rank:
            os.kill(os.getpid(), signal.SIGKILL)

    if mode == "dataset":
        seen = [0]

        def done(_a: object, _b: object) -> bool:
            seen[0] += 1
            maybe_die(seen[0])
            return False

        data = session.range(100)
        last, steps = data.iterate(
            9, lambda d: d.map(affine), done, checkpoint_dir=directory, checkpoint_every=3
        )
        result = last.collect()
        resumed_from = steps - seen[0]
    else:
        checkpoints = session.loop_checkpoints(directory, every=4)
        resumed_from, state = checkpoints.resume() or (0, list(range(10)))
        for i in range(resumed_from, 12):
            state = [affine(x) for x in state]
            checkpoints.completed(i + 1, state)
            maybe_die(i + 1)
            comm.barrier()  # as a real iteration's reduction would
        steps, result = 12, state
    if comm.rank == 0:
        print(f"attempt={comm.attempt} resumed_from={resumed_from} steps={steps} {result}")


main()
