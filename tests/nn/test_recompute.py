"""Activations recomputed in the backward pass instead of kept (galinear.nn.functional.recompute),
and a RotorNetwork's stage inputs under it: the same gradients as when autograd keeps them, and
the inputs not alive between the forward and the backward pass."""
import contextlib
import gc
import weakref

import pytest
import torch

from galinear.nn import network_stages as network_module
from galinear.nn.functional.recompute import recomputed
from galinear.testing import rotor_network

TOLERANCE = {torch.float64: 0.0, torch.float32: 0.0}  # the same operations on the same values


def _kept_as_usual():
    """Saved-tensor hooks that keep every tensor: under them ``recomputed`` stands aside (as under
    torch.utils.checkpoint), which gives the reference with every stage input kept."""
    return torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t)


def _toy(a, w, calls):
    h = a * 3.0                        # a product by a number keeps nothing
    probe = weakref.ref(h)

    def again():
        calls.append(1)
        return a * 3.0

    with recomputed(h, again, (a,)):
        y = h.t() @ w                  # matmul keeps h (through the transposed view) for w's gradient
    return y, probe


def test_a_dropped_input_is_rebuilt_in_the_backward_pass():
    a = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    calls = []
    y, probe = _toy(a, w, calls)
    gc.collect()
    assert probe() is None and not calls               # not kept, not yet recomputed
    y.square().sum().backward()
    assert calls == [1]
    got = (a.grad.clone(), w.grad.clone())
    a.grad = w.grad = None
    with _kept_as_usual():
        y, probe = _toy(a, w, calls)
    gc.collect()
    assert probe() is not None and calls == [1]        # kept, never recomputed
    y.square().sum().backward()
    assert torch.equal(got[0], a.grad) and torch.equal(got[1], w.grad)


def test_a_graph_of_the_backward_pass_reaches_through_the_rebuilt_input():
    """create_graph: the rebuilt input carries its history, so second derivatives are those of the
    kept input."""
    a = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)

    def second(kept):
        with _kept_as_usual() if kept else contextlib.nullcontext():
            y, _ = _toy(a, w, [])
        grad_a, grad_w = torch.autograd.grad(y.pow(3).sum(), (a, w), create_graph=True)
        return torch.autograd.grad(grad_a.square().sum() + grad_w.square().sum(), (a, w))

    for got, want in zip(second(False), second(True)):
        assert torch.equal(got, want)


def test_an_in_place_change_of_what_it_is_rebuilt_from_raises():
    a = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    source = a.detach().clone()
    w = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    h = source * 2
    with recomputed(h, lambda: source * 2, (source,)):
        y = h.t() @ w
    source.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation.*run the forward pass again"):
        y.sum().backward()


def test_without_grad_mode_nothing_is_installed():
    h = torch.randn(3, 3)
    with torch.no_grad(), recomputed(h, lambda: pytest.fail("never called")):
        assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None


def _gradients(net, x):
    net.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    y = net(x)
    (y * torch.linspace(-1, 1, y.numel(), dtype=y.dtype).view_as(y)).sum().backward()
    return [y.detach(), x.grad] + [p.grad for p in net.parameters()]


# one chunk per gadget (every later stage reads its input in the blocks' order); wrapping input
# chunks and several output chunks (gathered inputs); chunks of n = 8
SHAPES = [(16, 8, None, None), (40, 24, 48, 16), (256, 64, None, None)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_network_gradients_equal_those_with_every_stage_input_kept(dtype, shape):
    net = rotor_network(shape, dtype, "dense")
    x = torch.randn(64, shape[0], dtype=dtype)
    recomputing = _gradients(net, x)
    with _kept_as_usual():
        kept = _gradients(net, x)
    for got, want in zip(recomputing, kept):
        assert (got - want).abs().max() <= TOLERANCE[dtype] * want.abs().max()


def test_network_stage_inputs_are_not_alive_between_the_passes(monkeypatch):
    """Every stage's output (the next stage's input) and the gathered copy of the network's input
    are freed after the forward pass; the backward pass recomputes each of them once."""
    net = rotor_network((16, 8, None, None), torch.float64, "dense")
    outputs, calls = [], []
    original = network_module.branch_sum

    def tracked(*args):
        out = original(*args)
        (calls if not torch.is_grad_enabled() else outputs).append(weakref.ref(out))
        return out

    monkeypatch.setattr(network_module, "branch_sum", tracked)
    x = torch.randn(32, 16, dtype=torch.float64, requires_grad=True)
    y = net(x)
    gc.collect()
    assert len(outputs) == 1 + net.hidden_layers
    assert all(probe() is None for probe in outputs)
    y.sum().backward()
    assert len(calls) == 1 + net.hidden_layers             # each recomputed once, under no_grad
