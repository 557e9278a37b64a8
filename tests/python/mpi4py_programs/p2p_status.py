"""Receives from any source with any tag, statuses, probes, sendrecv with two tags,
PROC_NULL, and the Wait/Test families."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
status = MPI.Status()
if rank == 0:
    seen = []
    for _ in range(size - 1):
        buf = np.zeros(10, dtype="i")
        comm.Recv([buf, MPI.INT], source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=status)
        n = status.Get_count(MPI.INT)
        seen.append((status.Get_source(), status.Get_tag(), n, buf[:n].tolist()))
    out.append(("any source", sorted(seen)))
else:
    comm.Send(np.arange(rank + 2, dtype="i"), dest=0, tag=40 + rank)
comm.Barrier()
if rank == 1:
    comm.send("x" * (rank * 1000), dest=0, tag=9)
if rank == 0 and size > 1:
    comm.Probe(source=MPI.ANY_SOURCE, tag=9, status=status)
    out.append(("probe", status.Get_source(), status.Get_tag(), status.Get_count() > 1000))
    out.append(("recv after probe", len(comm.recv(source=status.Get_source(), tag=9))))
comm.Barrier()
out.append(("iprobe nothing", comm.Iprobe(source=MPI.ANY_SOURCE, tag=12345)))
left, right = (rank - 1) % size, (rank + 1) % size
got = np.zeros(3)
comm.Sendrecv(
    np.full(3, float(rank)),
    dest=right,
    sendtag=rank,
    recvbuf=got,
    source=left,
    recvtag=left,
    status=status,
)
out.append(("sendrecv", got.tolist(), status.Get_source(), status.Get_tag()))
rep = np.full(4, rank, dtype="i")
comm.Sendrecv_replace(rep, dest=right, sendtag=5, source=left, recvtag=5)
out.append(("sendrecv_replace", rep.tolist()))
obj = comm.sendrecv({"r": rank}, dest=right, sendtag=3, source=left, recvtag=3)
out.append(("sendrecv obj", obj))
comm.Send(np.zeros(1), dest=MPI.PROC_NULL)
comm.Recv(np.zeros(1), source=MPI.PROC_NULL, status=status)
out.append(("proc null", status.Get_source() == MPI.PROC_NULL, status.Get_count()))
reqs = [comm.Irecv(np.zeros(2, dtype="i"), source=left, tag=70 + i) for i in range(3)]
sends = [comm.Isend(np.array([i, rank], dtype="i"), dest=right, tag=70 + i) for i in range(3)]
first = MPI.Request.Waitany(reqs)
done = MPI.Request.Waitsome(reqs) or []
MPI.Request.Waitall(reqs + sends)
out.append(("waitany", 0 <= first < 3, all(0 <= d < 3 for d in done)))
flag = MPI.Request.Testall(reqs)
out.append(("testall after wait", flag))
r = comm.irecv(source=left, tag=80)
comm.isend(rank * 2, dest=right, tag=80).wait()
while True:
    ok, value = r.test()
    if ok:
        break
out.append(("test obj", value))
lost = comm.Irecv(np.zeros(1), source=left, tag=999)
lost.Cancel()
lost.Wait(status)
out.append(("cancelled", status.Is_cancelled()))
all_out = comm.gather(out, root=0)
if rank == 0:
    for r_, o in enumerate(all_out):
        for line in o:
            print(r_, line)
