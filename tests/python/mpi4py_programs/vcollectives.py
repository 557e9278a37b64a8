"""Vector collectives with counts and displacements in every buffer form, and the
reduce-scatter pair."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
counts = [r + 1 for r in range(size)]
displs = [sum(counts[:r]) + 2 * r for r in range(size)]  # gaps between the blocks
total = displs[-1] + counts[-1]
mine = np.full(counts[rank], rank, dtype="f8")
recv = np.full(total, -1.0)
comm.Gatherv(mine, [recv, (counts, displs), MPI.DOUBLE] if rank == 0 else None, root=0)
if rank == 0:
    out.append(("gatherv", recv.tolist()))
every = np.full(total, -1.0)
comm.Allgatherv([mine, MPI.DOUBLE], [every, counts, displs, MPI.DOUBLE])
out.append(("allgatherv", every.tolist()))
src = np.arange(total, dtype="i") if rank == 0 else None
part = np.zeros(counts[rank], dtype="i")
comm.Scatterv([src, counts, displs, MPI.INT] if rank == 0 else None, part, root=0)
out.append(("scatterv", part.tolist()))
scounts = [(rank + d) % 3 + 1 for d in range(size)]
sdispls = [sum(scounts[:d]) for d in range(size)]
sendbuf = np.array([100 * rank + i for i in range(sum(scounts))], dtype="l")
rcounts = [(s + rank) % 3 + 1 for s in range(size)]
rdispls = [sum(rcounts[:s]) for s in range(size)]
recvbuf = np.zeros(sum(rcounts), dtype="l")
comm.Alltoallv([sendbuf, (scounts, sdispls), MPI.LONG], [recvbuf, (rcounts, rdispls), MPI.LONG])
out.append(("alltoallv", recvbuf.tolist()))
block = np.zeros(2, dtype="i")
comm.Reduce_scatter_block(np.arange(2 * size, dtype="i") * (rank + 1), block, op=MPI.SUM)
out.append(("reduce_scatter_block", block.tolist()))
rc = [r + 1 for r in range(size)]
mine_rs = np.zeros(rc[rank], dtype="f8")
comm.Reduce_scatter(np.arange(sum(rc), dtype="f8") + rank, mine_rs, recvcounts=rc, op=MPI.SUM)
out.append(("reduce_scatter", mine_rs.tolist()))
a = np.arange(size * 2, dtype="i") + 10 * rank
b = np.zeros_like(a)
comm.Alltoall(a, b)
out.append(("alltoall", b.tolist()))
g = np.zeros(size * 3, dtype="f4")
comm.Allgather(np.full(3, rank, dtype="f4"), g)
out.append(("allgather", g.tolist()))
out.append(("objects", comm.alltoall([(rank, d) for d in range(size)])))
all_out = comm.gather(out, root=0)
if rank == 0:
    for r, o in enumerate(all_out):
        for line in o:
            print(r, line)
