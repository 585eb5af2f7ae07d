r"""Inference forms of the rotor layers, for export (ONNX, ``torch.export``, ``torch.jit.trace``).

A trained :class:`~galinear.nn.RotorLinear` computes its map from its bivectors at run time
(an eigen-decomposition, then the rotor sandwiches). That is what training needs, and what
exporters cannot follow: the default ONNX exporter has no function for a complex
``linalg.eigh``, and the TorchScript-based one refuses tensors that require grad as constants.
:func:`freeze` replaces every rotor layer of a model by its inference form, whose map is read
from buffers:

- :class:`~galinear.nn.RotorLinear` and :class:`~galinear.nn.GivensLinear` (linear maps) become a
  :class:`FrozenLinear`: ``y = x W^T + b`` with the assembled (out, in) matrix ``W``;
- :class:`~galinear.nn.RotorNetwork` and :class:`~galinear.nn.GivensNetwork` become a
  :class:`FrozenNetwork`: per stage one matrix with the fixed permutations folded into its rows
  and the branches of a hidden layer stacked, then LayerNorm (no affine), the PReLU and the
  branch weights, all buffers.

The frozen model computes what the eval-mode model computes (its matrices are the ones the
eval-mode forward multiplies by), holds no parameter of those layers, and cannot be trained
further: keep the original to train or to save with :func:`galinear.compress.save`.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear.nn.checks import _check_input
from galinear.nn.givens import GivensLinear
from galinear.nn.network import RotorNetwork
from galinear.nn.rotor import RotorLinear

__all__ = ["freeze", "FrozenLinear", "FrozenNetwork"]


def _constant(tensor):
    return None if tensor is None else tensor.detach().clone()


def _hold(module: nn.Module, name: str, tensor) -> None:
    """A buffer ``name`` holding a copy of ``tensor``; a plain None attribute when there is none
    (torch.export miscounts buffers registered as None)."""
    if tensor is None:
        setattr(module, name, None)
    else:
        module.register_buffer(name, _constant(tensor))


def _cast(x: torch.Tensor, work: torch.dtype):
    """(x in the working dtype, the dtype to return): the rotor layers compute in their
    parameters' dtype and hand the result back in the input's."""
    return (x, None) if x.dtype == work else (x.to(work), x.dtype)


class FrozenLinear(nn.Module):
    r"""``y = x W^T + b`` with ``W`` (out_features, in_features) and ``b`` held as buffers: the
    inference form of a linear rotor layer (:func:`freeze`). An input of another floating-point
    dtype is computed in ``W``'s and cast back, as the layer it replaces does."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None, source: str = ""):
        super().__init__()
        if weight.dim() != 2 or (bias is not None and tuple(bias.shape) != (weight.shape[0],)):
            raise ValueError(f"FrozenLinear needs a (out, in) weight and an (out,) bias, got {tuple(weight.shape)} "
                             f"and {None if bias is None else tuple(bias.shape)}")
        self.out_features, self.in_features = (int(s) for s in weight.shape)
        self.source = source
        _hold(self, "weight", weight)
        _hold(self, "bias", bias)

    @classmethod
    def of(cls, layer) -> "FrozenLinear":
        """The inference form of a RotorLinear or GivensLinear (its current eval-mode map)."""
        with torch.no_grad():
            weight = layer.assembled_weight()
        return cls(weight, layer.bias, source=type(layer).__name__)

    def forward(self, x):
        _check_input(self, x)
        x, back = _cast(x, self.weight.dtype)
        y = nn.functional.linear(x, self.weight, self.bias)
        return y if back is None else y.to(back)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, source={self.source!r}")


