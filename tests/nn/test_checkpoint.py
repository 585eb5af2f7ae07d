"""Rotor layers under torch.utils.checkpoint (non-reentrant) from their very first call.

A recomputed forward pass must save the same tensors as the original one; a layer's first call
also runs its parameter checks and builds its tables, which must not save any. The gradients
through the checkpoint equal those of a plain call, bit for bit (float64) and to 1e-6 (float32).
"""
import pytest
import torch
import torch.utils.checkpoint

from galinear.nn import GivensLinear, GivensNetwork, RotorLinear, RotorNetwork

MODULES = {
    "RotorLinear": lambda: RotorLinear(16, 8),
    "RotorNetwork": lambda: RotorNetwork(16, 16, hidden_layers=1, breadth=2),
    "RotorNetwork 32 -> 16, chunk 8": lambda: RotorNetwork(32, 16, hidden=16, chunk_size=8),
    "GivensLinear": lambda: GivensLinear(16, 16),
    "GivensNetwork": lambda: GivensNetwork(16, 16, hidden_layers=1, breadth=2),
}


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 0.0), (torch.float32, 1e-6)])
@pytest.mark.parametrize("name", list(MODULES))
def test_first_call_under_checkpoint_gives_the_plain_gradients(name, dtype, tol):
    torch.manual_seed(0)
    plain = MODULES[name]().to(dtype)
    again = MODULES[name]().to(dtype)
    again.load_state_dict(plain.state_dict())
    x = torch.randn(6, plain.in_features, dtype=dtype)
    grads = []
    for module, run in ((plain, lambda m, t: m(t)),
                        (again, lambda m, t: torch.utils.checkpoint.checkpoint(m, t, use_reentrant=False))):
        t = x.clone().requires_grad_()
        out = run(module, t)
        (out * torch.linspace(-1, 1, out.numel(), dtype=dtype).view_as(out)).sum().backward()
        grads.append([t.grad] + [p.grad for p in module.parameters()])
    for a, b in zip(*grads):
        assert b is not None
        torch.testing.assert_close(b, a, rtol=tol, atol=tol)
