"""Algebra.log keeps its relative accuracy for tiny angles, down to the smallest normal numbers."""
import numpy as np
import pytest

from galinear import Algebra


def _relative_error(approx, exact):
    scale = np.max(np.abs(exact))  # divide first: squares of 1e-300 would underflow
    return np.linalg.norm((approx - exact) / scale) / np.linalg.norm(exact / scale)


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
@pytest.mark.parametrize("size", [1e-1, 1e-6, 1e-12, 1e-100, 1e-300, 1e-306])
def test_log_of_exp_is_relatively_accurate(n, size, rng):
    alg = Algebra(n)
    b = rng.standard_normal(alg.num_bivectors)
    b *= size / np.abs(b).max()
    logged = alg.bivector_coefficients(alg.log(alg.exp(alg.bivector(b))))
    assert _relative_error(logged, b) < 1e-13


def test_log_mixes_a_large_and_a_tiny_plane():
    alg = Algebra(4)
    for big in (0.3, 0.99, 1.2, 3.0):  # both sides of the 1-rad switch between the two formulas
        b = np.array([big, 0, 0, 0, 0, 1e-12])  # e12 and e34
        logged = alg.bivector_coefficients(alg.log(alg.exp(alg.bivector(b))))
        assert _relative_error(logged, b) < 1e-13
        assert abs(logged[5] - 1e-12) < 1e-12 * 1e-6


def test_log_float32_tiny():
    alg = Algebra(4)
    b = np.array([1e-30, 2e-30, 0, 0, 0, 1e-30], dtype=np.float32)
    logged = alg.bivector_coefficients(alg.log(alg.exp(alg.bivector(b))))
    assert logged.dtype == np.float32
    assert _relative_error(logged.astype(np.float64), b.astype(np.float64)) < 1e-6
