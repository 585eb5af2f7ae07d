"""The numba rotor-chain kernels against the float64 reference map of galinear.testing.

Tolerances (norm-wise relative error ||a - b|| / ||b|| against the float64 reference evaluated on
the same inputs): galinear.testing.default_rtol, float32 1e-5, float64 1e-12. The kernels compute
the map only; its transpose is the same map with the factors of the reversed rotors.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from galinear.rotor_kernels import rotor_chain
from galinear.rotor_kernels.rotor_chain import sandwich_forward
from galinear.testing import (
    default_rtol,
    random_factor_case,
    reference_factor_map,
    relative_error,
    transposed_map_factors,
)


def check_against_reference(x, factors, rng, dtype):
    y = sandwich_forward(x, *factors)
    assert y.dtype == dtype and y.shape == x.shape
    assert relative_error(y, reference_factor_map(x, factors)) < default_rtol(dtype)
    # the transposed map: <M^T g, x> = <g, M x>
    g = rng.standard_normal(x.shape).astype(dtype)
    gx = sandwich_forward(g, *transposed_map_factors(factors))
    assert gx.dtype == dtype
    assert relative_error(gx, reference_factor_map(g, transposed_map_factors(factors))) < default_rtol(dtype)
    lhs = float((gx.astype(np.float64) * x).sum())
    rhs = float((g.astype(np.float64) * y).sum())
    assert abs(lhs - rhs) <= 10 * default_rtol(dtype) * np.linalg.norm(g) * np.linalg.norm(x)


def shapes_for(n):
    """(B, P) pairs: batch 1 and odd batches, several numbers of chunk pairs."""
    if n == 12:
        return [(3, 1)]
    if n == 11:
        return [(1, 2)]
    return [(1, 1 + n % 3), (7, 1 + (n + 1) % 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n", range(1, 13))
def test_matches_reference(rng, n, double, dtype):
    for B, P in shapes_for(n):
        x, factors = random_factor_case(rng, n, B, P, dtype, double)
        check_against_reference(x, factors, rng, dtype)


@pytest.mark.nojit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_small_cases_nojit(rng, n, double, dtype):
    x, factors = random_factor_case(rng, n, 3, 2, dtype, double)
    check_against_reference(x, factors, rng, dtype)


@given(n=st.integers(1, 7), seed=st.integers(0, 2**32 - 1), double=st.booleans(),
       scale=st.sampled_from([0.0, 1e-4, 1.0, 10.0]))
def test_orthogonality_property(n, seed, double, scale):
    """For any factors (angles from 0 to many turns): |y| = |x| per token and M^T y = x."""
    rng = np.random.default_rng(seed)
    x, factors = random_factor_case(rng, n, 3, 2, np.float64, double)
    factors = [f * scale for f in factors]
    y = sandwich_forward(x, *factors)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert relative_error(sandwich_forward(y, *transposed_map_factors(factors)), x) < 1e-12


def test_orthogonal_and_inverse(rng):
    """|y| = |x| per token, and the transposed map gives back x (M^T M = 1)."""
    x, factors = random_factor_case(rng, 8, 5, 2, np.float64, True)
    y = sandwich_forward(x, *factors)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert relative_error(sandwich_forward(y, *transposed_map_factors(factors)), x) < 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_and_tile_do_not_change_results(rng, dtype):
    import numba
    x, factors = random_factor_case(rng, 9, 37, 3, dtype, True)  # 37 tokens: full and partial tiles
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            for tile in (16, 32):
                results.append(sandwich_forward(x, *factors, tile=tile))
    finally:
        numba.set_num_threads(before)
    for other in results[1:]:  # every token computed by the same operations: the same bits
        np.testing.assert_array_equal(other, results[0])


def test_zero_angle_is_the_identity(rng):
    """theta = 0 (w parallel to v, or w = 0): every factor is 1, the map the identity."""
    n, P = 5, 2
    v = rng.standard_normal((P, 2, n))
    w = 0.5 * v.copy()
    w[1, 1] = 0.0
    x = rng.standard_normal((3, P, 1 << n))
    np.testing.assert_allclose(sandwich_forward(x, v, w), x, atol=1e-14)


def test_bad_input_is_refused(rng):
    x, (V, W) = random_factor_case(rng, 4, 2, 3, np.float64, False)
    with pytest.raises(ValueError, match="2\\*\\*n"):
        sandwich_forward(x[..., :15], V, W)
    with pytest.raises(ValueError, match="shape \\(P, k, n\\)"):
        sandwich_forward(x, V[:1], W[:1])
    with pytest.raises(ValueError, match="both V and W"):
        sandwich_forward(x, V, W, V, None)
    with pytest.raises(TypeError, match="float32 or float64"):
        sandwich_forward(x.astype(np.int64), V, W)
    with pytest.raises(ValueError, match="multiple of"):
        sandwich_forward(x, V, W, tile=10)


def test_factor_coefficients_match_definition(rng):
    V = rng.standard_normal((4, 3, 7))
    W = rng.standard_normal((4, 3, 7))
    a, s = rotor_chain.factor_coefficients(V, W)
    vw = (V * W).sum(-1)
    theta = np.sqrt((V * V).sum(-1) * (W * W).sum(-1) - vw**2)
    np.testing.assert_allclose(s, np.sin(theta) / theta, rtol=1e-13)
    np.testing.assert_allclose(a, np.cos(theta) - s * vw, rtol=1e-12, atol=1e-14)
