"""heddle.ml.nearest_sums against numpy: random blocks of every remainder of the native
kernel's 8-point blocks, 1 to 6 dimensions (the compiled and the general paths), ties,
inputs of other types and orders, and bad shapes."""

import numpy as np
import pytest

from heddle.ml import nearest_sums


def reference(points, centers):
    d2 = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    nearest = d2.argmin(axis=1)
    k, d = centers.shape
    out = np.zeros((k, d + 1))
    for j in range(k):
        mine = points[nearest == j]
        out[j, :d] = mine.sum(axis=0)
        out[j, d] = len(mine)
    return out


@pytest.mark.parametrize("d", [1, 2, 3, 4, 5, 6])
def test_sums_and_counts_match_numpy(d):
    rng = np.random.default_rng(d)
    for n in [0, 1, 7, 8, 9, 100, 1003]:
        points = rng.normal(size=(n, d)) * 10
        centers = rng.normal(size=(1 + n % 17, d)) * 10
        got = nearest_sums(points, centers)
        assert got.shape == (len(centers), d + 1)
        np.testing.assert_allclose(got, reference(points, centers), rtol=1e-12, atol=1e-9)
        assert got[:, d].sum() == n


def test_ties_go_to_the_first_center_and_inputs_are_converted():
    # Every point is as far from both centers: argmin's first one takes them all.
    points = np.array([[0, 1], [0, -1], [0, 5]] * 5, dtype=np.int32)
    centers = np.array([[-1.0, 0.0], [1.0, 0.0]])
    got = nearest_sums(points, centers)
    assert got[0, 2] == 15 and got[1, 2] == 0
    fortran = np.asfortranarray(np.arange(40.0).reshape(20, 2))
    np.testing.assert_allclose(
        nearest_sums(fortran, centers), reference(np.ascontiguousarray(fortran), centers)
    )
    np.testing.assert_allclose(
        nearest_sums(fortran[::2], centers), reference(fortran[::2], centers)
    )


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="as many columns"):
        nearest_sums(np.zeros((4, 2)), np.zeros((3, 3)))
    with pytest.raises(ValueError, match="2-D"):
        nearest_sums(np.zeros(4), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="at least one center"):
        nearest_sums(np.zeros((4, 2)), np.zeros((0, 2)))
