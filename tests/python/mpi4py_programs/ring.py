"""Messages around a ring with Isend/Irecv (buffers and objects), larger than any
transport buffer, plus a token passed with blocking calls."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
left, right = (rank - 1) % size, (rank + 1) % size
report = []
for n in (0, 1, 1000, 500_000):
    send = np.arange(n, dtype="f8") + rank
    recv = np.empty(n, dtype="f8")
    reqs = [
        comm.Irecv([recv, MPI.DOUBLE], source=left, tag=n % 100),
        comm.Isend([send, MPI.DOUBLE], dest=right, tag=n % 100),
    ]
    MPI.Request.Waitall(reqs)
    report.append((n, bool((recv == np.arange(n) + left).all())))
sreq = comm.isend({"from": rank, "data": list(range(rank + 3))}, dest=right, tag=11)
rreq = comm.irecv(source=left, tag=11)
got = rreq.wait()
sreq.wait()
report.append(("obj", got["from"] == left, len(got["data"])))
token = np.zeros(1, dtype="i")
if rank == 0:
    token[0] = 1
    comm.Send(token, dest=right, tag=0)
    comm.Recv(token, source=left, tag=0)
else:
    comm.Recv(token, source=left, tag=0)
    token[0] += 1
    comm.Send(token, dest=right, tag=0)
report.append(("token", int(token[0])))
reports = comm.gather(report, root=0)
if rank == 0:
    for r, rep in enumerate(reports):
        print(r, rep)
