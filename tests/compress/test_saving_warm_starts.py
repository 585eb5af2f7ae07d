"""Saved rotor networks written when exact-decomposition layers still held the power method's
warm-start vectors load into today's layers (the vectors are dropped after their recorded SHA-256
is checked); a changed vector is still refused."""
import pytest
import torch

from galinear.compress.storage.folder_format import checked_module, describe_tensors
from galinear.nn import RotorNetwork


def _pair():
    torch.manual_seed(0)
    power = RotorNetwork(16, 8, hidden=16, decomposition="power")
    torch.manual_seed(1)
    exact = RotorNetwork(16, 8, hidden=16)  # decomposition="exact": no warm starts
    return power, exact


def _old_state(power, exact):
    """An exact network's tensors plus the warm starts an earlier version saved beside them."""
    state = dict(exact.state_dict())
    warm = {k: v for k, v in power.state_dict().items() if k.endswith("_warm_start")}
    assert warm and not any(k.endswith("_warm_start") for k in state)
    state.update(warm)
    return state


def test_an_old_state_with_warm_starts_loads_into_an_exact_network():
    power, exact = _pair()
    state = _old_state(power, exact)
    target = RotorNetwork(16, 8, hidden=16)
    loaded = checked_module("old folder", target, state, describe_tensors(state))
    x = torch.randn(5, 16)
    exact.eval()
    with torch.no_grad():
        assert torch.equal(loaded(x), exact(x))


def test_a_changed_warm_start_is_still_refused():
    power, exact = _pair()
    state = _old_state(power, exact)
    declared = describe_tensors(state)
    name = next(k for k in state if k.endswith("_warm_start"))
    state[name] = state[name].clone()
    state[name].view(-1)[0] += 1.0
    with pytest.raises(ValueError, match=rf"{name}.*SHA-256"):
        checked_module("old folder", RotorNetwork(16, 8, hidden=16), state, declared)


def test_other_unexpected_tensors_are_still_refused():
    _, exact = _pair()
    state = dict(exact.state_dict())
    state["gadgets.0.stray"] = torch.zeros(3)
    with pytest.raises(ValueError, match="unexpected"):
        checked_module("folder", RotorNetwork(16, 8, hidden=16), state)
