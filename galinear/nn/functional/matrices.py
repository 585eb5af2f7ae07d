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

__all__ = ["assemble_weight", "chunk_coordinates", "chunk_weight", "correlation_bivector_parts", "exact_parity_blocks",
           "exact_sandwich_matrices", "parity_blocks", "parity_order"]


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
    """Gather index (2, h*h) and left/right signs (2, h*h) of the two parity blocks of the
    product matrices, the reverse signs (2**n,), and the (C(n, 2) * 2**n,) positions in the flat
    (2, h, h) blocks of the correlation entries that carry bivector parts."""
    key = ("parity blocks", n, str(device), dtype)
    tables = _TABLE_CACHE.get(key)
    if tables is None:
        from galinear.blades import bivector_part_tables

        index, left, right = _tables.full_tables(n)
        grades = blade_grades(n)
        blocks = [np.flatnonzero(grades % 2 == parity) for parity in (0, 1)]
        h = 2 ** (n - 1)
        gather = np.stack([index[np.ix_(b, b)].reshape(-1) for b in blocks])
        signs = [np.stack([table[np.ix_(b, b)].reshape(-1) for b in blocks]).astype(np.float64)
                 for table in (left, right)]
        reverse = _tables.reverse_signs(n).astype(np.float64)
        position = np.empty(2**n, dtype=np.int64)
        for b in blocks:
            position[b] = np.arange(len(b))
        part_rows = np.asarray(bivector_part_tables(n)[0], dtype=np.int64)  # (M, 2**n): corr[row, col]
        columns = np.arange(2**n)[None, :]
        part_index = (grades[columns] % 2) * h * h + position[part_rows] * h + position[columns]
        tables = (torch.as_tensor(gather, device=device),
                  *(torch.as_tensor(t, device=device).to(dtype) for t in (*signs, reverse)),
                  torch.as_tensor(part_index.reshape(-1), device=device))
        _TABLE_CACHE[key] = tables
    return tables


def parity_blocks(left, right=None) -> torch.Tensor:
    r"""(P, 2, c/2, c/2): the even and odd blocks of the matrices of x -> R x S~ (n >= 1).

    A rotor is even, so :math:`x \mapsto R x` and :math:`x \mapsto x \tilde S` keep the parity of a
    blade: in the basis :func:`parity_order` (even blades, then odd) both are block diagonal, and
    the map is two products of c/2 x c/2 matrices (a quarter of one c x c product). Block q, entry
    (r, s) is M[b_q[r], b_q[s]] with b_q the shortlex positions of parity q.
    """
    VL, WL = left
    n = VL.shape[-1]
    P, h = VL.shape[0], 2 ** (n - 1)
    gather, left_sign, right_sign, reverse, _ = _parity_tables(n, VL.device, VL.dtype)
    rotor = compose_rotors(VL, WL)
    other = rotor if right is None else compose_rotors(*right)
    flat = gather.reshape(-1)
    a = rotor.index_select(-1, flat).view(P, 2, h * h).mul_(left_sign).view(P, 2, h, h)
    b = (other * reverse).index_select(-1, flat).view(P, 2, h * h).mul_(right_sign).view(P, 2, h, h)
    return a @ b


def _full_from_blocks(blocks):
    P, _, h, _ = blocks.shape
    out = blocks.new_zeros(P, 2 * h, 2 * h)
    out[:, :h, :h] = blocks[:, 0]
    out[:, h:, h:] = blocks[:, 1]
    return out


def _unpermute(matrix, n):
    inverse = torch.argsort(parity_order(n, matrix.device))
    return matrix.index_select(-2, inverse).index_select(-1, inverse)


