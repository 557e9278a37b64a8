"""mpi4py.futures' MPICommExecutor: every rank enters, the root submits, the others serve."""

from mpi4py import MPI
from mpi4py.futures import MPICommExecutor


def collatz(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


with MPICommExecutor(MPI.COMM_WORLD, root=0) as executor:
    if executor is not None:
        steps = list(executor.map(collatz, range(1, 2000), chunksize=64))
        print("longest", max(steps), "at", steps.index(max(steps)) + 1)
        futures = [executor.submit(collatz, n) for n in (27, 97, 871)]
        print("submitted", [f.result() for f in futures])
