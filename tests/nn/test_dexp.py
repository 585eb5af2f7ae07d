"""The exact gradient of the rotor exponential (galinear.nn.dexp), checked against central
differences of the forward it belongs to and against scipy's expm, on every backend."""
import numpy as np
import pytest
import torch

from galinear.nn import RotorLinear, RotorNetwork, dexp
from galinear.nn import functional as F
from galinear.testing import (
    assert_gradient_matches_fd,
    check_rotor_backend,
    reference_rotor_map,
    rotor_cases,
)

BACKENDS = ("dense", "factored", "numba", "spinor")


def _dimension_params():
    # every backend for n = 2..8; the default run keeps n <= 5 everywhere, n = 6 for numba and
    # spinor and n = 8 for spinor (the CPU's "auto" backend there, a real representation); the
    # rest is `make test-slow` (each n >= 6 takes 7-30 s cold)
    params = []
    for backend in BACKENDS:
        for n in range(2, 9):
            fast = n <= 5 or (backend in ("numba", "spinor") and n == 6) or (backend, n) == ("spinor", 8)
            marks = [] if fast else [pytest.mark.slow]
            params.append(pytest.param(backend, n, marks=marks, id=f"{backend}-n{n}"))
    return params


@pytest.mark.parametrize("backend,n", _dimension_params())
def test_backend_conformance(backend, n):
    # values vs scipy.linalg.expm (float64 1e-12, float32 1e-5) and gradients in B, C and x vs
    # fourth-order central differences (float64, 1e-7) at random, zero, tiny, large, equal,
    # nearly equal and nearly simple bivectors
    rows = check_rotor_backend(backend, dimensions=[n])
    assert {row["case"] for row in rows} >= {"random", "zero", "tiny", "large"}
    assert max(row["gradient_error"] for row in rows if "gradient_error" in row) <= 1e-7


def test_a_registered_backend_is_checked_by_one_call():
    calls = []

    def mine(x, VL, WL, VR, WR):
        calls.append(x.shape)
        return F.resolve_sandwich_backend("factored", x.device, x.dtype)[1](x, VL, WL, VR, WR)

    F.register_sandwich_backend("conformance-test", mine, devices=("cpu",))
    try:
        rows = check_rotor_backend("conformance-test", dimensions=[3, 4])
    finally:
        F.unregister_sandwich_backend("conformance-test")
    assert calls and len(rows) == 2 * (5 + 8)  # 5 cases for n=3, 8 for n=4, two dtypes each


def test_a_wrong_backend_fails_the_check():
    def broken(x, VL, WL, VR, WR):  # forgets the right rotor
        return F.resolve_sandwich_backend("factored", x.device, x.dtype)[1](x, VL, WL, None, None)

    F.register_sandwich_backend("broken-test", broken, devices=("cpu",))
    try:
        with pytest.raises(AssertionError, match="broken-test"):
            check_rotor_backend("broken-test", dimensions=[3], gradients=False)
    finally:
        F.unregister_sandwich_backend("broken-test")


def _series_phi(B, H, terms=30):
    """phi(ad_B) H = sum_k (-ad_B)^k H / (k+1)! with ad_B from the Clifford commutator."""
    from galinear import Algebra

    n = int(round((1 + np.sqrt(1 + 8 * B.shape[-1])) / 2))
    alg = Algebra(n)
    b, h = alg.bivector(B), alg.bivector(H)
    total, term = np.zeros_like(h), h.copy()
    factorial = 1.0
    for k in range(terms):
        factorial *= k + 1
        total = total + term / factorial
        term = -(alg.gp(b, term) - alg.gp(term, b))
    return total[..., 1 + n : 1 + n + B.shape[-1]]


@pytest.mark.parametrize("n", [3, 4, 5, 6])
def test_phi_ad_equals_its_power_series(n, rng):
    m = n * (n - 1) // 2
    B = 0.4 * rng.standard_normal((3, m))
    H = rng.standard_normal((3, m))
    got = dexp.phi_ad(torch.tensor(B), torch.tensor(H)).numpy()
    np.testing.assert_allclose(got, _series_phi(B, H), atol=1e-13, rtol=0)


