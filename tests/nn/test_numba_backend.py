"""The "numba" sandwich backend (galinear.nn.numba_backend) against the registry's dense and factored
backends, gradients through rotor_sandwich against central differences of the numba map, the
backend choice of "auto".

Tolerances: norm-wise relative error, float32 1e-5 and float64 1e-10 (float32 results are
compared with the float64 dense backend on the same inputs).
"""
import pytest
import torch

from galinear.nn import functional
from galinear.nn.numba_backend import numba_sandwich
from galinear.nn.functional.backends import NUMBA_PRIORITY
from galinear.testing import assert_gradient_matches_fd, relative_error

TOL = {torch.float32: 1e-5, torch.float64: 1e-10}


def make_case(n, B, P, dtype, double, seed):
    gen = torch.Generator().manual_seed(seed)
    k = n // 2
    x = torch.randn(B, P, 2**n, generator=gen, dtype=torch.float64)
    factors = [torch.randn(P, k, n, generator=gen, dtype=torch.float64) / n**0.5 for _ in range(4 if double else 2)]
    return x.to(dtype), [f.to(dtype) for f in factors]


def run(backend, x, factors, grad_y):
    leaves = [t.detach().clone().requires_grad_(True) for t in [x, *factors]]
    left = (leaves[1], leaves[2])
    right = (leaves[3], leaves[4]) if len(leaves) == 5 else None
    y = functional.rotor_sandwich(leaves[0], left, right, backend=backend)
    grads = torch.autograd.grad(y, leaves, grad_y.to(y.dtype), allow_unused=True)
    return y, [torch.zeros_like(t) if g is None else g for g, t in zip(grads, leaves)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("n,B,P", [(1, 1, 2), (3, 5, 3), (6, 1, 1), (8, 3, 2), (10, 1, 2)])
def test_matches_dense_and_factored_backends(n, B, P, double, dtype):
    x, factors = make_case(n, B, P, dtype, double, seed=n + 13 * B)
    grad_y = torch.randn(x.shape, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    with torch.no_grad():
        y = functional.rotor_sandwich(x, tuple(factors[:2]), tuple(factors[2:]) or None, backend="numba")
    assert y.dtype == dtype and not y.requires_grad
    # with gradients, rotor_sandwich runs "factored" for "numba": the same values, and gradients
    y_grad, grads = run("numba", x, factors, grad_y)
    assert y_grad.dtype == dtype and all(g.dtype == dtype for g in grads)
    references = ["dense", "factored"] if n <= 8 else ["factored"]
    for backend in references:
        # float64 reference on the same (possibly float32) inputs
        y_ref, grads_ref = run(backend, x.double(), [f.double() for f in factors], grad_y)
        assert relative_error(y, y_ref) < TOL[dtype], backend
        assert relative_error(y_grad, y_ref) < TOL[dtype], backend
        for g, g_ref in zip(grads, grads_ref):
            assert relative_error(g, g_ref) < TOL[dtype], backend


@pytest.mark.parametrize("double", [False, True])
@pytest.mark.parametrize("point", ["random", "zero_angle"])
def test_gradients_match_central_differences_of_the_numba_map(point, double):
    """Autograd through rotor_sandwich(backend="numba") against fourth-order central differences
    of the numba kernels themselves (they run without autograd), float64."""
    x, factors = make_case(4, 3, 2, torch.float64, double, seed=3)
    if point == "zero_angle":
        factors[1] = factors[0] * 0.3  # theta = 0 for both left factors: R = 1
    probe = torch.randn(x.shape, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    inputs = [x, *factors]
    for i in range(len(inputs)):
        def loss(t, i=i):
            args = list(inputs)
            args[i] = t
            right = (args[3], args[4]) if double else None
            return (functional.rotor_sandwich(args[0], (args[1], args[2]), right, backend="numba") * probe).sum()
        assert_gradient_matches_fd(loss, inputs[i], rtol=1e-8)


def test_direct_calls_with_gradients_are_refused():
    x, factors = make_case(3, 2, 1, torch.float64, False, seed=2)
    leaves = [t.requires_grad_(True) for t in [x, *factors]]
    with pytest.raises(ValueError, match="values only.*rotor_sandwich"):
        numba_sandwich(*leaves)
    with torch.no_grad():
        y = numba_sandwich(*leaves)
    assert not y.requires_grad


def test_numba_runs_only_where_named():
    for dtype in (torch.float32, torch.float64):
        name, _ = functional.resolve_sandwich_backend("auto", "cpu", dtype)
        assert name == "spinor"
        assert functional.resolve_sandwich_backend("numba", "cpu", dtype)[0] == "numba"
    assert "numba" not in functional.available_sandwich_backends("cpu", torch.bfloat16)
    assert NUMBA_PRIORITY < functional.sandwich_backend_entry("factored").priority


def test_leading_axes_and_errors():
    x, factors = make_case(3, 6, 2, torch.float64, False, seed=1)
    y = numba_sandwich(x.reshape(2, 3, 2, 8), *factors)
    assert torch.allclose(y.reshape(6, 2, 8), numba_sandwich(x, *factors))
    with pytest.raises(TypeError, match="float32 and float64"):
        numba_sandwich(x.to(torch.bfloat16), *factors)
    with pytest.raises(ValueError, match="shape"):
        numba_sandwich(x[0, 0], *factors)


def test_torch_compile_with_default_backend():
    """torch.compile of a RotorLinear on the default backend ("auto": the plan's choice)."""
    from galinear.nn import RotorLinear

    torch.manual_seed(0)
    layer = RotorLinear(16, 12, chunk_size=8).eval()
    x = torch.randn(3, 16)
    eager = layer(x)
    compiled = torch.compile(layer, backend="aot_eager")
    torch.testing.assert_close(compiled(x), eager, atol=1e-6, rtol=0)
    compiled(x).pow(2).sum().backward()
    assert layer.left_bivectors.grad is not None and torch.isfinite(layer.left_bivectors.grad).all()
