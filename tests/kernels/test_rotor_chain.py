"""The numba rotor-chain kernels against independent dense and signed-permutation references.

Tolerances (norm-wise relative error ||a - b|| / ||b|| against a float64 reference evaluated on
the same inputs): float32 1e-5, float64 1e-10, for outputs and for every gradient.
"""
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from galinear.kernels import rotor_chain
from galinear.kernels.rotor_chain import sandwich_backward, sandwich_forward
from tests.kernels.oracle import dense_sandwich, permutation_sandwich

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    scale = np.linalg.norm(b)
    return np.linalg.norm(a - b) / (scale if scale > 0 else 1.0)


def make_case(rng, n, B, P, dtype, double):
    k = n // 2
    x = rng.standard_normal((B, P, 1 << n)).astype(dtype)
    # factor vectors of norm ~1: angles theta = |v ^ w| of order 1
    factors = [(rng.standard_normal((P, k, n)) / np.sqrt(n)).astype(dtype) for _ in range(4 if double else 2)]
    return x, factors


def reference(x, factors, grad_y, oracle):
    """Output and gradients (x, V, W per side) of the float64 oracle by autograd."""
    tensors = [torch.tensor(np.asarray(a, dtype=np.float64), requires_grad=True) for a in [x, *factors]]
    y = oracle(*tensors)
    grads = torch.autograd.grad(y, tensors, torch.tensor(grad_y, dtype=torch.float64), allow_unused=True)
    grads = [np.zeros(t.shape) if g is None else g.numpy() for g, t in zip(grads, tensors)]
    return y.detach().numpy(), grads


def check_against(oracle, x, factors, rng, dtype):
    y = sandwich_forward(x, *factors)
    assert y.dtype == dtype and y.shape == x.shape
    grad_y = rng.standard_normal(x.shape).astype(dtype)
    y_ref, grads_ref = reference(x, factors, grad_y, oracle)
    assert rel_err(y, y_ref) < TOL[dtype]
    grads = [g for g in sandwich_backward(y, grad_y, *factors) if g is not None]
    assert len(grads) == len(grads_ref)
    for name, g, g_ref in zip(["x", "VL", "WL", "VR", "WR"], grads, grads_ref):
        assert g.dtype == dtype and g.shape == g_ref.shape, name
        assert rel_err(g, g_ref) < TOL[dtype], (name, rel_err(g, g_ref))


def shapes_for(n):
    """(B, P) pairs: batch 1 and odd batches, several numbers of chunk pairs."""
    if n == 12:
        return [(3, 1)]
    if n == 11:
        return [(1, 2)]
    return [(1, 1 + n % 3), (7, 1 + (n + 1) % 3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n", range(1, 7))
def test_matches_dense_oracle(rng, n, double, dtype):
    for B, P in shapes_for(n):
        x, factors = make_case(rng, n, B, P, dtype, double)
        check_against(dense_sandwich, x, factors, rng, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n", range(7, 13))
def test_matches_permutation_oracle(rng, n, double, dtype):
    for B, P in shapes_for(n):
        x, factors = make_case(rng, n, B, P, dtype, double)
        check_against(permutation_sandwich, x, factors, rng, dtype)


@pytest.mark.parametrize("n", [2, 5, 6])
def test_the_two_oracles_agree(rng, n):
    x, factors = make_case(rng, n, 3, 2, np.float64, True)
    tensors = [torch.tensor(a) for a in [x, *factors]]
    assert rel_err(permutation_sandwich(*tensors), dense_sandwich(*tensors)) < 1e-12


@pytest.mark.nojit
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_small_cases_nojit(rng, n, double, dtype):
    x, factors = make_case(rng, n, 3, 2, dtype, double)
    check_against(dense_sandwich, x, factors, rng, dtype)


@given(n=st.integers(1, 7), seed=st.integers(0, 2**32 - 1), double=st.booleans(),
       scale=st.sampled_from([0.0, 1e-4, 1.0, 10.0]))
def test_orthogonality_property(n, seed, double, scale):
    """For any factors (angles from 0 to many turns): |y| = |x| per token and M^T y = x."""
    rng = np.random.default_rng(seed)
    x, factors = make_case(rng, n, 3, 2, np.float64, double)
    factors = [f * scale for f in factors]
    y = sandwich_forward(x, *factors)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert rel_err(sandwich_backward(y, y, *factors)[0], x) < 1e-12


def test_orthogonal_and_inverse(rng):
    """|y| = |x| per token, and the backward of grad_y = y gives back x (M^T M = 1)."""
    x, factors = make_case(rng, 8, 5, 2, np.float64, True)
    y = sandwich_forward(x, *factors)
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    gx = sandwich_backward(y, y, *factors)[0]
    assert rel_err(gx, x) < 1e-12


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_threads_and_tile_do_not_change_results(rng, dtype):
    import numba
    x, factors = make_case(rng, 9, 37, 3, dtype, True)  # 37 tokens: full and partial tiles
    grad_y = rng.standard_normal(x.shape).astype(dtype)
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            for tile in (16, 32):
                y = sandwich_forward(x, *factors, tile=tile)
                results.append((y, *sandwich_backward(y, grad_y, *factors, tile=tile)))
    finally:
        numba.set_num_threads(before)
    rtol = 1e-6 if dtype == np.float32 else 1e-13
    for other in results[1:]:
        for a, b in zip(results[0], other):
            assert rel_err(a, b) < rtol


def test_zero_angle_gradient_is_finite(rng):
    """theta = 0 (w parallel to v, or w = 0): the factor is 1 and gradients stay finite; they
    match the dense backend of galinear.nn.functional, whose sinc uses a series at 0."""
    from galinear.nn import functional
    n, P = 5, 2
    v = rng.standard_normal((P, 2, n))
    w = 0.5 * v.copy()
    w[1, 1] = 0.0
    x = rng.standard_normal((3, P, 1 << n))
    y = sandwich_forward(x, v, w)
    np.testing.assert_allclose(y, x, atol=1e-14)
    grad_y = rng.standard_normal(x.shape)
    grads = sandwich_backward(y, grad_y, v, w)
    tensors = [torch.tensor(a, requires_grad=True) for a in (x, v, w)]
    y_ref = functional.rotor_sandwich(tensors[0], (tensors[1], tensors[2]), backend="dense")
    grads_ref = torch.autograd.grad(y_ref, tensors, torch.tensor(grad_y))
    for g, g_ref in zip(grads[:3], grads_ref):
        assert np.all(np.isfinite(g))
        assert rel_err(g, g_ref.numpy()) < 1e-10


def test_bad_input_is_refused(rng):
    x, (V, W) = make_case(rng, 4, 2, 3, np.float64, False)
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
    with pytest.raises(ValueError, match="grad_y"):
        sandwich_backward(x, x[:1], V, W)


def test_factor_coefficients_match_definition(rng):
    V = rng.standard_normal((4, 3, 7))
    W = rng.standard_normal((4, 3, 7))
    a, s = rotor_chain.factor_coefficients(V, W)
    vw = (V * W).sum(-1)
    theta = np.sqrt((V * V).sum(-1) * (W * W).sum(-1) - vw**2)
    np.testing.assert_allclose(s, np.sin(theta) / theta, rtol=1e-13)
    np.testing.assert_allclose(a, np.cos(theta) - s * vw, rtol=1e-12, atol=1e-14)
