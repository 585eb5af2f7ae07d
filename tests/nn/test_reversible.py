"""The "reversible" sandwich backend: torch only, reversible backward (only y saved)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from galinear.nn import functional as F
from galinear.testing import assert_gradient_matches_fd, check_rotor_backend, reference_rotor_map

TOL = {torch.float32: 1e-5, torch.float64: 1e-12}


def _factors(n, P, rng, dtype, special=None):
    k = n // 2
    V = torch.tensor(rng.standard_normal((P, k, n)), dtype=dtype)
    W = torch.tensor(rng.standard_normal((P, k, n)), dtype=dtype)
    if special == "zero":  # w parallel to v: every b_j = v_j ^ w_j = 0
        W = 0.5 * V
    elif special == "equal_angles":  # orthonormal planes e_{2j} ^ e_{2j+1}, every angle 0.7
        V = torch.zeros(P, k, n, dtype=dtype)
        W = torch.zeros(P, k, n, dtype=dtype)
        for j in range(k):
            V[:, j, 2 * j] = 0.7
            W[:, j, 2 * j + 1] = 1.0
    return V, W


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 8])
@pytest.mark.parametrize("double", [False, True])
def test_values_match_dense(n, dtype, double):
    rng = np.random.default_rng(n)
    P, B = 3, 5
    left = _factors(n, P, rng, dtype)
    right = _factors(n, P, rng, dtype) if double else None
    x = torch.tensor(rng.standard_normal((B, P, 2**n)), dtype=dtype)
    dense = F.rotor_sandwich(x, left, right, backend="dense")
    ours = F.rotor_sandwich(x, left, right, backend="reversible")
    scale = float(x.abs().max())
    assert float((dense - ours).abs().max()) <= TOL[dtype] * scale


@pytest.mark.parametrize("special", [None, "zero", "equal_angles"])
@pytest.mark.parametrize("n", [3, 4])
@pytest.mark.parametrize("double", [False, True])
def test_gradients_match_central_differences(n, special, double):
    rng = np.random.default_rng(10 + n)
    P, B = 2, 3
    VL, WL = _factors(n, P, rng, torch.float64, special)
    VR, WR = _factors(n, P, rng, torch.float64) if double else (None, None)
    x = torch.tensor(rng.standard_normal((B, P, 2**n)))
    weights = torch.tensor(rng.standard_normal((B, P, 2**n)))
    args = {"x": x, "VL": VL, "WL": WL, "VR": VR, "WR": WR}

    def loss_of(which):
        def f(value):
            values = dict(args, **{which: value})
            right = None if values["VR"] is None else (values["VR"], values["WR"])
            y = F.rotor_sandwich(values["x"], (values["VL"], values["WL"]), right, backend="reversible")
            return (weights * y**2).sum()
        return f

    for which in ("x", "VL", "WL") + (("VR", "WR") if double else ()):
        assert_gradient_matches_fd(loss_of(which), args[which], rtol=1e-8)


def test_gradients_match_dense_autograd():
    rng = np.random.default_rng(3)
    n, P, B = 6, 4, 7
    tensors = [*(_factors(n, P, rng, torch.float64)), *(_factors(n, P, rng, torch.float64))]
    x = torch.tensor(rng.standard_normal((B, P, 2**n)))
    g = torch.tensor(rng.standard_normal((B, P, 2**n)))
    grads = {}
    for backend in ("dense", "reversible"):
        inputs = [t.clone().requires_grad_(True) for t in [x] + tensors]
        y = F.rotor_sandwich(inputs[0], (inputs[1], inputs[2]), (inputs[3], inputs[4]), backend=backend)
        grads[backend] = torch.autograd.grad((y * g).sum(), inputs)
    for a, b in zip(grads["dense"], grads["reversible"]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-11)


def test_grad_output_left_untouched_and_second_derivative_refused():
    rng = np.random.default_rng(4)
    V, W = _factors(4, 1, rng, torch.float64)
    x = torch.randn(1, 1, 16, dtype=torch.float64, requires_grad=True)
    y = F.rotor_sandwich(x, (V, W), backend="reversible")
    g = torch.randn(1, 1, 16, dtype=torch.float64)
    kept = g.clone()
    (grad,) = torch.autograd.grad(y, x, g)
    assert torch.equal(g, kept)
    # the map is orthogonal: the input gradient is the transposed map of g, of the same norm
    torch.testing.assert_close(grad.norm(), g.norm(), rtol=1e-12, atol=0)
    x2 = torch.randn(2, 1, 16, dtype=torch.float64, requires_grad=True)
    (first,) = torch.autograd.grad(F.rotor_sandwich(x2, (V, W), backend="reversible").pow(3).sum(), x2,
                                   create_graph=True)
    with pytest.raises(RuntimeError):
        torch.autograd.grad(first.sum(), x2)


def test_matches_the_expm_reference_through_the_exact_gradient_wrapper():
    rows = check_rotor_backend("reversible", dimensions=[2, 3, 4])
    assert {row["case"] for row in rows} >= {"zero", "equal_angles", "random"}
    assert max(row["value_error"] for row in rows if row["dtype"] == "float64") <= 1e-12


def test_registered_for_cpu_and_cuda():
    entry = F._REGISTRY["reversible"]
    assert entry.devices == ("cpu", "cuda")
    assert entry.supports(torch.device("cuda"), torch.float32)
    assert not entry.supports(torch.device("cpu"), torch.float16)
    rng = np.random.default_rng(5)
    B = torch.tensor(rng.standard_normal((2, 10)))  # n = 5
    dec = F.invariant_decomposition(B, method="exact")
    x = torch.tensor(rng.standard_normal((4, 2, 32)))
    # independent reference: scipy expm of the bivectors
    expected = reference_rotor_map(x, B)
    got = F.rotor_sandwich(x, (dec.V, dec.W), backend="reversible")
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-12)


def test_tiled_batches_match_one_tile(monkeypatch):
    """Tokens processed in several tiles give the same values and gradients as in one."""
    from galinear.nn.functional import reversible

    rng = np.random.default_rng(6)
    n, P, B = 5, 3, 37
    tensors = [*(_factors(n, P, rng, torch.float64)), *(_factors(n, P, rng, torch.float64))]
    x = torch.tensor(rng.standard_normal((B, P, 2**n)))
    g = torch.tensor(rng.standard_normal((B, P, 2**n)))
    results = []
    for elements in (reversible.TILE_ELEMENTS, 1):
        monkeypatch.setattr(reversible, "TILE_ELEMENTS", elements)
        assert len(reversible._tiles(B, P, 2**n)) == (1 if elements > 1 else 8)
        inputs = [t.clone().requires_grad_(True) for t in [x] + tensors]
        y = F.rotor_sandwich(inputs[0], (inputs[1], inputs[2]), (inputs[3], inputs[4]), backend="reversible")
        results.append((y, torch.autograd.grad((y * g).sum(), inputs)))
    torch.testing.assert_close(results[0][0], results[1][0], rtol=0, atol=1e-13)
    for a, b in zip(results[0][1], results[1][1]):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)
