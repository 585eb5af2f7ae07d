r"""Small chunks as matrices: all chunk-pair maps of a layer in one batched call, one GEMM.

For a chunk of c = 2**n coefficients with n small, the map :math:`x \mapsto R x \tilde S` costs
:math:`c^2` per token as a matrix against :math:`O(n^2 c)` factor by factor, but the matrix runs at
matrix-product speed. :func:`exact_sandwich_matrices` builds the P matrices (P, c, c) of a layer in
one batched call (:func:`~galinear.nn.functional.rotors.sandwich_matrix`) with the exact gradient
of exp in the bivectors; :func:`assemble_weight` scatters them, with alpha and the output scale,
into the layer's (d_out, d_in) matrix, so that the layer is one ``F.linear``.

Gradient: with :math:`y_t = M x_t`, :math:`\sum_t G_t \tilde y_t` needs only
:math:`\sum_t G_t y_t^\top = (\partial L/\partial M)\, M^\top` (the correlation that
:func:`galinear.nn.dexp.bivector_parts` forms from the tokens), so the bivector gradients are
those of :mod:`galinear.nn.dexp` (:math:`\varphi(\mathrm{ad}_B)` of the bivector parts) at
:math:`O(P c^3)`, independent of the batch.
"""
from __future__ import annotations

import numpy as np
import torch

from galinear.blades import blade_grades
from galinear.nn import _tables
from galinear.nn.functional._common import _TABLE_CACHE
from galinear.nn.functional.rotors import compose_rotors

__all__ = ["exact_sandwich_matrices", "assemble_weight", "correlation_bivector_parts", "parity_block_matrices",
           "parity_order"]


