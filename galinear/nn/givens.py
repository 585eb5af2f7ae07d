r"""The orthogonal control of the rotor network: Givens rotations in place of rotor sandwiches.

:class:`GivensLinear` has :class:`~galinear.nn.RotorLinear`'s chunk layout, alphas, output
averaging and parameter count; only the map of a chunk pair differs. Where the rotor gadget maps
a chunk by :math:`x \mapsto R x \tilde S` (C(n, 2) bivector coefficients per rotor), the control
applies a product of G = C(n, 2) (x 2 for a double rotor) Givens layers: layer l rotates, by
one angle :math:`\theta_l`, each of the c/2 coordinate pairs of a fixed random perfect matching
of the chunk's c = 2^n coordinates,

.. math::

    (x_a, x_b) \mapsto (\cos\theta_l\, x_a - \sin\theta_l\, x_b,\;
                        \sin\theta_l\, x_a + \cos\theta_l\, x_b).

Each layer is :math:`\exp(\theta_l J_l)` with :math:`J_l` a skew signed permutation
(:math:`J_l^2 = -I`), as a simple-rotor factor :math:`\exp(\theta\, e_i e_j)` is, so the control
has the rotor's parameters, its orthogonality and its reach over all c coordinates; what it
lacks is the algebra: its generators are random pairings, not the representation of the
bivectors of Cl(n). The matchings are buffers saved in the state_dict.

:class:`GivensNetwork` is :class:`~galinear.nn.RotorNetwork` (LayerNorm, one PReLU, branch
weights, permutations) with every gadget a :class:`GivensLinear` of the same shape and count.
"""
from __future__ import annotations

import torch
from torch import nn

from galinear._generated import rotor_spec
from galinear._util import count_parameters
from galinear.nn.checks import (
    _check_allocation, _check_float_dtype, _check_input, _check_positive, _finite_or_raise, _is_power_of_two,
)
from galinear.nn.functional.givens import givens_rotate
from galinear.nn.network import RotorNetwork
from galinear.nn.rotor import RotorLinear, fitting_chunk_size

__all__ = ["GivensLinear", "GivensNetwork"]


