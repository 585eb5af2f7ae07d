"""Rotor layers under the torch habits users rely on: torch.func (vmap, jacrev, grad over
parameters), torch.jit.trace, torch.export, autocast and torch.compile, all through the one
exact-gradient Function (galinear.nn.dexp.RotorMap); and one eigen-decomposition per rotor per
training step.

References: the layers' own eager forward and autograd, and central differences of the forward
in float64 (galinear.testing.central_difference_jacobian style, written out here for the
functional form).
"""
from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, grad, jacrev, vmap

from galinear.nn import RotorLinear, RotorNetwork
from galinear.nn import dexp
from galinear.nn import functional as F


def _layers(dtype=torch.float64):
    torch.manual_seed(0)
    return [RotorLinear(16, 8, bias=True, dtype=dtype), RotorLinear(16, 16, double_rotor=False, dtype=dtype),
            RotorNetwork(16, 16, hidden=16, dtype=dtype)]


def _central_jacobian(f, x, h=1e-6):
    """d f / d x by central differences, (out..., in...)."""
    flat = x.detach().reshape(-1)
    columns = []
    for i in range(flat.numel()):
        step = torch.zeros_like(flat)
        step[i] = h
        columns.append((f((flat + step).reshape(x.shape)) - f((flat - step).reshape(x.shape))) / (2 * h))
    return torch.stack(columns, -1).reshape(*columns[0].shape, *x.shape)


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize("train", [True, False])
def test_vmap_over_inputs_equals_the_batched_call(index, train):
    layer = _layers()[index].train(train)
    x = torch.randn(5, 3, 16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(vmap(layer)(x), layer(x), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(vmap(layer)(x), layer(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("index", range(3))
def test_jacrev_in_the_input_equals_central_differences(index):
    layer = _layers()[index].eval()
    x = torch.randn(16, dtype=torch.float64)
    jac = jacrev(layer)(x)
    with torch.no_grad():
        reference = _central_jacobian(layer, x)
    torch.testing.assert_close(jac, reference, rtol=1e-7, atol=1e-8)
    if isinstance(layer, RotorLinear):  # a linear map: its Jacobian is its matrix
        torch.testing.assert_close(jac, layer.dense_weight(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("index", range(3))
def test_jacrev_and_grad_in_the_parameters_equal_central_differences_and_autograd(index):
    layer = _layers()[index].eval()
    params = {k: v.detach() for k, v in layer.named_parameters()}
    x = torch.randn(4, 16, dtype=torch.float64)
    name = "left_bivectors" if "left_bivectors" in params else "input_gadget.left_bivectors"

    def out(p):
        return functional_call(layer, {**params, name: p}, (x,))

    jac = jacrev(out)(params[name])
    with torch.no_grad():
        reference = _central_jacobian(out, params[name])
    torch.testing.assert_close(jac, reference, rtol=1e-6, atol=1e-8)

    def loss(ps):
        return functional_call(layer, ps, (x,)).square().sum()

    grads = grad(loss)(params)
    layer.zero_grad()
    layer(x).square().sum().backward()
    for key, value in layer.named_parameters():
        torch.testing.assert_close(grads[key], value.grad, rtol=1e-10, atol=1e-12)


def test_jacrev_at_special_bivectors():
    """zero and equal angles: the exponential is smooth there and so is the Jacobian."""
    layer = RotorLinear(16, 16, double_rotor=False, alpha=False, dtype=torch.float64).eval()
    x = torch.randn(2, 16, dtype=torch.float64)
    for special in ("zero", "equal"):
        B = torch.zeros_like(layer.left_bivectors)
        if special == "equal":  # e12 + e34: isoclinic in Cl(4)
            B[:, 0] = 0.7
            B[:, 5] = 0.7

        def out(b):
            return functional_call(layer, {"left_bivectors": b}, (x,))

        jac = jacrev(out)(B)
        with torch.no_grad():
            reference = _central_jacobian(out, B)
        torch.testing.assert_close(jac, reference, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("index", range(3))
def test_jit_trace_captures_the_inference_map(index):
    layer = _layers(torch.float32)[index].eval()
    x, other = torch.randn(4, 16), torch.randn(4, 16)
    with torch.no_grad():
        traced = torch.jit.trace(layer, (x,))
        torch.testing.assert_close(traced(other), layer(other), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index", range(3))
def test_torch_export_captures_the_map_from_the_parameters(index):
    layer = _layers(torch.float32)[index].eval()
    x, other = torch.randn(4, 16), torch.randn(4, 16)
    program = torch.export.export(layer, (x,))
    with torch.no_grad():
        torch.testing.assert_close(program.module()(other), layer(other), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_autocast_computes_the_token_products_in_the_autocast_dtype(index, low):
    layer = _layers(torch.float32)[index]
    x = torch.randn(6, 16)
    reference = layer(x).detach()
    tolerance = 0.05 if low == torch.bfloat16 else 0.01
    for train in (True, False):
        layer.train(train)
        with torch.autocast("cpu", dtype=low):
            y = layer(x)
        assert y.dtype == low  # as nn.Linear under autocast
        torch.testing.assert_close(y.float(), reference, rtol=tolerance, atol=tolerance)
        if train:
            layer.zero_grad()
            y.float().sum().backward()
            assert all(p.grad is None or p.grad.dtype == torch.float32 for p in layer.parameters())
    with torch.no_grad(), torch.autocast("cpu", dtype=low):
        assert layer.eval()(x).dtype == low


def test_one_eigendecomposition_per_rotor_set_per_training_step(monkeypatch):
    """A double-rotor layer: one batched eigh for the left bivectors and one for the right ones,
    shared by the planes and the gradient (before: k + 1 each)."""
    calls = []
    original = torch.linalg.eigh

    def counting(a, *args, **kwargs):
        calls.append(tuple(a.shape))
        return original(a, *args, **kwargs)

    monkeypatch.setattr(torch.linalg, "eigh", counting)
    for backend in ("dense", "factored", "auto"):
        layer = RotorLinear(64, 64, backend=backend)  # Cl(6), P = 1
        x = torch.randn(8, 64)
        calls.clear()
        layer(x).square().sum().backward()
        assert calls == [(1, 6, 6), (1, 6, 6)], (backend, calls)


def test_the_gradient_reuses_the_spectrum_of_the_decomposition():
    torch.manual_seed(1)
    B = torch.randn(3, 28, dtype=torch.float64, requires_grad=True)  # Cl(8)
    V, W, spec = F.exact_factors(B)
    H = torch.randn(3, 28, dtype=torch.float64)
    torch.testing.assert_close(dexp.phi_ad(B, H, spec), dexp.phi_ad(B, H), rtol=1e-12, atol=1e-13)
    x = torch.randn(5, 3, 256, dtype=torch.float64)
    weights = torch.randn(5, 3, 256, dtype=torch.float64)
    g1, = torch.autograd.grad((dexp.exact_rotor_sandwich(x, B, None, (V, W), spectra=(spec, None)) * weights).sum(), B)
    g2, = torch.autograd.grad((dexp.exact_rotor_sandwich(x, B, None, (V, W)) * weights).sum(), B)
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("make", [
    pytest.param(lambda: RotorLinear(32, 32, dtype=torch.float64), id="RotorLinear"),
    # the same graph machinery on 3 gadgets (25 s of compiling): in `make test-slow`
    pytest.param(lambda: RotorNetwork(32, 32, hidden=32, dtype=torch.float64), id="RotorNetwork", marks=pytest.mark.slow),
])
def test_compile_makes_one_graph_without_breaks_or_recompiles(make):
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    torch.manual_seed(0)
    layer = make()
    eager = make()
    eager.load_state_dict(layer.state_dict())
    # the constant tables are built once per process, eagerly (cached_table): the first build inside a
    # compiled region is a graph break by design, so build them first, as any earlier call would
    eager(torch.randn(2, 32, dtype=torch.float64)).sum().backward()
    eager.zero_grad()
    compiled = torch.compile(layer, backend="aot_eager")
    optimizer = torch.optim.SGD(layer.parameters(), lr=1e-2)
    reference = torch.optim.SGD(eager.parameters(), lr=1e-2)
    for _ in range(3):
        x = torch.randn(8, 32, dtype=torch.float64)
        for model, opt in ((compiled, optimizer), (eager, reference)):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
    torch.testing.assert_close(dict(layer.named_parameters()), dict(eager.named_parameters()), rtol=1e-10, atol=1e-12)
    assert sum(counters["graph_break"].values()) == 0, list(counters["graph_break"])
    assert sum(counters["recompiles"].values()) == 0, dict(counters["recompiles"])
    assert counters["stats"]["unique_graphs"] == 1
