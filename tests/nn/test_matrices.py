"""Small chunks as matrices (parity blocks, one GEMM), eval-mode caching (what `auto` runs: test_plan.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from galinear.nn import RotorLinear
from galinear.nn import functional as F
from galinear.nn.dexp import exact_sandwich_matrices
from galinear.testing import assert_gradient_matches_fd, reference_rotor_map


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("double", [False, True])
def test_matrices_match_expm_reference(n, double):
    rng = np.random.default_rng(n)
    m = n * (n - 1) // 2
    B = torch.tensor(rng.standard_normal((3, m)))
    C = torch.tensor(rng.standard_normal((3, m))) if double else None
    left = F.invariant_decomposition(B, method="exact")
    right = F.invariant_decomposition(C, method="exact") if double else None
    M = exact_sandwich_matrices(B, C, (left.V, left.W), None if right is None else (right.V, right.W))
    eye = torch.eye(2**n, dtype=torch.float64)[:, None, :].expand(2**n, 3, 2**n)
    columns = reference_rotor_map(eye, B, C)  # columns[t, p] = M_p e_t
    np.testing.assert_allclose(M.numpy(), np.transpose(columns, (1, 2, 0)), atol=1e-12)
    np.testing.assert_allclose(
        M.float().numpy(), F.sandwich_matrix((left.V.float(), left.W.float()),
                                             None if right is None else (right.V.float(), right.W.float())).numpy(),
        atol=1e-5)


@pytest.mark.parametrize("case", ["random", "zero", "equal_angles"])
@pytest.mark.parametrize("double", [False, True])
def test_matrix_gradient_matches_central_differences(case, double):
    rng = np.random.default_rng(1)
    n = 4
    if case == "random":
        B = torch.tensor(rng.standard_normal((2, 6)))
    elif case == "zero":
        B = torch.zeros(2, 6, dtype=torch.float64)
    else:  # e01 and e23 both turned by 0.7: equal angles
        B = torch.zeros(2, 6, dtype=torch.float64)
        B[:, 0] = B[:, 5] = 0.7
    C = torch.tensor(rng.standard_normal((2, 6))) * 0.5
    weights = torch.tensor(rng.standard_normal((2, 16, 16)))

    def loss(which):
        def f(value):
            b, c = (value, C) if which == "B" else (B, value)
            with torch.no_grad():
                left = F.invariant_decomposition(b.detach(), method="exact")
                right = F.invariant_decomposition(c.detach(), method="exact")
            M = exact_sandwich_matrices(b, c if double else None, (left.V, left.W),
                                        (right.V, right.W) if double else None)
            return (weights * M**2).sum()
        return f

    for which in ("B", "C") if double else ("B",):
        assert_gradient_matches_fd(loss(which), B if which == "B" else C, rtol=1e-7)


@pytest.mark.parametrize("shape", [(40, 24, 8), (64, 64, 16), (784, 1024, 128)])
def test_dense_layer_path_matches_factored(shape):
    d_in, d_out, chunk = shape
    torch.manual_seed(0)
    layer = RotorLinear(d_in, d_out, chunk_size=chunk, bias=True, dtype=torch.float64, backend="dense")
    with torch.no_grad():
        layer.bias.normal_()
        layer.alpha.normal_()
    x = torch.randn(5, d_in, dtype=torch.float64)
    results = []
    for backend in ("dense", "factored"):
        layer.backend = backend
        y = layer(x)
        results.append((y, torch.autograd.grad((y**2).sum(), list(layer.parameters()))))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=0, atol=1e-12)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-10)


def test_dense_layer_gradient_matches_central_differences():
    torch.manual_seed(1)
    layer = RotorLinear(24, 20, chunk_size=8, dtype=torch.float64, backend="dense").eval()
    x = torch.randn(3, 24, dtype=torch.float64)
    point = layer.left_bivectors.detach().clone()

    def f(value):
        return (torch.func.functional_call(layer, {"left_bivectors": value}, (x,)) ** 2).sum()

    assert_gradient_matches_fd(f, point, rtol=1e-7)


def test_one_coefficient_chunks_are_alpha_weighted_sums():
    """chunk_size=1 (Cl(0)): every chunk map is the identity, so the layer is alpha in each
    (output, input) coordinate pair, in training and in inference, with bias."""
    torch.manual_seed(3)
    layer = RotorLinear(3, 2, chunk_size=1, bias=True, dtype=torch.float64, backend="dense")
    x = torch.randn(4, 3, dtype=torch.float64)
    weight = layer.alpha.detach().view(2, 3) * layer.output_scale.detach()[:, None]
    want = x @ weight.t() + layer.bias.detach()
    torch.testing.assert_close(layer(x), want, rtol=0, atol=1e-14)
    with torch.no_grad():
        torch.testing.assert_close(layer.eval()(x), want, rtol=0, atol=1e-14)
    torch.testing.assert_close(layer.dense_weight(), weight, rtol=0, atol=1e-14)


def test_eval_cache_reused_until_a_parameter_changes():
    torch.manual_seed(2)
    layer = RotorLinear(32, 32, chunk_size=8, backend="dense", dtype=torch.float64).eval()
    x = torch.randn(1, 32, dtype=torch.float64)
    with torch.no_grad():
        first = layer(x)
        cached = layer._weight_cache[1]
        layer(x)
        assert layer._weight_cache[1] is cached
        layer.left_bivectors.add_(0.1)  # an in-place update (an optimiser step) invalidates it
        second = layer(x)
    assert layer._weight_cache[1] is not cached
    fresh = RotorLinear(32, 32, chunk_size=8, backend="factored", dtype=torch.float64).eval()
    fresh.load_state_dict(layer.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(second, fresh(x), rtol=0, atol=1e-12)
    assert not torch.allclose(first, second)
    layer.train()
    assert layer(x).requires_grad  # training builds the matrices afresh, with their gradient
