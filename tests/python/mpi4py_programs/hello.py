"""Hello world in mpi4py's style: every rank reports to rank 0."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
size = comm.Get_size()
name = MPI.Get_processor_name()
assert isinstance(name, str) and name
t0 = MPI.Wtime()
assert MPI.Wtime() >= t0 and MPI.Wtick() > 0
assert MPI.Is_initialized() and not MPI.Is_finalized()
assert comm.rank == rank and comm.size == size
greetings = comm.gather(f"Hello, World! I am process {rank} of {size}.", root=0)
if rank == 0:
    for line in greetings:
        print(line)
    print("version", MPI.Get_version())