def correlation_bivector_parts(corr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Bivector parts :math:`\langle a \tilde b\rangle_2`, :math:`\langle \tilde b a\rangle_2` summed
    over the pairs whose correlation :math:`\sum_t a_t b_t^\top` is ``corr`` (P, 2**n, 2**n); each (P, C(n, 2))."""
    from galinear.nn.dexp import _torch_part_tables

    d = corr.shape[-1]
    n = d.bit_length() - 1
    gather, signs = _torch_part_tables(n, corr.device, corr.dtype)
    if gather.shape[0] == 0:
        empty = corr.new_zeros(corr.shape[0], 0)
        return empty, empty
    picked = corr[:, gather, torch.arange(d, device=corr.device)]  # (P, M, d)
    parts = torch.einsum("pmd,mds->spm", picked, signs)
    return parts[0], parts[1]


def parity_order(n: int, device=None) -> torch.Tensor:
    """Shortlex positions of the even-grade blades, then of the odd-grade ones, (2**n,) long."""
    key = ("parity order", n, str(device))
    order = _TABLE_CACHE.get(key)
    if order is None:
        grades = blade_grades(n)
        order = torch.as_tensor(np.concatenate([np.flatnonzero(grades % 2 == 0), np.flatnonzero(grades % 2 == 1)]),
                                device=device)
        _TABLE_CACHE[key] = order
    return order


def _parity_tables(n: int, device, dtype):
    """Per parity block (even, odd): flat gather index and the left/right signs, each (2, h*h)."""
    key = ("parity blocks", n, str(device), dtype)
    tables = _TABLE_CACHE.get(key)
    if tables is None:
        index, left, right = _tables.full_tables(n)
        grades = blade_grades(n)
        blocks = [np.flatnonzero(grades % 2 == parity) for parity in (0, 1)]
        gather = np.stack([index[np.ix_(b, b)].reshape(-1) for b in blocks])
        signs = [np.stack([table[np.ix_(b, b)].reshape(-1) for b in blocks]).astype(np.float64)
                 for table in (left, right)]
        reverse = _tables.reverse_signs(n).astype(np.float64)
        tables = (torch.as_tensor(gather, device=device),
                  *(torch.as_tensor(t, device=device).to(dtype) for t in (*signs, reverse)))
        _TABLE_CACHE[key] = tables
    return tables


def parity_block_matrices(left, right=None) -> torch.Tensor:
    r"""(P, 2**n, 2**n) matrices of x -> R x S~ in the basis :func:`parity_order` (n >= 1).

    A rotor is even, so :math:`x \mapsto R x` and :math:`x \mapsto x \tilde S` keep the parity of a
    blade: in the even-then-odd basis both are block diagonal with two (c/2, c/2) blocks, and the
    map is two products of c/2 x c/2 matrices (a quarter of the c x c product).
    """
    VL, WL = left
    n = VL.shape[-1]
    P, c, h = VL.shape[0], 2**n, 2 ** (n - 1)
    gather, left_sign, right_sign, reverse = _parity_tables(n, VL.device, VL.dtype)
    rotor = compose_rotors(VL, WL)
    other = rotor if right is None else compose_rotors(*right)
    flat = gather.reshape(-1)
    a = rotor.index_select(-1, flat).view(P, 2, h * h).mul_(left_sign).view(P, 2, h, h)
    b = (other * reverse).index_select(-1, flat).view(P, 2, h * h).mul_(right_sign).view(P, 2, h, h)
    blocks = a @ b
    out = blocks.new_zeros(P, c, c)
    out[:, :h, :h] = blocks[:, 0]
    out[:, h:, h:] = blocks[:, 1]
    return out


def _unpermute(matrix, n):
    inverse = torch.argsort(parity_order(n, matrix.device))
    return matrix.index_select(-2, inverse).index_select(-1, inverse)


class _ExactSandwichMatrices(torch.autograd.Function):
    """(P, c, c) parity-block matrices of x -> R x S~ from exact factors, exact gradient in B and C."""

    @staticmethod
    def forward(ctx, left_bivectors, right_bivectors, VL, WL, VR, WR):
        M = parity_block_matrices((VL, WL), None if VR is None else (VR, WR))
        ctx.single = right_bivectors is None
        ctx.save_for_backward(M, left_bivectors, *(() if ctx.single else (right_bivectors,)))
        return M

    @staticmethod
    def backward(ctx, grad_m):
        from galinear.nn.dexp import phi_ad

        M, BL, *rest = ctx.saved_tensors
        c = M.shape[-1]
        h = c // 2
        grad_m = grad_m.to(M.dtype)
        corr = torch.zeros_like(M)  # only the parity blocks of sum_t G_t y_t^T carry bivector parts
        corr[:, :h, :h] = grad_m[:, :h, :h] @ M[:, :h, :h].transpose(-1, -2)
        corr[:, h:, h:] = grad_m[:, h:, h:] @ M[:, h:, h:].transpose(-1, -2)
        left_part, right_part = correlation_bivector_parts(_unpermute(corr, c.bit_length() - 1))
        if ctx.single:
            return phi_ad(BL, (left_part - right_part).to(BL.dtype)), None, None, None, None, None
        (BR,) = rest
        return phi_ad(BL, left_part.to(BL.dtype)), -phi_ad(BR, right_part.to(BR.dtype)), None, None, None, None


def exact_sandwich_matrices(left_bivectors, right_bivectors, left, right=None, basis: str = "shortlex"):
    """(P, 2**n, 2**n) matrices M_p of x -> R_p x S_p~ (S = R when ``right_bivectors`` is None).

    ``left``/``right`` are exact factor pairs (V, W) of the bivectors (constants: the gradient is
    that of exp, as in :func:`galinear.nn.dexp.exact_rotor_sandwich`). ``basis="parity"`` returns
    them in the basis :func:`parity_order` (block diagonal), "shortlex" in the usual one.
    """
    if (right_bivectors is None) != (right is None):
        raise ValueError("give right_bivectors and right factors together (both None for S = R)")
    if basis not in ("shortlex", "parity"):
        raise ValueError(f"basis must be 'shortlex' or 'parity', got {basis!r}")
    VL, WL = (t.detach() for t in left)
    n = VL.shape[-1]
    if n == 0:  # Cl(0): the 1 x 1 identity
        return VL.new_ones(VL.shape[0], 1, 1)
    VR, WR = (None, None) if right is None else (t.detach() for t in right)
    M = _ExactSandwichMatrices.apply(left_bivectors, right_bivectors, VL, WL, VR, WR)
    return M if basis == "parity" else _unpermute(M, n)


def assemble_weight(matrices, alpha, input_index, output_index, output_scale, in_features, basis=None):
    """The (out_features, in_features) matrix of a rotor layer from its (J I, c, c) chunk matrices.

    Pair p = j I + i maps input chunk i to output chunk j; ``input_index`` (I, c) and
    ``output_index`` (J, c) hold the layer coordinates of the chunks' coefficients (in shortlex
    order; ``basis`` (c,), e.g. :func:`parity_order`, when the matrices use another coefficient
    order); rows are then scaled by ``output_scale`` (out_features,). Differentiable in
    ``matrices`` and ``alpha``.
    """
    P, c, _ = matrices.shape
    J, I = output_index.shape[0], input_index.shape[0]
    out_features = output_scale.shape[0]
    if basis is not None:
        input_index, output_index = input_index[:, basis], output_index[:, basis]
    if alpha is not None:
        matrices = matrices * alpha[:, None, None].to(matrices.dtype)
    weight = matrices.reshape(J, I, c, c).permute(0, 2, 1, 3).reshape(J * c, I * c)
    weight = weight.new_zeros(J * c, in_features).index_add(1, input_index.reshape(-1), weight)
    weight = weight.new_zeros(out_features, in_features).index_add(0, output_index.reshape(-1), weight)
    return weight * output_scale.to(weight.dtype).unsqueeze(-1)
