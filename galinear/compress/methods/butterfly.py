r"""The butterfly baseline of ``galinear compress``: the rotor network's shape with every chunk map a
learned butterfly (:class:`galinear.nn.butterfly.Butterfly`) instead of a rotor sandwich.

:class:`ButterflyLinear` has :class:`~galinear.nn.RotorLinear`'s chunk layout, alphas and output
averaging: chunk pair p (input chunk i, output chunk j, c = 2^n coordinates) maps input chunk i by
:math:`\alpha_p B_p`, with :math:`B_p` the product of n layers of c/2 Givens rotations in the FFT
pattern, each rotation with its own angle ((c/2) n angles a pair, against the double rotor's
n (n - 1) bivector coefficients); the outputs of a chunk are summed over the input chunks and
averaged over the chunks that cover each output coordinate. The pair maps run as one matrix: the
pairs' butterflies applied to the identity under ``torch.vmap``, assembled into the (out, in) weight.

:class:`ButterflyNetwork` is the rotor network's shape (an input gadget to the hidden width, hidden
layers of ``breadth`` branches each permuted, LayerNorm, one PReLU, learned branch weights, an
output gadget) with every gadget a :class:`ButterflyLinear`; the budget rule is its record's
(:mod:`galinear.compress.methods.records`). Angles start at N(0, 0.2^2), as the Givens control's.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._generated import rotor_spec
from galinear.nn.butterfly import Butterfly
from galinear.nn.rotor import fitting_chunk_size

__all__ = ["ButterflyLinear", "ButterflyNetwork"]


def _chunk_index(size: int, chunks: int, width: int) -> torch.Tensor:
    """(chunks, width) coordinates: chunk i reads (start_i + t) mod size (the rotor layout)."""
    start = torch.tensor(rotor_spec.chunk_starts(size, chunks), dtype=torch.long)
    return (start[:, None] + torch.arange(width)) % size


class ButterflyLinear(nn.Module):
    """A RotorLinear-shaped gadget whose chunk maps are butterflies (module doc). Parameters:
    ``angles`` (P, log2 c, c / 2), ``alpha`` (P,) and an optional bias."""

    def __init__(self, in_features: int, out_features: int, chunk_size: int | None = None, bias: bool = False):
        super().__init__()
        c = fitting_chunk_size(in_features, out_features, chunk_size)
        if c < 2:
            raise ValueError(f"ButterflyLinear({in_features}, {out_features}): a chunk of {c} coordinate has no "
                             "rotation; give widths >= 2")
        _, inputs, outputs = rotor_spec.chunk_layout(in_features, out_features, c)
        self.in_features, self.out_features, self.chunk_size = in_features, out_features, c
        self.input_chunks, self.output_chunks, self.pairs = inputs, outputs, inputs * outputs
        self._template = (Butterfly(c),)  # applied with each pair's angles; not a submodule
        depth = self._template[0].depth
        self.angles = nn.Parameter(torch.empty(self.pairs, depth, c // 2))
        self.alpha = nn.Parameter(torch.ones(self.pairs))
        self.bias = nn.Parameter(torch.zeros(out_features)) if bias else None
        rows = _chunk_index(out_features, outputs, c)
        cover = torch.zeros(out_features, dtype=torch.float64).index_add_(0, rows.reshape(-1), torch.ones(rows.numel(), dtype=torch.float64))
        self.register_buffer("input_index", _chunk_index(in_features, inputs, c), persistent=False)
        self.register_buffer("output_index", rows, persistent=False)
        self.register_buffer("output_scale", 1.0 / (inputs * cover), persistent=False)
        with torch.no_grad():
            nn.init.normal_(self.angles, 0.0, 0.2)

    def pair_matrices(self) -> torch.Tensor:
        """(P, c, c): the butterfly of every pair as a matrix (before alpha), differentiable."""
        template = self._template[0]
        eye = torch.eye(self.chunk_size, dtype=self.angles.dtype, device=self.angles.device)

        def matrix(angles):
            return torch.func.functional_call(template, {"angles": angles}, (eye,)).T

        return torch.vmap(matrix)(self.angles)

    def weight(self) -> torch.Tensor:
        """The (out, in) matrix (bias excluded), differentiable."""
        c, inputs = self.chunk_size, self.input_chunks
        m = self.pair_matrices() * self.alpha[:, None, None]
        pair = torch.arange(self.pairs, device=m.device)
        rows = self.output_index[pair // inputs][:, :, None].expand(-1, c, c)
        cols = self.input_index[pair % inputs][:, None, :].expand(-1, c, c)
        weight = m.new_zeros(self.out_features, self.in_features).index_put((rows, cols), m, accumulate=True)
        return weight * self.output_scale.to(m.dtype)[:, None]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.linear(x, self.weight(), self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, chunk_size={self.chunk_size}, "
                f"pairs={self.pairs}, bias={self.bias is not None}")


class ButterflyNetwork(nn.Module):
    """The rotor network's shape with :class:`ButterflyLinear` gadgets (module doc)."""

    def __init__(self, in_features: int, out_features: int, hidden: int, hidden_layers: int = 2, breadth: int = 3,
                 chunk_size: int | None = None, bias: bool = False, eps: float = 1e-5):
        super().__init__()
        self.in_features, self.out_features, self.hidden = in_features, out_features, hidden
        self.hidden_layers, self.breadth, self.eps = hidden_layers, breadth, eps

        def gadget(a, b):
            return ButterflyLinear(a, b, chunk_size=None if chunk_size is None else fitting_chunk_size(a, b, chunk_size),
                                   bias=bias)

        self.input_gadget = gadget(in_features, hidden)
        self.hidden_gadgets = nn.ModuleList(nn.ModuleList(gadget(hidden, hidden) for _ in range(breadth))
                                            for _ in range(hidden_layers))
        self.output_gadget = gadget(hidden, out_features)
        self.activation = nn.PReLU(1)
        self.branch_weights = nn.Parameter(torch.ones(hidden_layers, breadth))
        self.register_buffer("input_permutation", torch.randperm(hidden))
        self.register_buffer("hidden_permutations", torch.stack(
            [torch.randperm(hidden) for _ in range(hidden_layers * breadth)]).reshape(hidden_layers, breadth, hidden)
            if hidden_layers else torch.zeros(0, breadth, hidden, dtype=torch.long))

    def _block(self, gadget, permutation, h):
        z = gadget(h)[..., permutation]
        return self.activation(nn.functional.layer_norm(z, (self.hidden,), eps=self.eps))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self._block(self.input_gadget, self.input_permutation, x)
        for layer, gadgets in enumerate(self.hidden_gadgets):
            h = sum(self.branch_weights[layer, b] * self._block(g, self.hidden_permutations[layer, b], h)
                    for b, g in enumerate(gadgets))
        return self.output_gadget(h)
