"""Rank 0 reads standard input (as mpirun forwards it) and broadcasts it."""

import sys

from mpi4py import MPI

comm = MPI.COMM_WORLD
text = sys.stdin.read() if comm.rank == 0 else None
text = comm.bcast(text, root=0)
lines = comm.gather(len(text.splitlines()), root=0)
if comm.rank == 0:
    print("lines per rank", lines, "first", text.splitlines()[0])
