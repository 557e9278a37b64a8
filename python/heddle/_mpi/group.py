"""mpi4py's ``Group`` for ``heddle.MPI``: an ordered set of processes, named by their
world ranks, with the set operations MPI defines. Groups are local: making one never
communicates; ``Comm.Create(group)`` turns one into a communicator."""

from __future__ import annotations

from collections.abc import Sequence

from heddle._mpi.errors import ERR_GROUP, ERR_RANK, Exception
from heddle._mpi.request import PROC_NULL, UNDEFINED

IDENT = 0
CONGRUENT = 1
SIMILAR = 2
UNEQUAL = 3


class Group:
    """An ordered set of processes (mpi4py's ``Group``)."""

    _members: tuple[int, ...]
    _me: int

    def __init__(self, group: Group | None = None, *, members: Sequence[int] = (), me: int = -1):
        if group is not None:
            members, me = group._members, group._me
        self._members = tuple(members)
        self._me = me  # this process's world rank
        self._null = group is None and me == -2

    def Get_size(self) -> int:
        return len(self._members)

    size = property(Get_size)

    def Get_rank(self) -> int:
        """This process's rank in the group, or ``UNDEFINED`` if it is not a member."""
        try:
            return self._members.index(self._me)
        except ValueError:
            return UNDEFINED

    rank = property(Get_rank)

    def _check(self, ranks: Sequence[int], what: str) -> list[int]:
        out = [int(r) for r in ranks]
        for r in out:
            if not 0 <= r < len(self._members):
                raise Exception(
                    ERR_RANK, f"Group.{what}: rank {r} is not in this group of {self.size}"
                )
        if len(set(out)) != len(out):
            raise Exception(ERR_RANK, f"Group.{what}: ranks repeat in {out}")
        return out

    def _make(self, members: Sequence[int]) -> Group:
        return Group(members=members, me=self._me)

    def Incl(self, ranks: Sequence[int]) -> Group:
        """The members at ``ranks``, in that order."""
        return self._make([self._members[r] for r in self._check(ranks, "Incl")])

    def Excl(self, ranks: Sequence[int]) -> Group:
        """Every member except those at ``ranks``, in group order."""
        drop = set(self._check(ranks, "Excl"))
        return self._make([m for i, m in enumerate(self._members) if i not in drop])

    def Range_incl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        return self.Incl(_expand(ranks))

    def Range_excl(self, ranks: Sequence[tuple[int, int, int]]) -> Group:
        return self.Excl(_expand(ranks))

    @classmethod
    def Union(cls, group1: Group, group2: Group) -> Group:
        """The members of ``group1``, then those of ``group2`` not in ``group1``."""
        seen = set(group1._members)
        return group1._make(list(group1._members) + [m for m in group2._members if m not in seen])

    @classmethod
    def Intersection(cls, group1: Group, group2: Group) -> Group:
        """The members of ``group1`` also in ``group2``, in ``group1``'s order."""
        other = set(group2._members)
        return group1._make([m for m in group1._members if m in other])

    Intersect = Intersection

    @classmethod
    def Difference(cls, group1: Group, group2: Group) -> Group:
        """The members of ``group1`` not in ``group2``."""
        other = set(group2._members)
        return group1._make([m for m in group1._members if m not in other])

    def Translate_ranks(
        self, ranks: Sequence[int] | None = None, group: Group | None = None
    ) -> list[int]:
        """The ranks in ``group`` of the members at ``ranks`` here (``UNDEFINED`` where
        one is not in ``group``; ``PROC_NULL`` stays ``PROC_NULL``)."""
        if ranks is None:
            ranks = range(self.size)
        out = []
        for r in ranks:
            if r == PROC_NULL:
                out.append(PROC_NULL)
                continue
            world = self._members[self._check([r], "Translate_ranks")[0]]
            if group is None:
                out.append(world)
            else:
                out.append(group._members.index(world) if world in group._members else UNDEFINED)
        return out

    def Compare(self, group: Group) -> int:
        if self._members == group._members:
            return IDENT
        if set(self._members) == set(group._members):
            return SIMILAR
        return UNEQUAL

    def Dup(self) -> Group:
        return Group(self)

    def Free(self) -> None:
        if self is GROUP_EMPTY:
            raise Exception(ERR_GROUP, "cannot free GROUP_EMPTY")
        self._members = ()
        self._null = True

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Group):
            return NotImplemented
        return self is other or (self._null and other._null)

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        return not self._null

    def __repr__(self) -> str:
        return f"<heddle.MPI.Group of world ranks {list(self._members)}>"


def _expand(ranges: Sequence[tuple[int, int, int]]) -> list[int]:
    out: list[int] = []
    for first, last, stride in ranges:
        if stride == 0:
            raise Exception(ERR_RANK, "Range_incl/Range_excl: a stride of 0")
        out.extend(range(first, last + (1 if stride > 0 else -1), stride))
    return out


GROUP_NULL = Group(members=(), me=-2)
GROUP_EMPTY = Group(members=(), me=-1)
