r"""The paper's q/k/v rotor network (RotorNetwork): RotorLinear gadgets, LayerNorm, one PReLU.

Pence, Yamada & Singh, "Composing Linear Layers from Irreducibles", NeurIPS 2025, Section 5
(restated in docs/nn.md).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from galinear._generated import rotor_spec
from galinear.nn import functional as F
from galinear._limits import check_max_iter, check_tolerance, rotor_linear_size
from galinear._util import count_parameters
from galinear.nn.baselines import _check_allocation, _check_float_dtype, _check_input, _check_positive
from galinear.nn.rotor import RotorLinear, _finite_or_raise, fitting_chunk_size

__all__ = ["RotorNetwork"]


class RotorNetwork(nn.Module):
    r"""The paper's rotor replacement for one q, k or v projection (Section 5).

    .. math::

        h_0 &= \mathrm{PReLU}(\mathrm{LN}(\Pi_0 G_{in}(x))) \\
        h_l &= \textstyle\sum_{b=1}^{breadth} a_{lb}\,
               \mathrm{PReLU}(\mathrm{LN}(\Pi_{lb} G_{lb}(h_{l-1}))), \quad l = 1..hidden\_layers \\
        y   &= G_{out}(h_L)

    G are :class:`RotorLinear` gadgets, LN a LayerNorm without affine parameters, one PReLU
    (one parameter) shared by the whole network, a learnable (init 1), Pi fixed random
    permutations stored as buffers. Defaults are the paper's: hidden = in_features, 2 hidden
    layers, breadth 3, double rotors, alpha on, no bias. Parameter counts: 895 (2048 -> 2048),
    1,076 (2048 -> 512); with hidden=2048: 1,401 (1536 -> 1536), 1,493 (1536 -> 256).
    """

    def __init__(
        self,
        in_features,
        out_features,
        hidden=None,
        hidden_layers=2,
        breadth=3,
        double_rotor=True,
        alpha=True,
        bias=False,
        chunk_size=None,
        backend="auto",
        device=None,
        dtype=None,
        *,
        eps=1e-5,
        tol=None,
        max_iter=rotor_spec.POWER_MAX_ITER,
        decomposition="exact",
        gradient="exact",
    ):
        super().__init__()
        _check_positive("in_features", in_features)
        _check_positive("out_features", out_features)
        hidden = in_features if hidden is None else hidden
        _check_positive("hidden", hidden)
        _check_positive("breadth", breadth)
        if isinstance(hidden_layers, bool) or not isinstance(hidden_layers, int) or hidden_layers < 0:
            raise ValueError(f"hidden_layers must be a non-negative integer, got {hidden_layers!r}")
        owner = f"RotorNetwork({in_features}, {out_features}, hidden={hidden})"
        _check_float_dtype(owner, dtype)
        check_tolerance(tol, owner=owner)
        check_max_iter(max_iter, owner=owner)
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 < eps < math.inf:
            raise ValueError(f"{owner}: eps (the LayerNorm epsilon) must be a finite number > 0, got {eps!r}")
        gadgets = hidden_layers * breadth
        values, index_bytes = 0, 8 * hidden * (1 + gadgets)  # the permutations
        for a, b, count in ((in_features, hidden, 1), (hidden, hidden, gadgets), (hidden, out_features, 1)):
            more, index = rotor_linear_size(a, b, fitting_chunk_size(a, b, chunk_size), double_rotor, alpha, bias)
            values, index_bytes = values + count * more, index_bytes + count * index
        _check_allocation(owner, values, dtype, device, index_bytes,
                          fix="use a larger chunk_size, a smaller hidden width or fewer hidden layers/branches")
        self.in_features, self.out_features, self.hidden = in_features, out_features, hidden
        self.hidden_layers, self.breadth, self.eps = hidden_layers, breadth, eps
        gadget = dict(
            double_rotor=double_rotor, alpha=alpha, bias=bias, backend=backend, device=device, dtype=dtype,
            tol=tol, max_iter=max_iter, decomposition=decomposition, gradient=gradient,
        )

        def chunk(a, b):
            return None if chunk_size is None else fitting_chunk_size(a, b, chunk_size)

        self.input_gadget = RotorLinear(in_features, hidden, chunk_size=chunk(in_features, hidden), **gadget)
        self.hidden_gadgets = nn.ModuleList(
            nn.ModuleList(RotorLinear(hidden, hidden, chunk_size=chunk(hidden, hidden), **gadget) for _ in range(breadth))
            for _ in range(hidden_layers)
        )
        self.output_gadget = RotorLinear(hidden, out_features, chunk_size=chunk(hidden, out_features), **gadget)
        self.activation = nn.PReLU(1, device=device, dtype=dtype)
        self.branch_weights = nn.Parameter(torch.ones(hidden_layers, breadth, device=device, dtype=dtype))
        self.register_buffer("input_permutation", torch.randperm(hidden, device=device))
        self.register_buffer(
            "hidden_permutations",
            torch.stack([torch.randperm(hidden, device=device) for _ in range(hidden_layers * breadth)]).reshape(
                hidden_layers, breadth, hidden
            )
            if hidden_layers
            else torch.zeros(0, breadth, hidden, dtype=torch.long, device=device),
        )
        for name, module in self.named_modules():
            if isinstance(module, RotorLinear):
                module._qualified_name = f"RotorNetwork.{name}"

    @property
    def backend(self) -> str:
        return self.input_gadget.backend

    @backend.setter
    def backend(self, name: str):
        for module in self.modules():
            if isinstance(module, RotorLinear):
                module.backend = name

    def reset_parameters(self):
        """Reset every gadget, the PReLU (0.25) and the branch weights (1); permutations are kept."""
        for module in self.modules():
            if isinstance(module, RotorLinear):
                module.reset_parameters()
        self.activation.reset_parameters()
        with torch.no_grad():
            self.branch_weights.fill_(1.0)

    def _block(self, gadget, permutation, h):
        z = gadget(h)[..., permutation]
        return self.activation(nn.functional.layer_norm(z, (self.hidden,), eps=self.eps))

    def forward(self, x):
        _check_input(self, x)
        if not F._compiling():
            _finite_or_raise(
                [("activation.weight", self.activation.weight), ("branch_weights", self.branch_weights)],
                "RotorNetwork",
            )
        h = self._block(self.input_gadget, self.input_permutation, x)
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h = sum(
                self.branch_weights[layer, b] * self._block(gadget, self.hidden_permutations[layer, b], h)
                for b, gadget in enumerate(gadgets)
            )
        return self.output_gadget(h)

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, hidden={self.hidden}, "
            f"hidden_layers={self.hidden_layers}, breadth={self.breadth}"
        )
