"""Synchronous sends: an Issend is unfinished until its receive matches it, Ssend returns
after the match, and NBX sparse data exchange (Issend, Iprobe, Ibarrier) delivers every
message although no rank knows how many it will get."""

import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
report = []

# Rank 1 receives only after the barrier, so rank 0's Test before it must say False.
if rank == 0:
    req = comm.Issend(np.arange(4, dtype="i"), dest=1, tag=7)
    report.append(("matched before the receive", req.Test()))
    comm.Barrier()
    req.Wait()
    comm.ssend({"after": "match"}, dest=1, tag=8)
else:
    comm.Barrier()
if rank == 1:
    buf = np.zeros(4, dtype="i")
    comm.Recv(buf, source=0, tag=7)
    report.append(("got", buf.tolist(), comm.recv(source=0, tag=8)))

# NBX: rank r sends to the ranks r + k (k odd), which do not know it.
for variant in ("buffers", "objects"):
    dests = [(rank + k) % size for k in range(1, size) if (rank + k) % 2 == 1]
    payload = {d: np.full(3000, rank * 100 + d, dtype="i8") for d in dests}
    if variant == "buffers":
        sends = [comm.Issend(payload[d], dest=d, tag=3) for d in dests]
    else:
        sends = [comm.issend(payload[d].tolist(), dest=d, tag=4) for d in dests]
    got = []
    barrier = None
    status = MPI.Status()
    while True:
        tag = 3 if variant == "buffers" else 4
        if comm.Iprobe(source=MPI.ANY_SOURCE, tag=tag, status=status):
            if variant == "buffers":
                buf = np.empty(status.Get_count(MPI.INT64_T), dtype="i8")
                comm.Recv(buf, source=status.Get_source(), tag=tag)
                got.append(int(buf[0]))
            else:
                got.append(comm.recv(source=status.Get_source(), tag=tag)[0])
        if barrier is None:
            if MPI.Request.Testall(sends):
                barrier = comm.Ibarrier()
        elif barrier.Test():
            break
    report.append((variant, sorted(got)))

reports = comm.gather(report, root=0)
if rank == 0:
    for r, rep in enumerate(reports):
        print(r, rep)
