r"""The ``"reversible"`` sandwich backend: torch operations only (CPU and CUDA), reversible backward.

One simple factor is :math:`R_j = a_j + s_j\, v_j w_j` with :math:`s_j = \operatorname{sinc}\theta_j`
and :math:`a_j = \cos\theta_j - s_j\,(v_j\cdot w_j)`, :math:`\theta_j = |v_j\wedge w_j|`, so

.. math::

    R_j z = a_j z + s_j\, L_v L_w z, \qquad z \tilde S_j = a_j z + s_j\, \mathcal{R}_v \mathcal{R}_w z,

with :math:`L_u z = u z` and :math:`\mathcal{R}_u z = z u` (each n signed permutations of the
coefficients). The map applies the factors of R, then those of :math:`\tilde S`, in the
coefficient-first layout (2**n, P, T) on tiles of T tokens through a few preallocated buffers,
and saves only its output y.

Backward walks the factors from the last to the first. :math:`L_u` and :math:`\mathcal{R}_u` are
self-adjoint (:math:`e_i e_i = 1`), so for an output gradient g:

- the input is recovered from the output by the inverse factor
  :math:`\tilde R_j = (a_j + 2 s_j\, v\cdot w) - s_j L_v L_w` (:math:`R_j \tilde R_j = 1`);
- the input gradient is :math:`a_j g + s_j L_w L_v g`;
- with :math:`u = L_w z_{in}`: :math:`\partial L/\partial a = \langle g, z_{in}\rangle`,
  :math:`\partial L/\partial v_i = s\,\langle g, e_i u\rangle`,
  :math:`\partial L/\partial s = \sum_i v_i \langle g, e_i u\rangle`,
  :math:`\partial L/\partial w_i = s\,\langle v g, e_i z_{in}\rangle` (right factors alike with
  products on the right); (a, s) are taken back to (v, w) by autograd through
  :func:`~galinear.nn.functional.rotors.simple_rotor_coefficients` on the (P, k) scalars only.

The extra memory is a few (2**n, P, B) buffers whatever the number of factors (measured in
docs/nn.md, "Backends"); recovering inputs costs one rounding error per factor, as in the numba
kernels of :mod:`galinear.nn.fast`.
"""
from __future__ import annotations

import torch
from torch.autograd.function import once_differentiable

from galinear.nn.functional.rotors import _vector_tables, simple_rotor_coefficients

__all__ = ["reversible_sandwich", "ReversibleSandwich"]


def _factor_scalars(V, W):
    """(a, s) of every factor, (P, k) each; see the module docstring."""
    cos, sinc = simple_rotor_coefficients(V, W)
    return cos - sinc * (V * W).sum(-1), sinc


def _coefficients(v, sign):
    """(n, d, P, 1) coefficients sign[i, c] v[p, i] of the product with v = sum_i v_i e_i."""
    return (v.t().unsqueeze(1) * sign.unsqueeze(-1)).unsqueeze(-1)


def _apply_vector(z, coefficient, gather, out, buffer):
    """out = sum_i coefficient[i] * z[gather[i]] (the product with one vector), through ``buffer``."""
    torch.index_select(z, 0, gather[0], out=out)
    out.mul_(coefficient[0])
    for i in range(1, gather.shape[0]):
        torch.index_select(z, 0, gather[i], out=buffer)
        out.addcmul_(buffer, coefficient[i])
    return out


def _gathered_inner(g, z, sign, gather, buffer):
    """(P, n): sum over coefficients and tokens of g * (e_i z) (or z e_i, with that side's signs)."""
    columns = []
    for i in range(gather.shape[0]):
        torch.index_select(z, 0, gather[i], out=buffer)
        buffer.mul_(g)
        columns.append((buffer.sum(-1) * sign[i].unsqueeze(-1)).sum(0))
    return torch.stack(columns, dim=-1)


class _Chain:
    """The factor list of one map: per factor (side, j), in the order they are applied."""

    def __init__(self, VL, WL, VR, WR, n, device, dtype):
        gather, left_sign, right_sign, _, _ = _vector_tables(n, device, dtype)
        self.gather, self.signs = gather, (left_sign, right_sign)
        self.VL, self.WL = VL, WL
        self.VR, self.WR = (VL, WL) if VR is None else (VR, WR)
        self.scalars = (_factor_scalars(VL, WL), _factor_scalars(self.VR, self.WR))
        k = VL.shape[-2]
        self.order = [(0, j) for j in reversed(range(k))] + [(1, j) for j in reversed(range(k))]

    def factor(self, side, j):
        V, W = (self.VL, self.WL) if side == 0 else (self.VR, self.WR)
        a, s = self.scalars[side]
        sign = self.signs[side]
        return V[:, j, :], W[:, j, :], a[:, j, None], s[:, j, None], sign


def _forward_chain(chain: _Chain, z):
    """Apply every factor to z (d, P, T) in place; returns z."""
    product, turned, buffer = torch.empty_like(z), torch.empty_like(z), torch.empty_like(z)
    for side, j in chain.order:
        v, w, a, s, sign = chain.factor(side, j)
        _apply_vector(z, _coefficients(w, sign), chain.gather, product, buffer)
        _apply_vector(product, _coefficients(v, sign), chain.gather, turned, buffer)
        z.mul_(a).addcmul_(turned, s.expand_as(turned))  # a z + s M_v M_w z
    return z


