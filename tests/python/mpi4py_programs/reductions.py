"""Reductions of every predefined operator on buffers and objects, MAXLOC/MINLOC, prefix
reductions and a user operator made with Op.Create."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
ints = np.array([rank + 1, 3 * rank + 2, 7 - rank, rank % 2], dtype="i")
for name in ("SUM", "PROD", "MAX", "MIN", "LAND", "LOR", "LXOR", "BAND", "BOR", "BXOR"):
    op = getattr(MPI, name)
    res = np.zeros_like(ints)
    comm.Allreduce([ints, MPI.INT], [res, MPI.INT], op=op)
    root = np.zeros_like(ints)
    comm.Reduce(ints, root if rank == 0 else None, op=op, root=0)
    out.append((name, res.tolist(), root.tolist() if rank == 0 else None))
x = np.linspace(0, 1, 5) * (rank + 1)
y = np.empty_like(x)
comm.Allreduce(x, y, op=MPI.SUM)
out.append(("float sum", np.round(y, 10).tolist()))
z = x.copy()
comm.Allreduce(MPI.IN_PLACE, z, op=MPI.MAX)
out.append(("in place max", np.round(z, 10).tolist()))
s = np.zeros(2, dtype="l")
comm.Scan(np.array([rank, rank * rank], dtype="l"), s, op=MPI.SUM)
e = np.zeros(2, dtype="l")
comm.Exscan(np.array([rank + 1, 2], dtype="l"), e, op=MPI.PROD)
out.append(("scan", s.tolist(), "exscan", e.tolist() if rank > 0 else None))
out.append(("obj", comm.allreduce(rank, op=MPI.MAX), comm.allreduce([rank], op=MPI.SUM)))
out.append(("scan obj", comm.scan(rank + 1), comm.exscan(rank + 1)))
value = [5.0, 2.0, 5.0][rank % 3]
out.append(("maxloc", comm.allreduce((value, rank), op=MPI.MAXLOC)))
out.append(("minloc", comm.allreduce((value, rank), op=MPI.MINLOC)))
pair = np.dtype([("v", "f8"), ("i", "i4")], align=True)
mine = np.array([(float(rank % 2), rank), (float(-rank), rank)], dtype=pair)
best = np.zeros_like(mine)
comm.Allreduce([mine, MPI.DOUBLE_INT], [best, MPI.DOUBLE_INT], op=MPI.MAXLOC)
out.append(("maxloc buf", [(float(v), int(i)) for v, i in best]))


def compose(inmem, outmem, datatype):
    # (a, b) pairs: x -> a*x + b; applies the lower rank's map first. Not commutative.
    a = np.frombuffer(inmem, dtype="f8")
    b = np.frombuffer(outmem, dtype="f8")
    a1, b1, a2, b2 = a[0], a[1], b[0], b[1]
    b[0], b[1] = a2 * a1, a2 * b1 + b2


op = MPI.Op.Create(compose, commute=False)
res = np.zeros(2)
comm.Allreduce(np.array([rank + 2.0, float(rank)]), res, op=op)
out.append(("user op", res.tolist(), op.Is_commutative()))
op.Free()
all_out = comm.gather(out, root=0)
if rank == 0:
    for r, o in enumerate(all_out):
        for line in o:
            print(r, line)
