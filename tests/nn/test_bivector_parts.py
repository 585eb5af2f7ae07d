"""Summed bivector parts for the exact gradient: torch (matrix product, gather) and numba kernels
against products computed by the core algebra."""
import numpy as np
import pytest
import torch

from galinear import Algebra
from galinear.nn import dexp
from galinear.nn.functional import plan


def _reference(a, b, n):
    """sum_t <a_t b_t~>_2 and sum_t <b_t~ a_t>_2 from Algebra.gp, float64."""
    alg = Algebra(n)
    a64 = np.asarray(a, dtype=np.float64).reshape(-1, 2**n)
    b64 = np.asarray(b, dtype=np.float64).reshape(-1, 2**n)
    rb = alg.reverse(b64)
    bivector_slice = slice(1 + n, 1 + n + n * (n - 1) // 2)  # shortlex: scalar, vectors, bivectors
    left = alg.gp(a64, rb)[:, bivector_slice]
    right = alg.gp(rb, a64)[:, bivector_slice]
    P = a.shape[1]
    return left.reshape(-1, P, left.shape[-1]).sum(0), right.reshape(-1, P, right.shape[-1]).sum(0)


@pytest.mark.parametrize("n", [2, 3, 5, 7, 9])
@pytest.mark.parametrize("kernel", ["torch", "numba"])
@pytest.mark.parametrize("dtype,rtol", [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_bivector_parts_match_the_algebra(n, kernel, dtype, rtol, rng):
    T, P = 13, 3  # 13 tokens: a partial last block
    a = torch.as_tensor(rng.standard_normal((T, P, 2**n)), dtype=dtype)
    b = torch.as_tensor(rng.standard_normal((T, P, 2**n)), dtype=dtype)
    left, right = dexp.bivector_parts(a, b, kernel=kernel)
    ref_left, ref_right = _reference(a.double().numpy(), b.double().numpy(), n)
    scale = max(np.abs(ref_left).max(), np.abs(ref_right).max())
    assert left.dtype == dtype and left.shape == (P, n * (n - 1) // 2)
    np.testing.assert_allclose(left.double().numpy(), ref_left, rtol=0, atol=rtol * scale * np.sqrt(T * 2**n))
    np.testing.assert_allclose(right.double().numpy(), ref_right, rtol=0, atol=rtol * scale * np.sqrt(T * 2**n))


def test_torch_gather_path_above_the_correlation_limit_agrees_with_numba(rng):
    n = 9  # 512 coefficients: above the correlation limit, so "torch" takes the gather path
    assert plan.bivector_parts_method(2**n, "cpu", numba=False) == "gather"
    a = torch.as_tensor(rng.standard_normal((20, 2, 2**n)))
    b = torch.as_tensor(rng.standard_normal((20, 2, 2**n)))
    for t, m in zip(dexp.bivector_parts(a, b, kernel="torch"), dexp.bivector_parts(a, b, kernel="numba")):
        np.testing.assert_allclose(t.numpy(), m.numpy(), rtol=1e-12, atol=1e-11)


def test_numba_parts_do_not_depend_on_the_thread_count(rng):
    import numba

    a = torch.as_tensor(rng.standard_normal((50, 2, 512)), dtype=torch.float32)
    b = torch.as_tensor(rng.standard_normal((50, 2, 512)), dtype=torch.float32)
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = dexp.bivector_parts(a, b, kernel="numba")
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = dexp.bivector_parts(a, b, kernel="numba")
    finally:
        numba.set_num_threads(before)
    for x, y in zip(one, two):
        assert torch.equal(x, y)


def test_bivector_parts_reject_bad_input():
    a = torch.zeros(4, 1, 8)
    with pytest.raises(ValueError, match="kernel must be"):
        dexp.bivector_parts(a, a, kernel="fast")
    with pytest.raises(ValueError, match=r"\(T, P, 2\*\*n\)"):
        dexp.bivector_parts(a, torch.zeros(4, 1, 16))
    from galinear.rotor_kernels.bivector_parts import bivector_parts

    with pytest.raises(ValueError, match="float32 or float64"):
        bivector_parts(np.zeros((2, 1, 8), dtype=np.int64), np.zeros((2, 1, 8), dtype=np.int64))
    with pytest.raises(ValueError, match="block"):
        bivector_parts(np.zeros((2, 1, 8)), np.zeros((2, 1, 8)), block=0)
