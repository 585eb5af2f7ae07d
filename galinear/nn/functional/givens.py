r"""Products of Givens layers applied to rows, with an exact backward pass that keeps only the output.

:func:`givens_rotate` maps rows x (..., P, c) by pair p's G layers: layer l rotates, by the angle
:math:`\theta_{p,l}`, each coordinate pair (m[2i], m[2i+1]) of the matching m = matchings[p, l],
:math:`z \mapsto \cos\theta\, z + \sin\theta\, S z` with :math:`S z` = -z_b at a = m[2i] and z_a at
b = m[2i+1] (:math:`S^2 = -I` on each pair). The forward pass keeps no intermediate layer; the
backward pass recovers them from the output in reverse, :math:`z_{l-1} = R_l^\top z_l`, which is
exact up to rounding because every layer is orthogonal, and uses
:math:`\partial L/\partial\theta_l = \langle g_l, S z_l\rangle`, :math:`g_{l-1} = R_l^\top g_l`.
Memory: the input's size for the output, nothing per layer.

On the CPU in float32/float64 the numba kernels of :mod:`galinear.rotor_kernels.givens` run (blocks of
tokens transposed in the cache); elsewhere the same recurrences as torch gathers. While a call is
traced, exported or transformed (torch.compile, torch.export, torch.func) the layers run as plain
torch operations that autograd records layer by layer.
"""
from __future__ import annotations

import torch

from galinear.nn.functional._common import _capturing
from galinear.nn.functional.branches import _array
from galinear.nn.functional.plan import numba_kernels_usable

__all__ = ["givens_rotate", "matching_partners"]


def _kernel_usable(x) -> bool:
    """The numba kernels serve float32/float64 CPU tensors when numba compiles (the dispatcher's rule)."""
    return numba_kernels_usable(x, "givens")


def matching_partners(matchings: torch.Tensor, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """(partner, sign), each (P, G, c): layer l maps z to cos z + sin sign * z[partner]."""
    first, second = matchings[..., 0::2], matchings[..., 1::2]
    partner = torch.empty_like(matchings).scatter_(-1, first, second).scatter_(-1, second, first)
    ones = torch.ones(first.shape, dtype=dtype, device=matchings.device)
    sign = torch.empty(matchings.shape, dtype=dtype, device=matchings.device)
    sign.scatter_(-1, first, -ones).scatter_(-1, second, ones)
    return partner, sign


def _torch_layers(z, cos, sin, partner, sign):
    """Apply every layer to z (N, P, c) by gathers (differentiable where the caller records autograd)."""
    for layer in range(cos.shape[1]):
        moved = z.gather(-1, partner[:, layer].expand(z.shape[0], -1, -1))
        z = torch.addcmul(cos[:, layer, None] * z, sin[:, layer, None] * sign[:, layer], moved)
    return z


class _GivensRotate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, rows, angles, matchings):
        ctx.kernel = _kernel_usable(rows)
        cos, sin = torch.cos(angles).to(rows.dtype), torch.sin(angles).to(rows.dtype)
        if ctx.kernel:
            from galinear.rotor_kernels import givens as kernels

            first, second = matchings[..., 0::2], matchings[..., 1::2]
            out = torch.from_numpy(kernels.givens_forward(
                _array(rows), _array(cos), _array(sin), _array(first), _array(second)))
        else:
            partner, sign = matching_partners(matchings, rows.dtype)
            out = _torch_layers(rows, cos, sin, partner, sign)
        ctx.save_for_backward(out, angles, matchings)
        return out

    @staticmethod
    def backward(ctx, grad):
        out, angles, matchings = ctx.saved_tensors
        cos, sin = torch.cos(angles).to(out.dtype), torch.sin(angles).to(out.dtype)
        grad = grad.to(out.dtype)
        if ctx.kernel:
            from galinear.rotor_kernels import givens as kernels

            first, second = matchings[..., 0::2], matchings[..., 1::2]
            grad_rows, grad_angles = kernels.givens_backward(
                _array(out), _array(grad), _array(cos), _array(sin), _array(first), _array(second))
            return torch.from_numpy(grad_rows), torch.from_numpy(grad_angles).to(angles.dtype), None
        partner, sign = matching_partners(matchings, out.dtype)
        z, g = out, grad
        G = angles.shape[1]
        grad_angles = angles.new_zeros(angles.shape)
        for layer in range(G - 1, -1, -1):
            index = partner[:, layer].expand(z.shape[0], -1, -1)
            generated = z.gather(-1, index) * sign[:, layer]             # S z_l
            grad_angles[:, layer] = (g * generated).sum((0, 2))
            c, s = cos[:, layer, None], sin[:, layer, None] * sign[:, layer]
            z = torch.addcmul(c * z, -s, z.gather(-1, index))              # R_l^T z_l
            g = torch.addcmul(c * g, -s, g.gather(-1, index))              # R_l^T g_l
        return g, grad_angles, None


def givens_rotate(rows: torch.Tensor, angles: torch.Tensor, matchings: torch.Tensor) -> torch.Tensor:
    """Rows (..., P, c) mapped by pair p's Givens layers (module docstring); differentiable in rows
    and angles (P, G). ``matchings`` (P, G, c): a permutation of range(c) per pair and layer."""
    if matchings.shape != (*angles.shape, rows.shape[-1]) or rows.shape[-2] != angles.shape[0]:
        raise ValueError(f"givens_rotate: rows (..., P, c) {tuple(rows.shape)}, angles (P, G) {tuple(angles.shape)} "
                         f"and matchings (P, G, c) {tuple(matchings.shape)} disagree; pass matching shapes")
    lead = rows.shape[:-2]
    flat = rows.reshape(-1, *rows.shape[-2:])
    if _capturing():  # traced, exported or transformed: plain torch operations, autograd through every layer
        partner, sign = matching_partners(matchings, rows.dtype)
        cos, sin = torch.cos(angles).to(rows.dtype), torch.sin(angles).to(rows.dtype)
        out = _torch_layers(flat, cos, sin, partner, sign)
    else:
        out = _GivensRotate.apply(flat, angles, matchings)
    return out.reshape(*lead, *rows.shape[-2:])
