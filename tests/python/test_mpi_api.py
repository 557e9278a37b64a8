"""heddle.MPI's local parts in a world of one: buffer specifications and their errors,
datatypes, operators on objects, statuses, requests, groups and communicator handles —
checked against what mpi4py documents (and numpy as the reference for the arithmetic)."""

from __future__ import annotations

from array import array

import numpy as np
import pytest

from heddle import MPI


def test_buffer_specifications_select_type_count_and_displacement() -> None:
    comm = MPI.COMM_SELF
    src = np.arange(10, dtype="f8")
    for spec, want in [
        (src, src),
        ([src, MPI.DOUBLE], src),
        ([src, 3, MPI.DOUBLE], src[:3]),
        ([src, (2, 4), MPI.DOUBLE], src[4:6]),
        ([src, 5], src[:5]),
    ]:
        out = np.full(10, -1.0)
        req = comm.Irecv([out, MPI.DOUBLE], source=0, tag=3)
        comm.Send(spec, dest=0, tag=3)
        status = MPI.Status()
        req.Wait(status)
        n = status.Get_count(MPI.DOUBLE)
        np.testing.assert_array_equal(out[:n], want)
        assert (out[n:] == -1).all()


def test_bad_buffer_specifications_name_the_problem() -> None:
    comm = MPI.COMM_SELF
    with pytest.raises(MPI.Exception, match=r"MPI_ERR_ARG.*\[buf, count, TYPE\]") as e:
        comm.Send([np.zeros(2), "d", "x"], dest=0)
    assert e.value.Get_error_class() == MPI.ERR_ARG
    with pytest.raises(MPI.Exception, match="need 5 elements; the buffer holds 2") as e:
        comm.Send([np.zeros(2), 5, MPI.DOUBLE], dest=0)
    assert e.value.error_class == MPI.ERR_BUFFER
    with pytest.raises(MPI.Exception, match="read-only") as e:
        comm.Recv([b"abc", MPI.BYTE], source=0)
    with pytest.raises(MPI.Exception, match="not a whole number of 8-byte elements"):
        comm.Send([bytearray(5), MPI.DOUBLE], dest=0)


def test_datatype_sizes_extents_and_derived_types() -> None:
    assert (MPI.INT.Get_size(), MPI.DOUBLE.Get_extent()) == (4, (0, 8))
    assert MPI.DOUBLE_INT.Get_size() == 12 and MPI.DOUBLE_INT.Get_extent() == (0, 16)
    vec = MPI.FLOAT.Create_vector(3, 2, 4)
    assert vec.Get_size() == 24 and vec.Get_extent() == (0, 40)
    nested = vec.Create_contiguous(2)
    assert nested.Get_size() == 48 and nested.Get_extent() == (0, 80)
    assert MPI.DOUBLE.tocode() == "d" and MPI.INT.tocode() == "i"
    with pytest.raises(ValueError):
        vec.tocode()
    with pytest.raises(MPI.Exception, match="predefined"):
        MPI.INT.Free()


def test_strided_types_move_exactly_their_elements() -> None:
    comm = MPI.COMM_SELF
    every_third = MPI.INT.Create_vector(4, 1, 3).Commit()
    src = np.arange(12, dtype="i")
    dst = np.full(12, -1, dtype="i")
    r = comm.Irecv([dst, 1, every_third], source=0, tag=1)
    comm.Send([src, 1, every_third], dest=0, tag=1)
    r.Wait()
    expected = np.full(12, -1, dtype="i")
    expected[::3] = src[::3]
    np.testing.assert_array_equal(dst, expected)


def test_operators_on_objects_match_python() -> None:
    assert MPI.SUM(2, 3) == 5 and MPI.PROD(2, 3) == 6
    assert (MPI.MAX(2, 3), MPI.MIN(2, 3)) == (3, 2)
    assert (MPI.LAND(1, 0), MPI.LOR(1, 0), MPI.LXOR(1, 1)) == (False, True, False)
    assert (MPI.BAND(6, 3), MPI.BOR(6, 3), MPI.BXOR(6, 3)) == (2, 7, 5)
    assert MPI.MAXLOC((1, 0), (1, 2)) == (1, 0)  # ties go to the lower index
    assert MPI.MAXLOC((3, 1), (1, 0)) == (3, 1)
    assert MPI.MINLOC((1, 5), (1, 2)) == (1, 2)
    np.testing.assert_array_equal(MPI.MAX(np.array([1, 5]), np.array([3, 2])), [3, 5])
    op = MPI.Op.Create(lambda a, b, t: None, commute=True)
    assert op.Is_commutative() and not op.Is_predefined() and MPI.SUM.is_predefined