def _backward_chain(chain: _Chain, y, g):
    """Walk the factors backwards from the output y and its gradient g (both (d, P, T); both are
    overwritten). Returns (gradient of the input, {(side, j): (grad_a, grad_s, grad_v, grad_w)}).

    Buffers: besides y and g, three of their size (the recovered input, a product, a gather).
    """
    grads = {}
    z, work, other, buffer = y, torch.empty_like(y), torch.empty_like(y), torch.empty_like(y)
    for side, j in reversed(chain.order):
        v, w, a, s, sign = chain.factor(side, j)
        cv, cw = _coefficients(v, sign), _coefficients(w, sign)
        dot = (v * w).sum(-1)[:, None]
        # the input of the factor: (a + 2 s v.w) z - s M_v M_w z
        _apply_vector(z, cw, chain.gather, other, buffer)
        _apply_vector(other, cv, chain.gather, work, buffer)
        work.mul_(-s).addcmul_(z, (a + 2 * s * dot).expand_as(z))
        z_in = work
        spare = z  # the factor's output is no longer needed (y is a tile copy, free to overwrite)
        grad_a = torch.mul(g, z_in, out=buffer).sum((0, 2))
        _apply_vector(z_in, cw, chain.gather, other, buffer)  # u = M_w z_in
        inner_v = _gathered_inner(g, other, sign, chain.gather, buffer)  # <g, M_{e_i} u>
        grad_s = (inner_v * v).sum(-1)
        _apply_vector(g, cv, chain.gather, other, buffer)  # h = M_v g
        inner_w = _gathered_inner(other, z_in, sign, chain.gather, buffer)  # <h, M_{e_i} z_in>
        grads[(side, j)] = (grad_a, grad_s, s * inner_v, s * inner_w)
        # the gradient of the input: a g + s M_w M_v g
        _apply_vector(other, cw, chain.gather, spare, buffer)
        spare.mul_(s).addcmul_(g, a.expand_as(g))
        g, z, work, spare = spare, z_in, g, None
    return g, grads


def _stacked(grads, sides, k, item, axis):
    return sum(torch.stack([grads[(side, j)][item] for j in range(k)], axis) for side in sides)


#: Tokens are processed in tiles of at least this many coefficients (all chunk pairs together)
#: and at most an eighth of the batch, so that the work buffers stay a fraction of an activation.
TILE_ELEMENTS = 2**18


def _tiles(B: int, P: int, d: int):
    size = max(-(-B // 8), -(-TILE_ELEMENTS // (P * d)), 1)
    return [(start, min(start + size, B)) for start in range(0, B, size)]


class ReversibleSandwich(torch.autograd.Function):
    """y = R x S~ for x (B, P, 2**n) and factors (P, k, n) (VR = WR = None for S = R); only y is saved."""

    @staticmethod
    def forward(ctx, x, VL, WL, VR, WR):
        B, P, d = x.shape
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        with torch.no_grad():
            chain = _Chain(VL, WL, VR, WR, d.bit_length() - 1, x.device, x.dtype)
            for start, stop in _tiles(B, P, d):
                y[start:stop] = _forward_chain(chain, x[start:stop].permute(2, 1, 0).contiguous()).permute(2, 1, 0)
        ctx.single = VR is None
        ctx.save_for_backward(y, VL, WL, *(() if VR is None else (VR, WR)))
        return y

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        y, VL, WL, *right = ctx.saved_tensors
        VR, WR = (None, None) if ctx.single else right
        B, P, d = y.shape
        chain = _Chain(VL, WL, VR, WR, d.bit_length() - 1, y.device, y.dtype)
        grad_x = torch.empty_like(y)
        totals = {}
        for start, stop in _tiles(B, P, d):
            gt = grad_y[start:stop].to(y.dtype).permute(2, 1, 0).clone(memory_format=torch.contiguous_format)
            grad_xt, grads = _backward_chain(chain, y[start:stop].permute(2, 1, 0).contiguous(), gt)
            grad_x[start:stop] = grad_xt.permute(2, 1, 0)
            del gt, grad_xt
            for key, values in grads.items():
                totals[key] = values if key not in totals else tuple(a + b for a, b in zip(totals[key], values))
        out = [None, None, None, None]
        if any(ctx.needs_input_grad[1:]):
            k = VL.shape[-2]
            pairs = [(VL, WL)] if ctx.single else [(VL, WL), (VR, WR)]
            for index, (V, W) in enumerate(pairs):
                sides = (0, 1) if ctx.single else (index,)
                with torch.enable_grad():
                    V0, W0 = V.detach().requires_grad_(True), W.detach().requires_grad_(True)
                    a, s = _factor_scalars(V0, W0)
                    dV, dW = torch.autograd.grad(
                        (a, s), (V0, W0), (_stacked(totals, sides, k, 0, -1), _stacked(totals, sides, k, 1, -1))
                    )
                out[2 * index] = dV + _stacked(totals, sides, k, 2, -2)
                out[2 * index + 1] = dW + _stacked(totals, sides, k, 3, -2)
        return grad_x if ctx.needs_input_grad[0] else None, out[0], out[1], out[2], out[3]


def reversible_sandwich(x, VL, WL, VR=None, WR=None):
    """Backend function ``fn(x, VL, WL, VR, WR) -> y`` (x (..., P, 2**n), any device, float32/64)."""
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., P, 2**n), got {tuple(x.shape)}")
    lead, (P, d) = x.shape[:-2], x.shape[-2:]
    if VL.shape[-2] == 0:
        return x.clone()
    dtype = x.dtype
    VL, WL = VL.to(dtype), WL.to(dtype)
    if VR is not None:
        VR, WR = VR.to(dtype), WR.to(dtype)
    y = ReversibleSandwich.apply(x.reshape(-1, P, d), VL, WL, VR, WR)
    return y.reshape(*lead, P, d)
