"""Communicators and groups: Split, Dup, Compare, Create from a group, Split_type,
COMM_SELF, group set operations and rank translation."""

from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
out = []
half = comm.Split(color=rank % 2, key=-rank)
out.append(("split", half.Get_rank(), half.Get_size(), half.allgather(rank)))
none = comm.Split(MPI.UNDEFINED if rank == 0 else 1, 0)
out.append(("undefined", none == MPI.COMM_NULL))
if none != MPI.COMM_NULL:
    none.Free()
dup = comm.Dup()
out.append(("compare", comm.Compare(comm) == MPI.IDENT, comm.Compare(dup) == MPI.CONGRUENT))
out.append(("dup sum", dup.allreduce(rank)))
group = comm.Get_group()
evens = group.Incl(list(range(0, size, 2)))
odds = group.Excl(list(range(0, size, 2)))
out.append(("groups", evens.Get_size(), odds.Get_size(), evens.Get_rank(), odds.Get_rank()))
union = MPI.Group.Union(odds, evens)
out.append(("union", union.Get_size(), union.Translate_ranks(list(range(size)), group)))
inter = MPI.Group.Intersection(group, evens)
out.append(("intersection", inter.Get_size(), MPI.Group.Compare(inter, evens) == MPI.IDENT))
sub = comm.Create(evens)
if sub != MPI.COMM_NULL:
    out.append(("create", sub.Get_rank(), sub.Get_size(), sub.allreduce(rank)))
    sub.Free()
else:
    out.append(("create", "null"))
shared = comm.Split_type(MPI.COMM_TYPE_SHARED)
out.append(("shared size", shared.Get_size()))
me = MPI.COMM_SELF
out.append(("self", me.Get_rank(), me.Get_size(), me.allreduce(rank)))
evens.Free()
odds.Free()
dup.Free()
out.append(("freed", dup == MPI.COMM_NULL))
all_out = comm.gather(out, root=0)
if rank == 0:
    for r, o in enumerate(all_out):
        for line in o:
            print(r, line)