class _ExactParityBlocks(torch.autograd.Function):
    """:func:`parity_blocks` from exact factors, with the exact gradient in B and C."""

    @staticmethod
    def forward(ctx, left_bivectors, right_bivectors, VL, WL, VR, WR):
        blocks = parity_blocks((VL, WL), None if VR is None else (VR, WR))
        ctx.single = right_bivectors is None
        ctx.save_for_backward(blocks, left_bivectors, *(() if ctx.single else (right_bivectors,)))
        return blocks

    @staticmethod
    def backward(ctx, grad_blocks):
        from galinear.nn.dexp import _torch_part_tables, phi_ad

        blocks, BL, *rest = ctx.saved_tensors
        P, _, h, _ = blocks.shape
        n = (2 * h).bit_length() - 1
        # only the parity blocks of sum_t G_t y_t^T = (dL/dM) M^T carry bivector parts
        corr = grad_blocks.to(blocks.dtype) @ blocks.transpose(-1, -2)
        part_index = _parity_tables(n, blocks.device, blocks.dtype)[4]
        _, signs = _torch_part_tables(n, blocks.device, blocks.dtype)
        picked = corr.reshape(P, 2 * h * h).index_select(-1, part_index).view(P, signs.shape[0], 2 * h)
        left_part, right_part = torch.einsum("pmd,mds->spm", picked, signs)
        if ctx.single:
            return phi_ad(BL, (left_part - right_part).to(BL.dtype)), None, None, None, None, None
        (BR,) = rest
        return phi_ad(BL, left_part.to(BL.dtype)), -phi_ad(BR, right_part.to(BR.dtype)), None, None, None, None


def exact_parity_blocks(left_bivectors, right_bivectors, left, right=None) -> torch.Tensor:
    """:func:`parity_blocks` of exact factor pairs, differentiable in the bivectors (the factors
    are constants: the gradient is that of exp, as in :func:`galinear.nn.dexp.exact_rotor_sandwich`)."""
    if (right_bivectors is None) != (right is None):
        raise ValueError("give right_bivectors and right factors together (both None for S = R)")
    VL, WL = (t.detach() for t in left)
    VR, WR = (None, None) if right is None else (t.detach() for t in right)
    return _ExactParityBlocks.apply(left_bivectors, right_bivectors, VL, WL, VR, WR)


def exact_sandwich_matrices(left_bivectors, right_bivectors, left, right=None) -> torch.Tensor:
    """(P, 2**n, 2**n) matrices M_p of x -> R_p x S_p~ (S = R when ``right_bivectors`` is None),
    shortlex basis, exact gradient in the bivectors; see :func:`exact_parity_blocks`."""
    n = left[0].shape[-1]
    if n == 0:  # Cl(0): the 1 x 1 identity
        return left[0].new_ones(left[0].shape[0], 1, 1)
    return _unpermute(_full_from_blocks(exact_parity_blocks(left_bivectors, right_bivectors, left, right)), n)


def chunk_weight(blocks, alpha, output_chunks: int) -> torch.Tensor:
    """(J c, I c) matrix of all chunk pairs p = j I + i (block (j, i) = alpha_p M_p), rows and
    columns of every chunk in the basis :func:`parity_order`; ``blocks`` from :func:`parity_blocks`."""
    P, _, h, _ = blocks.shape
    J = output_chunks
    I = P // J
    if alpha is not None:
        blocks = blocks * alpha[:, None, None, None].to(blocks.dtype)
    weight = blocks.new_zeros(J, 2 * h, I, 2 * h)
    weight[:, :h, :, :h] = blocks[:, 0].view(J, I, h, h).permute(0, 2, 1, 3)
    weight[:, h:, :, h:] = blocks[:, 1].view(J, I, h, h).permute(0, 2, 1, 3)
    return weight.view(J * 2 * h, I * 2 * h)


def chunk_coordinates(index: torch.Tensor) -> torch.Tensor:
    """(chunks * c,) layer coordinates of the rows/columns of :func:`chunk_weight` from a chunk
    index (chunks, c) in shortlex order."""
    n = index.shape[-1].bit_length() - 1
    return index[:, parity_order(n, index.device)].reshape(-1)


def assemble_weight(weight, input_coordinates, output_coordinates, output_scale, in_features):
    """The layer's (out_features, in_features) matrix from :func:`chunk_weight` (overlapping chunks
    summed, rows scaled by ``output_scale``)."""
    weight = weight.new_zeros(weight.shape[0], in_features).index_add(1, input_coordinates, weight)
    weight = weight.new_zeros(output_scale.shape[0], in_features).index_add(0, output_coordinates, weight)
    return weight * output_scale.to(weight.dtype).unsqueeze(-1)
