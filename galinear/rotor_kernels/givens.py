r"""Numba kernels of products of Givens layers (:class:`~galinear.nn.GivensLinear`'s chunk maps).

Pair p has G layers; layer l rotates by the angle :math:`\theta_{p,l}` each coordinate pair
(a, b) = (first[p, l, i], second[p, l, i]) of a perfect matching of the c coordinates:

.. math::

    z_a \leftarrow \cos\theta\, z_a - \sin\theta\, z_b, \qquad
    z_b \leftarrow \sin\theta\, z_a + \cos\theta\, z_b .

Rows x (T, P, c) are processed in blocks of ``BLOCK`` tokens, one pair at a time: the block is
copied transposed into a (c, BLOCK) buffer that stays in the L1/L2 cache, every layer runs over
it with the inner loop over tokens (contiguous, vectorised), and the result is copied back.
The kernels run on one thread: splitting the (block, pair) jobs over two threads was measured
slower (1.2-4x) on a two-core machine shared with other work.

The backward pass keeps nothing from the forward pass but its output y: walking the layers in
reverse it recovers :math:`z_{l-1} = R_l^\top z_l` (each layer is orthogonal, so this is exact up
to rounding), adds :math:`\partial L / \partial\theta_l = \langle g_l, S_l z_l\rangle` (with
:math:`S_l` the layer's skew generator, :math:`S z` = -z_b at a and z_a at b, since
:math:`dR/d\theta = S R`) and maps the gradient :math:`g_{l-1} = R_l^\top g_l`. Angle gradients
are summed per token within a layer, then per block in float64, the blocks added in a fixed order.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit

__all__ = ["BLOCK", "givens_forward", "givens_backward"]

#: Tokens per block (the width of the vectorised inner loop).
BLOCK = 64


@jit(fastmath={"contract"})
def givens_forward(x, cos, sin, first, second):
    """out (T, P, c): the G layers of pair p applied to each x[t, p, :]."""
    T, P, c = x.shape
    G, h = first.shape[1], first.shape[2]
    out = np.empty_like(x)
    blocks = (T + BLOCK - 1) // BLOCK
    for job in range(blocks * P):
        blk, p = job // P, job % P
        t0 = blk * BLOCK
        t1 = min(T, t0 + BLOCK)
        n = t1 - t0
        z = np.zeros((c, BLOCK), dtype=x.dtype)  # a short last block is padded with zeros
        for t in range(n):
            for k in range(c):
                z[k, t] = x[t0 + t, p, k]
        for layer in range(G):
            co, si = cos[p, layer], sin[p, layer]
            for i in range(h):
                a, b = first[p, layer, i], second[p, layer, i]
                for t in range(BLOCK):
                    za, zb = z[a, t], z[b, t]
                    z[a, t] = co * za - si * zb
                    z[b, t] = si * za + co * zb
        for t in range(n):
            for k in range(c):
                out[t0 + t, p, k] = z[k, t]
    return out


@jit(fastmath={"contract"})
def givens_backward(y, grad, cos, sin, first, second):
    """(grad_x (T, P, c), grad_angles (P, G) float64) from the forward output y and its gradient."""
    T, P, c = y.shape
    G, h = first.shape[1], first.shape[2]
    grad_x = np.empty_like(y)
    blocks = (T + BLOCK - 1) // BLOCK
    partial = np.zeros((blocks, P, G), dtype=np.float64)
    for job in range(blocks * P):
        blk, p = job // P, job % P
        t0 = blk * BLOCK
        t1 = min(T, t0 + BLOCK)
        n = t1 - t0
        z = np.zeros((c, BLOCK), dtype=y.dtype)  # padded rows stay zero and add nothing
        g = np.zeros((c, BLOCK), dtype=y.dtype)
        acc = np.empty(BLOCK, dtype=y.dtype)  # one layer's c/2 terms per token; layers and blocks summed in float64
        for t in range(n):
            for k in range(c):
                z[k, t] = y[t0 + t, p, k]
                g[k, t] = grad[t0 + t, p, k]
        for layer in range(G - 1, -1, -1):
            co, si = cos[p, layer], sin[p, layer]
            acc[:] = 0.0
            for i in range(h):
                a, b = first[p, layer, i], second[p, layer, i]
                for t in range(BLOCK):
                    za, zb = z[a, t], z[b, t]
                    ga, gb = g[a, t], g[b, t]
                    acc[t] += gb * za - ga * zb
                    z[a, t] = co * za + si * zb
                    z[b, t] = co * zb - si * za
                    g[a, t] = co * ga + si * gb
                    g[b, t] = co * gb - si * ga
            total = 0.0
            for t in range(BLOCK):
                total += acc[t]
            partial[blk, p, layer] = total
        for t in range(n):
            for k in range(c):
                grad_x[t0 + t, p, k] = g[k, t]
    grad_angles = np.zeros((P, G), dtype=np.float64)
    for blk in range(blocks):
        grad_angles += partial[blk]
    return grad_x, grad_angles
