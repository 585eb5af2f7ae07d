r"""Small chunks as matrices: all chunk-pair maps of a layer in one batched call, one GEMM.

For a chunk of c = 2**n coefficients with n small, the map :math:`x \mapsto R x \tilde S` costs
:math:`c^2` per token as a matrix against :math:`O(n^2 c)` factor by factor, but the matrix runs at
matrix-product speed. :func:`parity_blocks` builds the P matrices (P, c, c) of a layer in
one batched call (their exact gradient in the bivectors: :func:`galinear.nn.dexp.exact_parity_blocks`); :func:`assemble_weight` scatters them, with alpha and the output scale,
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
from galinear.nn.functional._common import cached_table
from galinear.nn.functional.rotors import compose_rotors

__all__ = ["assemble_weight", "blocks_bivector_parts", "chunk_coordinates", "chunk_weight", "correlation_bivector_parts",
           "from_parity_order", "full_from_blocks", "parity_blocks", "parity_order", "part_tables"]


@cached_table
def part_tables(n: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(gather (C(n, 2), 2**n) long, signs (C(n, 2), 2**n, 2)) of :func:`galinear.blades.bivector_part_tables`
    as tensors: the bivector part m of a b~ (of b~ a) is sum_c signs[m, c, 0 (1)] a[gather[m, c]] b[c]."""
    from galinear.blades import bivector_part_tables

    gather, left, right = bivector_part_tables(n)
    tables = (torch.as_tensor(np.array(gather, dtype=np.int64), device=device),
              torch.as_tensor(np.stack([left, right], axis=-1).astype(np.float64), device=device).to(dtype))
    return tables


def correlation_bivector_parts(corr: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Bivector parts :math:`\langle a \tilde b\rangle_2`, :math:`\langle \tilde b a\rangle_2` summed
    over the pairs whose correlation :math:`\sum_t a_t b_t^\top` is ``corr`` (P, 2**n, 2**n); each (P, C(n, 2))."""
    d = corr.shape[-1]
    n = d.bit_length() - 1
    gather, signs = part_tables(n, corr.device, corr.dtype)
    if gather.shape[0] == 0:
        empty = corr.new_zeros(corr.shape[0], 0)
        return empty, empty
    picked = corr[:, gather, torch.arange(d, device=corr.device)]  # (P, M, d)
    parts = torch.einsum("pmd,mds->spm", picked, signs)
    return parts[0], parts[1]


@cached_table
def parity_order(n: int, device=None) -> torch.Tensor:
    """Shortlex positions of the even-grade blades, then of the odd-grade ones, (2**n,) long."""
    grades = blade_grades(n)
    order = torch.as_tensor(np.concatenate([np.flatnonzero(grades % 2 == 0), np.flatnonzero(grades % 2 == 1)]),
                            device=device)
    return order


@cached_table
def _parity_tables(n: int, device, dtype):
    """Gather index (2, h*h) and left/right signs (2, h*h) of the two parity blocks of the
    product matrices, the reverse signs (2**n,), and the (C(n, 2) * 2**n,) positions in the flat
    (2, h, h) blocks of the correlation entries that carry bivector parts."""
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
    return tables


def parity_blocks(left, right=None) -> torch.Tensor:
    r"""(P, 2, c/2, c/2): the even and odd blocks of the matrices of x -> R x S~ (n >= 1).

    A rotor is even, so :math:`x \mapsto R x` and :math:`x \mapsto x \tilde S` keep the parity of a
    blade: in the basis :func:`parity_order` (even blades, then odd) both are block diagonal, and
    the map is two products of c/2 x c/2 matrices (a quarter of one c x c product). Block q, entry
    (r, s) is M[b_q[r], b_q[s]] with b_q the shortlex positions of parity q.
    """
    VL, WL = left
    n = int(VL.shape[-1])  # a Python int under torch.jit.trace too
    P, h = VL.shape[0], 2 ** (n - 1)
    gather, left_sign, right_sign, reverse, _ = _parity_tables(n, VL.device, VL.dtype)
    rotor = compose_rotors(VL, WL)
    other = rotor if right is None else compose_rotors(*right)
    flat = gather.reshape(-1)
    a = rotor.index_select(-1, flat).view(P, 2, h * h).mul_(left_sign).view(P, 2, h, h)
    b = (other * reverse).index_select(-1, flat).view(P, 2, h * h).mul_(right_sign).view(P, 2, h, h)
    return a @ b


def full_from_blocks(blocks):
    """(P, c, c) block-diagonal matrices in the parity basis from :func:`parity_blocks`."""
    P, _, h, _ = blocks.shape
    out = blocks.new_zeros(P, 2 * h, 2 * h)
    out[:, :h, :h] = blocks[:, 0]
    out[:, h:, h:] = blocks[:, 1]
    return out


def from_parity_order(matrix, n):
    """Rows and columns of (..., 2**n, 2**n) matrices moved from the :func:`parity_order` basis to shortlex."""
    inverse = torch.argsort(parity_order(n, matrix.device))
    return matrix.index_select(-2, inverse).index_select(-1, inverse)


def blocks_bivector_parts(grad_blocks: torch.Tensor, blocks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    r"""The bivector parts :math:`\sum_t \langle G_t \tilde y_t\rangle_2`, :math:`\sum_t \langle \tilde y_t G_t\rangle_2`
    of the map whose parity blocks are ``blocks`` (P, 2, h, h), with ``grad_blocks`` = dL/d(blocks):
    only the parity blocks of :math:`\sum_t G_t y_t^\top = (dL/dM) M^\top` carry them."""
    P, _, h, _ = blocks.shape
    n = (2 * h).bit_length() - 1
    corr = grad_blocks.to(blocks.dtype) @ blocks.transpose(-1, -2)
    part_index = _parity_tables(n, blocks.device, blocks.dtype)[4]
    _, signs = part_tables(n, blocks.device, blocks.dtype)
    picked = corr.reshape(*corr.shape[:-4], P, 2 * h * h).index_select(-1, part_index)
    picked = picked.view(*corr.shape[:-4], P, signs.shape[0], 2 * h)
    parts = torch.einsum("...pmd,mds->s...pm", picked, signs)
    return parts[0], parts[1]


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
    n = int(index.shape[-1]).bit_length() - 1
    return index[:, parity_order(n, index.device)].reshape(-1)


def assemble_weight(weight, input_coordinates, output_coordinates, output_scale, in_features):
    """The layer's (out_features, in_features) matrix from :func:`chunk_weight` (overlapping chunks
    summed, rows scaled by ``output_scale``)."""
    weight = weight.new_zeros(weight.shape[0], in_features).index_add(1, input_coordinates, weight)
    weight = weight.new_zeros(output_scale.shape[0], in_features).index_add(0, output_coordinates, weight)
    return weight * output_scale.to(weight.dtype).unsqueeze(-1)
