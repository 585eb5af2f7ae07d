r"""Numba kernels of a :class:`~galinear.nn.RotorNetwork` stage after its gadgets: the chunk sum,
the permutation, LayerNorm without affine parameters, PReLU and the weighted branch sum, one token
at a time (the definition is :mod:`galinear.nn.functional.branches`).

Inputs, for T tokens, B branches and K = S Kp chunk-pair coordinates per branch, held in S parts
of Kp (the layout of the batched products that computed them):

- ``y`` (S, T, B, Kp): the gadgets' chunk-pair outputs, coordinate k = s Kp + q at y[s, t, b, q];
  ``scale`` (B, K) their factors;
- ``slot`` (B, K): where coordinate k of branch b lands in the permuted hidden vector
  (:math:`\pi_b^{-1}` of its output coordinate), so that the chunk sum, the placement and the
  permutation are one scatter-add ``u[slot[b, k]] += scale[b, k] y[s, t, b, q]``;
- ``weights`` (B,), the PReLU slope and LayerNorm's epsilon.

Every token's vectors of H values stay in the L1 cache: the forward pass reads y once and writes
the output; the backward pass reads y and the output gradient once, recomputes the normalised
values (the same operations as the forward pass, so the same values), and writes the gradient
of y. Sums over tokens (the gradients of scale, weights and slope) are
accumulated per block of ``TOKENS_PER_JOB`` tokens and the blocks added in a fixed order, so the
result does not depend on the thread count. Means and variances are accumulated in float64.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange

__all__ = ["TOKENS_PER_JOB", "stage_forward", "stage_backward"]

#: Tokens per parallel job (and per partial sum of the token sums).
TOKENS_PER_JOB = 64

_FASTMATH = {"contract", "reassoc"}


@jit(fastmath=_FASTMATH)
def _normalise(u, y, t, b, scale_b, slot_b, eps):
    """u = the permuted chunk sum of token t and branch b, normalised in place; (mean, rstd)."""
    u[:] = 0
    Kp = y.shape[3]
    for s in range(y.shape[0]):
        y_t = y[s, t, b]
        base = s * Kp
        for q in range(Kp):
            u[slot_b[base + q]] += scale_b[base + q] * y_t[q]
    H = u.shape[0]
    total = 0.0
    for h in range(H):
        total += u[h]
    mean = total / H
    spread = 0.0
    for h in range(H):
        diff = u[h] - mean
        spread += diff * diff
    rstd = 1.0 / np.sqrt(spread / H + eps)
    for h in range(H):
        u[h] = (u[h] - mean) * rstd
    return mean, rstd


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _forward_kernel(y, scale, slot, weights, slope, eps, out):
    T, H = out.shape
    one = slope - slope + 1
    for job in prange((T + TOKENS_PER_JOB - 1) // TOKENS_PER_JOB):
        u = np.empty(H, dtype=y.dtype)
        for t in range(job * TOKENS_PER_JOB, min(T, (job + 1) * TOKENS_PER_JOB)):
            o = out[t]
            o[:] = 0
            for b in range(y.shape[2]):
                _normalise(u, y, t, b, scale[b], slot[b], eps)
                w = weights[b]
                for h in range(H):
                    v = u[h]
                    o[h] += w * v * (one if v > 0 else slope)


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _backward_kernel(y, scale, slot, weights, slope, eps, grad, grad_y, part_scale, part_weights, part_slope):
    S, T, B, Kp = y.shape
    H = grad.shape[1]
    per = TOKENS_PER_JOB
    jobs = (T + per - 1) // per
    for job in prange(jobs):
        u = np.empty(H, dtype=y.dtype)
        gu = np.empty(H, dtype=y.dtype)
        ps = part_scale[job]
        sum_slope = 0.0
        one = slope - slope + 1  # 1 and 0 of y's dtype
        zero = slope - slope
        for t in range(job * per, min(T, job * per + per)):
            g = grad[t]
            for b in range(B):
                _, r = _normalise(u, y, t, b, scale[b], slot[b], eps)
                w = weights[b]
                dot_w = 0.0
                sum_gn = 0.0
                sum_gnu = 0.0
                for h in range(H):
                    v = u[h]
                    gh = g[h]
                    d = one if v > 0 else slope  # PReLU's derivative (the slope at 0, as torch's)
                    dot_w += v * d * gh
                    ga = w * gh
                    sum_slope += ga * min(v, zero)
                    gn = ga * d
                    gu[h] = gn
                    sum_gn += gn
                    sum_gnu += gn * v
                part_weights[job, b] += dot_w
                mg = sum_gn / H
                mgu = sum_gnu / H
                for h in range(H):
                    gu[h] = r * (gu[h] - mg - u[h] * mgu)
                sb = scale[b]
                lb = slot[b]
                pb = ps[b]
                for s in range(S):
                    yt = y[s, t, b]
                    gy = grad_y[s, t, b]
                    base = s * Kp
                    for q in range(Kp):
                        value = gu[lb[base + q]]
                        gy[q] = value * sb[base + q]
                        pb[base + q] += value * yt[q]
        part_slope[job] = sum_slope


def _jobs(T: int) -> int:
    return (T + TOKENS_PER_JOB - 1) // TOKENS_PER_JOB


def stage_forward(y, scale, slot, weights, slope: float, eps: float, H: int):
    """out (T, H) of a stage (module docstring); arrays C-contiguous, y, scale and weights of one
    float dtype, slot int64 with values in 0..H-1."""
    out = np.empty((y.shape[1], H), dtype=y.dtype)
    _forward_kernel(y, scale, slot, weights, y.dtype.type(slope), eps, out)
    return out


def stage_backward(y, scale, slot, weights, slope: float, eps: float, grad):
    """(grad_y (S, T, B, Kp), grad_scale (B, K), grad_weights (B,), grad_slope) of a stage for the
    output gradient ``grad`` (T, H); the normalised values are recomputed from y."""
    S, T, B, Kp = y.shape
    K = S * Kp
    jobs = _jobs(T)
    grad_y = np.empty_like(y)
    part_scale = np.zeros((jobs, B, K), dtype=np.float64)
    part_weights = np.zeros((jobs, B), dtype=np.float64)
    part_slope = np.zeros(jobs, dtype=np.float64)
    _backward_kernel(y, scale, slot, weights, y.dtype.type(slope), eps, grad, grad_y, part_scale, part_weights,
                     part_slope)
    return grad_y, part_scale.sum(0), part_weights.sum(0), float(part_slope.sum())