def test_phi_ad_is_the_identity_at_zero_and_finite_at_equal_angles(rng):
    H = torch.tensor(rng.standard_normal((2, 10)))
    torch.testing.assert_close(dexp.phi_ad(torch.zeros(2, 10, dtype=torch.float64), H), H, atol=1e-15, rtol=0)
    B = torch.tensor(rotor_cases(5, pairs=2)["equal_angles"])
    assert torch.isfinite(dexp.phi_ad(B, H)).all()


@pytest.mark.parametrize("n", [2, 4, 6])
def test_rotor_exp_gradient_matches_central_differences(n, rng):
    m = n * (n - 1) // 2
    weights = torch.tensor(rng.standard_normal((2, 2**n)))
    for name, B in rotor_cases(n, pairs=2).items():
        def f(b):
            return (weights * dexp.rotor_exp(b) ** 3).sum()

        assert_gradient_matches_fd(f, torch.tensor(B))
    assert m == B.shape[-1]


def _layer_loss(layer, x, weights):
    return lambda b: (weights * torch.func.functional_call(layer, {"left_bivectors": b}, (x,)) ** 2).sum()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["eval", "train"])
@pytest.mark.parametrize("point", ["random", "zero", "equal_angles"])
def test_rotor_linear_gradient_matches_central_differences(backend, mode, point, rng):
    torch.manual_seed(0)
    layer = RotorLinear(24, 20, chunk_size=16, backend=backend, bias=True, dtype=torch.float64)
    layer.train(mode == "train")
    if point != "random":
        with torch.no_grad():
            layer.left_bivectors.copy_(torch.tensor(rotor_cases(4, pairs=layer.pairs)[point]))
    x = torch.tensor(rng.standard_normal((5, 24)))
    weights = torch.tensor(rng.standard_normal((5, 20)))
    assert_gradient_matches_fd(_layer_loss(layer, x, weights), layer.left_bivectors.detach())


def test_power_decomposition_falls_back_when_it_does_not_converge(rng):
    # nearly equal angles: the power iteration stops at max_iter; the forward is still exp(B)
    B = torch.tensor(rotor_cases(6, pairs=3)["nearly_equal"])
    dec = F.invariant_decomposition(B, method="power", max_iter=5)
    x = torch.tensor(rng.standard_normal((4, 3, 64)))
    y = F.rotor_sandwich(x, (dec.V, dec.W), backend="factored")
    np.testing.assert_allclose(y.numpy(), reference_rotor_map(x, B), atol=1e-12, rtol=0)


def test_power_decomposition_with_exact_gradient_matches_central_differences(rng):
    layer = RotorLinear(16, 16, chunk_size=16, decomposition="power", dtype=torch.float64).eval()
    x = torch.tensor(rng.standard_normal((4, 16)))
    weights = torch.tensor(rng.standard_normal((4, 16)))
    # the power iteration converges to tol 1e-10: the forward is exp(B) to about that
    assert_gradient_matches_fd(_layer_loss(layer, x, weights), layer.left_bivectors.detach(), rtol=1e-6)


def test_rotor_network_gradient_matches_central_differences(rng):
    torch.manual_seed(0)
    net = RotorNetwork(16, 8, hidden=16, hidden_layers=1, breadth=2, dtype=torch.float64).eval()
    x = torch.tensor(rng.standard_normal((3, 16)))
    weights = torch.tensor(rng.standard_normal((3, 8)))
    name = "hidden_gadgets.0.1.right_bivectors"
    params = dict(net.named_parameters())

    def f(b):
        return (weights * torch.func.functional_call(net, {name: b}, (x,)) ** 2).sum()

    assert_gradient_matches_fd(f, params[name].detach())