def test_reductions_in_a_world_of_one_and_fallbacks_agree_with_numpy() -> None:
    comm = MPI.COMM_WORLD
    rng = np.random.default_rng(3)
    x = rng.standard_normal(100) + 1j * rng.standard_normal(100)
    y = np.zeros_like(x)
    comm.Allreduce(x, y, op=MPI.SUM)  # complex: folded with numpy
    np.testing.assert_array_equal(x, y)
    a = array("i", [1, 0, 3])
    b = array("i", [0, 0, 0])
    comm.Allreduce(a, b, op=MPI.LXOR)
    assert list(b) == [1, 0, 3]  # one operand: copied, as MPI does
    lxor = MPI.LXOR.fold(np.array([1, 0, 3]), np.array([1, 1, 0]), MPI.INT)
    np.testing.assert_array_equal(lxor, [0, 1, 1])
    assert comm.allreduce({"k": 1}, op=lambda p, q: {**p, **q}) == {"k": 1}


def test_status_counts_and_requests_made_inactive() -> None:
    s = MPI.Status()
    assert (s.Get_source(), s.Get_tag(), s.Get_error(), s.Get_count()) == (-1, -1, 0, 0)
    s.count = 12
    assert s.Get_count(MPI.INT) == 3 and s.Get_count(MPI.DOUBLE) == MPI.UNDEFINED
    assert MPI.Request.Waitany([MPI.REQUEST_NULL]) == MPI.UNDEFINED
    assert MPI.Request.Testall([]) is True
    comm = MPI.COMM_SELF
    r = comm.irecv(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    assert r.test() == (False, None)
    comm.send(["payload", 1], dest=0, tag=9)
    st = MPI.Status()
    assert r.wait(st) == ["payload", 1] and (st.source, st.tag) == (0, 9)
    assert r.wait() is None and not r  # inactive: waiting again returns at once


def test_groups_follow_mpi_set_semantics() -> None:
    g = MPI.Group(members=[10, 11, 12, 13], me=12)
    assert (g.Get_size(), g.Get_rank()) == (4, 2)
    inc = g.Incl([3, 0])
    assert inc._members == (13, 10) and inc.Get_rank() == MPI.UNDEFINED
    exc = g.Excl([1])
    assert exc._members == (10, 12, 13) and exc.Get_rank() == 1
    assert MPI.Group.Union(inc, exc)._members == (13, 10, 12)
    assert MPI.Group.Intersection(exc, inc)._members == (10, 13)
    assert MPI.Group.Difference(g, inc)._members == (11, 12)
    assert g.Translate_ranks([0, 3, MPI.PROC_NULL], inc) == [1, 0, MPI.PROC_NULL]
    assert inc.Compare(g.Incl([3, 0])) == MPI.IDENT
    assert inc.Compare(g.Incl([0, 3])) == MPI.SIMILAR
    with pytest.raises(MPI.Exception, match="rank 7 is not in this group"):
        g.Incl([7])


def test_communicator_handles() -> None:
    world = MPI.COMM_WORLD
    assert world.Get_name() == "MPI_COMM_WORLD" and world.Is_intra()
    assert world.Get_attr(MPI.TAG_UB) >= 32767
    assert MPI.COMM_NULL == MPI.COMM_NULL and not MPI.COMM_NULL
    with pytest.raises(MPI.Exception, match="COMM_NULL") as e:
        MPI.COMM_NULL.Get_rank()
    assert e.value.Get_error_class() == MPI.ERR_COMM
    dup = world.Dup()
    assert world.Compare(dup) == MPI.CONGRUENT and dup != world
    dup.Free()
    assert dup == MPI.COMM_NULL
    with pytest.raises(NotImplementedError, match=r"Comm\.Spawn"):
        _ = world.Spawn
    assert not hasattr(MPI, "Win")
