"""Datatypes: sizes and extents, counts in buffer specifications, derived contiguous and
vector types, complex numbers, and buffers that are not numpy arrays."""

from array import array

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
if rank == 0:
    for t in (
        MPI.INT,
        MPI.LONG,
        MPI.FLOAT,
        MPI.DOUBLE,
        MPI.BYTE,
        MPI.CHAR,
        MPI.BOOL,
        MPI.DOUBLE_COMPLEX,
        MPI.INT64_T,
        MPI.UNSIGNED,
    ):
        out.append((t.Get_name(), t.Get_size(), t.Get_extent()))
row = MPI.DOUBLE.Create_contiguous(4).Commit()
col = MPI.DOUBLE.Create_vector(4, 1, 4).Commit()
out.append(("derived", row.Get_size(), col.Get_size(), col.Get_extent()[1]))
m = np.arange(16, dtype="f8").reshape(4, 4) if rank == 0 else np.zeros((4, 4))
comm.Bcast([m, 1, col], root=0)
out.append(("column bcast", m.tolist()))
m2 = np.arange(16, dtype="f8").reshape(4, 4) * (rank + 1)
r = np.zeros((4, 4))
left, right = (rank - 1) % size, (rank + 1) % size
comm.Sendrecv([m2, 2, row], dest=right, recvbuf=[r, 2, row], source=left)
out.append(("two rows", r.tolist()))
part = np.arange(10, dtype="i")
got = np.full(10, -1, dtype="i")
comm.Sendrecv(
    [part, 3, MPI.INT], dest=right, sendtag=1, recvbuf=[got, MPI.INT], source=left, recvtag=1
)
out.append(("count 3", got.tolist()))
z = np.array([1 + 2j, rank - 1j])
zs = np.zeros_like(z)
comm.Allreduce(z, zs, op=MPI.SUM)
out.append(("complex", zs.tolist()))
a = array("d", [rank, rank + 0.5])
b = array("d", [0.0, 0.0])
comm.Allreduce(a, b, op=MPI.SUM)
out.append(("array.array", b.tolist()))
raw = bytearray(b"abc" if rank == 0 else b"xyz")
comm.Bcast([raw, MPI.BYTE], root=0)
out.append(("bytearray", bytes(raw)))
row.Free()
col.Free()
all_out = comm.gather(out, root=0)
if rank == 0:
    for r_, o in enumerate(all_out):
        for line in o:
            print(r_, line)
