"""Non-blocking collectives overlapping work: Iallreduce, Ibcast, Ireduce, Igather,
Iscatter, Iallgather, Ialltoall, their v-forms, Iscan, Iexscan, the reduce-scatters and
Ibarrier, waited with Wait, Test loops and Waitall."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
x = np.arange(6, dtype="f8") + rank
total = np.zeros(6)
req = comm.Iallreduce(x, total, op=MPI.SUM)
busy = sum(i * i for i in range(10_000))  # work while the reduction is under way
req.Wait()
out.append(("iallreduce", total.tolist(), busy > 0))
mx = np.zeros(3, dtype="i")
r2 = comm.Iallreduce(np.array([rank, -rank, rank % 2], dtype="i"), mx, op=MPI.MAX)
b = np.arange(5, dtype="l") * 3 if rank == 0 else np.zeros(5, dtype="l")
r3 = comm.Ibcast(b, root=0)
red = np.zeros(2, dtype="f8") if rank == size - 1 else None
r4 = comm.Ireduce(np.array([rank + 1.0, 2.0]), red, op=MPI.PROD, root=size - 1)
MPI.Request.Waitall([r2, r3, r4])
out.append(("several", mx.tolist(), b.tolist(), red.tolist() if red is not None else None))
g = np.zeros(2 * size, dtype="i") if rank == 1 % size else None
r5 = comm.Igather(np.array([rank, 10 * rank], dtype="i"), g, root=1 % size)
while not r5.Test():
    pass
out.append(("igather", g.tolist() if g is not None else None))
src = np.arange(3 * size, dtype="f4") if rank == 0 else None
part = np.zeros(3, dtype="f4")
comm.Iscatter(src, part, root=0).Wait()
out.append(("iscatter", part.tolist()))
every = np.zeros(size, dtype="i")
comm.Iallgather(np.array([rank * rank], dtype="i"), every).Wait()
out.append(("iallgather", every.tolist()))
a2a = np.zeros(2 * size, dtype="i")
comm.Ialltoall(np.arange(2 * size, dtype="i") + 100 * rank, a2a).Wait()
out.append(("ialltoall", a2a.tolist()))
inplace = np.full(4, rank + 1.0)
comm.Iallreduce(MPI.IN_PLACE, inplace, op=MPI.SUM).Wait()
out.append(("in place", inplace.tolist()))
counts = [r + 1 for r in range(size)]
displs = [sum(counts[:r]) + r for r in range(size)]  # a gap after each block
gv = np.full(displs[-1] + counts[-1], -1, dtype="i") if rank == 0 else None
spec = [gv, (counts, displs), MPI.INT] if rank == 0 else None
comm.Igatherv(np.full(counts[rank], rank, dtype="i"), spec, root=0).Wait()
out.append(("igatherv", gv.tolist() if gv is not None else None))
av = np.full(displs[-1] + counts[-1], -1.0)
comm.Iallgatherv(np.full(counts[rank], rank + 0.5), [av, counts, displs, MPI.DOUBLE]).Wait()
out.append(("iallgatherv", av.tolist()))
sv = np.arange(displs[-1] + counts[-1], dtype="f8") if rank == 0 else None
got = np.zeros(counts[rank])
comm.Iscatterv([sv, counts, displs, MPI.DOUBLE] if rank == 0 else None, got, root=0).Wait()
out.append(("iscatterv", got.tolist()))
sc = [(rank + d) % 2 + 1 for d in range(size)]
rc = [(s + rank) % 2 + 1 for s in range(size)]
vout = np.zeros(sum(rc), dtype="i")
comm.Ialltoallv(
    [np.arange(sum(sc), dtype="i") + 10 * rank, sc, [sum(sc[:d]) for d in range(size)], MPI.INT],
    [vout, rc, [sum(rc[:s]) for s in range(size)], MPI.INT],
).Wait()
out.append(("ialltoallv", vout.tolist()))
pre = np.zeros(2, dtype="l")
ex = np.zeros(2, dtype="l")
MPI.Request.Waitall(
    [
        comm.Iscan(np.array([rank + 1, 2], dtype="l"), pre, op=MPI.PROD),
        comm.Iexscan(np.array([rank, 1], dtype="l"), ex, op=MPI.SUM),
    ]
)
out.append(("iscan", pre.tolist(), "iexscan", ex.tolist() if rank > 0 else None))
rsb = np.zeros(2, dtype="f8")
comm.Ireduce_scatter_block(np.arange(2 * size, dtype="f8") * (rank + 1), rsb, op=MPI.SUM).Wait()
out.append(("ireduce_scatter_block", rsb.tolist()))
rsc = [r + 1 for r in range(size)]
rs = np.zeros(rsc[rank], dtype="i")
comm.Ireduce_scatter(np.arange(sum(rsc), dtype="i") + rank, rs, recvcounts=rsc, op=MPI.MAX).Wait()
out.append(("ireduce_scatter", rs.tolist()))
barrier = comm.Ibarrier()
polls = 0
while not barrier.Test():
    polls += 1
out.append(("ibarrier", True))
all_out = comm.gather(out, root=0)
if rank == 0:
    for r_, o in enumerate(all_out):
        for line in o:
            print(r_, line)