class GivensLinear(nn.Module):
    r"""A RotorLinear-shaped gadget whose chunk maps are products of Givens layers (module doc).

    Parameters: P G angles + P alphas (+ out for the bias) with P chunk pairs and
    G = C(n, 2) (2 if ``double_rotor``): the count of ``RotorLinear`` with the same arguments.
    Multiply-adds per token: 2 G c per chunk pair applied layer by layer; c^2 per pair as matrices.
    """

    backend = "givens"  # read by RotorNetwork.backend; the control has one implementation
    GEMM_SPEEDUP = 4.0  # see uses_rows; measured at c = 64 and 256, float32, one thread

    def __init__(self, in_features, out_features, bias=False, double_rotor=True, chunk_size=None, alpha=True,
                 device=None, dtype=None):
        super().__init__()
        _check_positive("in_features", in_features)
        _check_positive("out_features", out_features)
        if chunk_size is None:
            chunk_size = fitting_chunk_size(in_features, out_features)
        elif not _is_power_of_two(chunk_size) or chunk_size > min(in_features, out_features):
            raise ValueError(f"chunk_size must be a power of two <= min(in_features, out_features)="
                             f"{min(in_features, out_features)}, got {chunk_size!r}")
        owner = f"GivensLinear({in_features}, {out_features}, chunk_size={chunk_size})"
        _check_float_dtype(owner, dtype)
        self.in_features, self.out_features, self.chunk_size = in_features, out_features, chunk_size
        self.n = chunk_size.bit_length() - 1
        self.double_rotor = bool(double_rotor)
        self.rotations = self.n * (self.n - 1) // 2 * (2 if self.double_rotor else 1)
        _, self.input_chunks, self.output_chunks = rotor_spec.chunk_layout(in_features, out_features, chunk_size)
        self.pairs = P = self.input_chunks * self.output_chunks
        _check_allocation(owner, P * (self.rotations + 1) + out_features * 2, dtype, device,
                          8 * P * self.rotations * chunk_size, fix="use a larger chunk_size or smaller widths")
        factory = {"device": device, "dtype": dtype}
        self.check_finite = True
        self.angles = nn.Parameter(torch.empty(P, self.rotations, **factory))
        self.alpha = nn.Parameter(torch.empty(P, **factory)) if alpha else None
        self.bias = nn.Parameter(torch.empty(out_features, **factory)) if bias else None
        # layer l of pair p rotates the coordinate pairs (m[2i], m[2i+1]) of m = matchings[p, l]
        matchings = torch.stack([torch.randperm(chunk_size, device=device) for _ in range(P * self.rotations)])
        self.register_buffer("matchings", matchings.reshape(P, self.rotations, chunk_size))

        input_index = RotorLinear._chunk_index(in_features, self.input_chunks, chunk_size, device)
        output_index = RotorLinear._chunk_index(out_features, self.output_chunks, chunk_size, device)
        self.register_buffer("input_index", input_index, persistent=False)
        cover = torch.zeros(out_features, dtype=torch.float64, device=device)
        cover.index_add_(0, output_index.reshape(-1), torch.ones(output_index.numel(), dtype=torch.float64,
                                                                 device=device))
        self.register_buffer("output_index", output_index.reshape(-1), persistent=False)
        self.register_buffer("output_scale", (1.0 / (self.input_chunks * cover)).to(dtype or torch.get_default_dtype()),
                             persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        """Angles ~ N(0, 0.2^2) (the rotor's bivector init 0.1, doubled by the sandwich), alpha 1, bias 0."""
        with torch.no_grad():
            nn.init.normal_(self.angles, 0.0, 0.2)
            if self.alpha is not None:
                nn.init.ones_(self.alpha)
            if self.bias is not None:
                nn.init.zeros_(self.bias)

    def _check_parameters(self):
        _finite_or_raise([("angles", self.angles), ("alpha", self.alpha), ("bias", self.bias)],
                         getattr(self, "_qualified_name", None) or type(self).__name__)

    def rotate(self, chunks: torch.Tensor) -> torch.Tensor:
        """Apply every pair's Givens layers to ``chunks`` (..., P, c), pair p to chunks[..., p, :].

        Layer l: z[a] <- cos z[a] - sin z[b], z[b] <- sin z[a] + cos z[b] for each matched (a, b)
        (:func:`~galinear.nn.functional.givens.givens_rotate`: no intermediate layer is kept for
        the backward pass, which recovers them from the output).
        """
        return givens_rotate(chunks, self.angles, self.matchings)

    def uses_rows(self, tokens: int) -> bool:
        """Whether ``tokens`` rows run layer by layer (2 G c multiply-adds per token and pair) rather
        than through the assembled matrix (c^2 per token and pair at GEMM speed, plus building the
        c x c matrices: the layers applied to c rows). ``GEMM_SPEEDUP`` is the measured ratio of
        the matrix product's multiply-add rate to the layers'."""
        c, G = self.chunk_size, self.rotations
        return tokens * (2 * G * c - c * c / self.GEMM_SPEEDUP) < 2 * G * c * c

    def pair_matrices(self) -> torch.Tensor:
        """(P, c, c) orthogonal matrices of the chunk maps (before alpha)."""
        eye = torch.eye(self.chunk_size, dtype=self.angles.dtype, device=self.angles.device)
        columns = self.rotate(eye[:, None, :].expand(self.chunk_size, self.pairs, self.chunk_size))
        return columns.permute(1, 2, 0)  # columns[t, p] = M_p e_t

    def assembled_weight(self) -> torch.Tensor:
        """The (out, in) matrix (bias excluded), differentiable."""
        c, I = self.chunk_size, self.input_chunks
        m = self.pair_matrices()
        if self.alpha is not None:
            m = m * self.alpha[:, None, None]
        pair = torch.arange(self.pairs, device=m.device)
        rows = self.output_index.view(self.output_chunks, c)[pair // I][:, :, None].expand(-1, c, c)
        cols = self.input_index[pair % I][:, None, :].expand(-1, c, c)
        weight = m.new_zeros(self.out_features, self.in_features).index_put((rows, cols), m, accumulate=True)
        return weight * self.output_scale[:, None]

    def dense_weight(self) -> torch.Tensor:
        return self.assembled_weight()

    def forward(self, x):
        _check_input(self, x)
        if self.check_finite and not torch.compiler.is_compiling():
            self._check_parameters()
        lead = x.shape[:-1]
        flat = x.reshape(-1, self.in_features)
        batch = flat.shape[0]
        if not self.uses_rows(batch):
            out = nn.functional.linear(flat, self.assembled_weight(), self.bias)
            return out.reshape(*lead, self.out_features)
        J, I, c = self.output_chunks, self.input_chunks, self.chunk_size
        chunks = flat[:, self.input_index]                                     # (batch, I, c)
        mapped = self.rotate(chunks.unsqueeze(1).expand(batch, J, I, c).reshape(batch, self.pairs, c))
        if self.alpha is not None:
            mapped = mapped * self.alpha[:, None]
        summed = mapped.view(batch, J, I, c).sum(2).reshape(batch, J * c)
        out = summed.new_zeros(batch, self.out_features).index_add(1, self.output_index, summed)
        out = out * self.output_scale
        if self.bias is not None:
            out = out + self.bias
        return out.reshape(*lead, self.out_features)

    def num_rotor_parameters(self) -> int:
        """P G: the angles (equal to RotorLinear's bivector coefficients)."""
        return self.pairs * self.rotations

    def num_parameters(self) -> int:
        return count_parameters(self)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, chunk_size={self.chunk_size}, "
                f"pairs={self.pairs}, rotations={self.rotations}, alpha={self.alpha is not None}, "
                f"bias={self.bias is not None}")


class GivensNetwork(RotorNetwork):
    r""":class:`~galinear.nn.RotorNetwork` with every RotorLinear gadget replaced by a
    :class:`GivensLinear` of the same shape, chunk size and parameter count: the orthogonal
    control. Same arguments (the rotor-only ones, backend and decomposition settings, are
    absent); parameter count equal to ``RotorNetwork`` with the same arguments.
    """

    def __init__(self, in_features, out_features, hidden=None, hidden_layers=2, breadth=3, double_rotor=True,
                 alpha=True, bias=False, chunk_size=None, device=None, dtype=None, *, eps=1e-5):
        super().__init__(in_features, out_features, hidden=hidden, hidden_layers=hidden_layers, breadth=breadth,
                         double_rotor=double_rotor, alpha=alpha, bias=bias, chunk_size=chunk_size, device=device,
                         dtype=dtype, eps=eps)

        def control(rotor):
            return GivensLinear(rotor.in_features, rotor.out_features, bias=bias, double_rotor=double_rotor,
                                chunk_size=rotor.chunk_size, alpha=alpha, device=device, dtype=dtype)

        self.input_gadget = control(self.input_gadget)
        self.hidden_gadgets = nn.ModuleList(nn.ModuleList(control(g) for g in layer) for layer in self.hidden_gadgets)
        self.output_gadget = control(self.output_gadget)
        for name, module in self.named_modules():
            if isinstance(module, GivensLinear):
                module._qualified_name = f"GivensNetwork.{name}"

    def reset_parameters(self):
        """Reset every gadget, the PReLU (0.25) and the branch weights (1); permutations and matchings are kept."""
        for module in self.modules():
            if isinstance(module, GivensLinear):
                module.reset_parameters()
        self.activation.reset_parameters()
        with torch.no_grad():
            self.branch_weights.fill_(1.0)

    def _output(self, h, plan, blocks=None, remake=None):
        """The output gadget on h (T, hidden): its own call (the rotor parity-block path does not
        apply: the stage's ``plan`` is "gadgets", and ``blocks`` and ``remake`` are None)."""
        return self.output_gadget(h)

    def _decoder_applies(self) -> bool:
        return False  # no compiled decoder: inference runs on the assembled matrices

    def num_rotation_parameters(self) -> int:
        return sum(g.num_rotor_parameters() for g in self._gadgets())
