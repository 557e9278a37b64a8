"""Persistent requests: a ring set up once with Send_init/Recv_init and run five times
with Startall/Waitall, the send buffer changing between runs."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
left, right = (rank - 1) % size, (rank + 1) % size
send = np.zeros(4, dtype="i")
recv = np.zeros(4, dtype="i")
requests = [comm.Recv_init(recv, source=left, tag=5), comm.Send_init(send, dest=right, tag=5)]
seen = []
for step in range(5):
    send[:] = rank * 100 + step
    MPI.Prequest.Startall(requests)
    status = MPI.Status()
    requests[0].Wait(status)
    requests[1].Wait()
    seen.append((int(recv[0]), status.Get_source()))
for r in requests:
    r.Free()
all_seen = comm.gather(seen, root=0)
if rank == 0:
    for r_, s in enumerate(all_seen):
        print(r_, s)
