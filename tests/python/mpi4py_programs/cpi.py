"""Compute pi by integrating 4/(1+x^2): the classic MPI example (n broadcast, sums reduced)."""

import math

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
for n in (10, 1000, 100000):
    n = comm.bcast(n if rank == 0 else None, root=0)
    h = 1.0 / n
    s = 0.0
    for i in range(rank + 1, n + 1, size):
        x = h * (i - 0.5)
        s += 4.0 / (1.0 + x * x)
    pi = comm.reduce(s * h, op=MPI.SUM, root=0)
    if rank == 0:
        print(f"n={n} pi~{pi:.8f} error<1e-7: {abs(pi - math.pi) < 1e-7}")