def test_pair_matrices_are_orthogonal_and_differentiable(rng):
    layer = RotorLinear(8, 8, chunk_size=8, dtype=torch.float64)
    M = layer.pair_matrices()
    torch.testing.assert_close(M @ M.transpose(-1, -2), torch.eye(8, dtype=torch.float64).expand_as(M), atol=1e-12, rtol=0)
    M.pow(3).sum().backward()
    assert torch.isfinite(layer.left_bivectors.grad).all() and layer.left_bivectors.grad.abs().sum() > 0


def test_float32_gradient_agrees_with_float64(rng):
    torch.manual_seed(0)
    layer64 = RotorLinear(32, 32, chunk_size=16, dtype=torch.float64)
    layer32 = RotorLinear(32, 32, chunk_size=16, dtype=torch.float32)
    layer32.load_state_dict({k: v.float() for k, v in layer64.state_dict().items()})
    x = rng.standard_normal((8, 32))
    for layer, dtype in ((layer64, torch.float64), (layer32, torch.float32)):
        layer(torch.tensor(x, dtype=dtype)).pow(2).sum().backward()
    g64, g32 = layer64.left_bivectors.grad, layer32.left_bivectors.grad.double()
    assert float((g32 - g64).norm() / g64.norm()) < 1e-5


def test_exp_simple_refuses_a_non_simple_bivector():
    with pytest.raises(ValueError, match="simple bivectors.*rotor_exp"):
        F.exp_simple(torch.tensor([1.0, 0, 0, 0, 0, 1.0]))
    # the true exponential of e12 + e34: 0.292 + 0.455 e12 + 0.455 e34 + 0.708 e1234
    R = dexp.rotor_exp(torch.tensor([1.0, 0, 0, 0, 0, 1.0], dtype=torch.float64))
    c, s = np.cos(1.0), np.sin(1.0)
    expected = np.zeros(16)
    expected[[0, 5, 10, 15]] = [c * c, s * c, s * c, s * s]
    np.testing.assert_allclose(R.numpy(), expected, atol=1e-15)
    # a wedge of two vectors passes (rounding of b ^ b stays below the bound)
    v, w = torch.randn(50, 7, dtype=torch.float64), torch.randn(50, 7, dtype=torch.float64)
    assert F.exp_simple(F.wedge(v, w)).shape == (50, 128)


def test_exact_sandwich_backward_runs_with_the_threads_it_was_given(monkeypatch):
    """The transposed map of the backward pass runs with the ``threads`` given to the forward call
    (None: the caller's count); the bivector parts run with the caller's count."""
    parts, maps = [], []
    real = dexp.bivector_parts

    def recording(*args, **kwargs):
        parts.append(torch.get_num_threads())
        return real(*args, **kwargs)

    def spy(x, VL, WL, VR, WR):
        maps.append(torch.get_num_threads())
        return F.resolve_sandwich_backend("factored", x.device, x.dtype)[1](x, VL, WL, VR, WR)

    monkeypatch.setattr(dexp, "bivector_parts", recording)
    F.register_sandwich_backend("threads-spy", spy, devices=("cpu",), dtypes=(torch.float64,), priority=-1,
                                differentiable=True)
    torch.manual_seed(0)
    B = (0.3 * torch.randn(2, 6, dtype=torch.float64)).requires_grad_()
    V, W, spec = F.exact_factors(B.detach(), 4)
    x = torch.randn(5, 2, 16, dtype=torch.float64, requires_grad=True)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for threads, expected in ((1, 1), (None, 2)):
            y = dexp.exact_rotor_sandwich(x, B, None, (V, W), backend="threads-spy", threads=threads)
            maps.clear()
            y.sum().backward()
            assert maps == [expected] and parts.pop() == 2 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
        F.unregister_sandwich_backend("threads-spy")
    with pytest.raises(ValueError, match="positive integer"):  # at the call, not later in backward
        dexp.exact_rotor_sandwich(x, B, None, (V, W), threads=0)