class FrozenNetwork(nn.Module):
    r"""The inference form of a :class:`~galinear.nn.RotorNetwork` (or ``GivensNetwork``):

    .. math::

        h_0 = \mathrm{PReLU}(\mathrm{LN}(W_0 x + b_0)), \quad
        h_l = \textstyle\sum_b a_{lb}\, \mathrm{PReLU}(\mathrm{LN}((W_l h_{l-1} + b_l)_b)), \quad
        y = W_{L+1} h_L + b_{L+1},

    where each ``W_l`` is the stage's gadget matrices with their permutations folded into the rows
    (a hidden stage stacks its ``breadth`` branches: (breadth hidden, hidden)). Buffers:
    ``weight_<l>``, ``bias_<l>`` (absent without biases), ``slope`` (the PReLU's) and
    ``branch_weights``."""

    def __init__(self, stages, slope, branch_weights, eps: float, source: str = ""):
        super().__init__()
        first, last = stages[0][0], stages[-1][0]
        self.in_features, self.out_features, self.hidden = int(first.shape[1]), int(last.shape[0]), int(first.shape[0])
        self.hidden_layers, self.breadth = int(branch_weights.shape[0]), int(branch_weights.shape[1])
        if len(stages) != self.hidden_layers + 2:
            raise ValueError(f"FrozenNetwork needs {self.hidden_layers + 2} stages for {self.hidden_layers} hidden "
                             f"layers, got {len(stages)}")
        self.eps, self.source = float(eps), source
        self.stages = len(stages)
        for index, (weight, bias) in enumerate(stages):
            _hold(self, f"weight_{index}", weight)
            _hold(self, f"bias_{index}", bias)
        self.register_buffer("slope", _constant(slope).reshape(1))
        self.register_buffer("branch_weights", _constant(branch_weights))

    @classmethod
    def of(cls, network: RotorNetwork) -> "FrozenNetwork":
        """The inference form of a RotorNetwork or GivensNetwork (its current eval-mode map; the
        network's parameters and permutations are checked first)."""
        with torch.no_grad():
            stages = network._fused_weights()
        return cls(stages, network.activation.weight, network.branch_weights, network.eps,
                   source=type(network).__name__)

    def _stage(self, index):
        return getattr(self, f"weight_{index}"), getattr(self, f"bias_{index}")

    def _normed(self, z):
        z = nn.functional.layer_norm(z, (self.hidden,), eps=self.eps)
        return nn.functional.prelu(z, self.slope)

    def forward(self, x):
        _check_input(self, x)
        x, back = _cast(x, self.branch_weights.dtype)
        lead = x.shape[:-1]
        h = self._normed(nn.functional.linear(x.reshape(-1, self.in_features), *self._stage(0)))
        for layer in range(self.hidden_layers):
            z = nn.functional.linear(h, *self._stage(1 + layer)).view(h.shape[0], self.breadth, self.hidden)
            h = torch.matmul(self.branch_weights[layer], self._normed(z))      # sum_b a_lb z_b
        y = nn.functional.linear(h, *self._stage(self.stages - 1)).reshape(*lead, self.out_features)
        return y if back is None else y.to(back)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, hidden={self.hidden}, "
                f"hidden_layers={self.hidden_layers}, breadth={self.breadth}, source={self.source!r}")


def _frozen_form(module):
    """The inference form of ``module``, or None when it is not a rotor layer."""
    if isinstance(module, RotorNetwork):  # GivensNetwork included
        return FrozenNetwork.of(module)
    if isinstance(module, (RotorLinear, GivensLinear)):
        return FrozenLinear.of(module)
    return None


def freeze(module: nn.Module) -> nn.Module:
    """Replace every rotor layer inside ``module`` by its inference form; returns the module.

    RotorLinear and GivensLinear become :class:`FrozenLinear`, RotorNetwork and GivensNetwork
    :class:`FrozenNetwork` (module doc): their maps are read from buffers, with no decomposition
    at run time and no parameter. The replacement is in place (a model's submodules are swapped;
    a layer shared by several parents stays shared); when ``module`` is itself a rotor layer, the
    frozen form is returned and ``module`` is left unchanged, so always use the result::

        model = galinear.nn.freeze(model)
        torch.onnx.export(model, (x,))

    Every parameter left in galinear's other layers (the low-rank and structured baselines, which
    export as they are) stops requiring grad, and the whole module is put in eval mode. The
    outputs equal the eval-mode outputs of the original to rounding.
    """
    if not isinstance(module, nn.Module):
        raise TypeError(f"freeze expects a torch.nn.Module, got {type(module).__name__}")
    done: dict = {}

    def form(child):
        key = id(child)
        if key not in done:
            done[key] = (child, _frozen_form(child))
        return done[key][1]

    root = form(module)
    if root is not None:
        return root.eval()

    def visit(parent):
        for name, child in list(parent._modules.items()):
            if child is None:
                continue
            frozen = form(child)
            if frozen is not None:
                parent._modules[name] = frozen
            elif id(child) not in visited:
                visited.add(id(child))
                visit(child)

    visited = {id(module)}
    visit(module)
    for sub in module.modules():
        if type(sub).__module__.startswith("galinear."):
            for parameter in sub.parameters(recurse=False):
                parameter.requires_grad_(False)
    return module.eval()
