"""The power iteration's default step limit is the rotor specification's, in every entry point
(torch layers, the torch decomposition and the numpy core)."""
import inspect

import pytest

torch = pytest.importorskip("torch", reason="the layers are torch modules")

from galinear._generated import rotor_spec  # noqa: E402
from galinear.core import rotors  # noqa: E402
from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.nn import functional as F  # noqa: E402


@pytest.mark.parametrize("entry", [RotorLinear, RotorNetwork, F.invariant_decomposition, rotors.decompose_power],
                         ids=["RotorLinear", "RotorNetwork", "invariant_decomposition", "decompose_power"])
def test_default_max_iter_is_the_specification_s(entry):
    assert inspect.signature(entry).parameters["max_iter"].default == rotor_spec.POWER_MAX_ITER


def test_layers_pass_the_default_to_every_gadget():
    network = RotorNetwork(8, 4, hidden=8, hidden_layers=1, breadth=2, decomposition="power")
    gadgets = [m for m in network.modules() if isinstance(m, RotorLinear)]
    assert len(gadgets) == 4 and all(g.max_iter == rotor_spec.POWER_MAX_ITER for g in gadgets)
    assert RotorLinear(8, 8).max_iter == rotor_spec.POWER_MAX_ITER
