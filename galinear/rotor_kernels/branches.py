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

How the passes are laid out
---------------------------
Every loop over a token's values, except one per pass, runs over contiguous vectors in y's dtype
without branches, so that it vectorises: PReLU is a selected factor (NaN propagates), and
LayerNorm's mean and variance take one pass, accumulated in float64 around the vector's first
value x_0 (the variance as E[d^2] - E[d]^2 with d = x - x_0: since (x_0 - mean)^2 <= H variance,
its relative rounding is at most about H + 1 times float64's).

- When every branch's ``slot`` is a permutation (S Kp = H and no coordinate shares a slot, as with
  one chunk pair per gadget; and 4 H <= 2^16), each branch is normalised in the coordinates' own
  order, straight from y. The one
  indirect loop of the forward pass sums the weighted values of all branches, reading them
  through the inverse permutations, packed four branches to one index load
  (:func:`_packed_sources`); that of the backward pass reads the output gradient through
  ``slot``.
- Otherwise the scatter-add is computed as a gather (:func:`gather_plan`, built once per call):
  hidden coordinate h reads its first coordinate (the smallest k with slot k = h) at a fixed
  offset from the token's first value of y, times its factor (a hidden coordinate that no
  coordinate reaches reads any value of the token times 0), and the further coordinates of a
  slot (overlapping chunks, S Kp > H) are added after it in increasing k: every hidden value is
  the sum of the scatter-add in the same order, without clearing the vector first. The backward
  pass reads the hidden gradient through ``slot``.

The backward pass's reads through ``slot`` fill a contiguous vector first, loading the indices
of four coordinates at a time (:func:`_packed_slots`), so that the loops writing the gradient of
y vectorise.

The backward pass reads y and the output gradient once, recomputes the normalised values (the
same operations as the forward pass, so the same values), and writes the gradient of y in y's
order. Its sums over one token's values are accumulated in y's dtype; the sums over tokens (the
gradients of scale, weights and slope) are accumulated per block of ``TOKENS_PER_JOB`` tokens (the
scale gradient in y's dtype, the others in float64) and the blocks added in float64 in a fixed
order, so the result does not depend on the thread count.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange

__all__ = ["TOKENS_PER_JOB", "gather_plan", "stage_backward", "stage_forward"]

#: Tokens per parallel job (and per partial sum of the token sums).
TOKENS_PER_JOB = 64

_FASTMATH = {"contract", "reassoc"}


@jit
def _plan_kernel(slot, scale, H, Kp, part_stride, source, first_offset, first_factor, counts):
    """source[b, h]: the first coordinate k with slot k = h (-1: none), with its offset into the
    flat y and its factor; returns the further coordinates as (slot, offset, factor) arrays
    (B, E), in increasing k."""
    B, K = slot.shape
    source[:] = -1
    for b in range(B):
        for k in range(K):
            h = slot[b, k]
            if source[b, h] < 0:
                source[b, h] = k
            else:
                counts[b] += 1
    extra = 0
    for b in range(B):
        extra = max(extra, counts[b])
    extra_slot = np.zeros((B, extra), dtype=np.int64)
    extra_offset = np.zeros((B, extra), dtype=np.int64)
    extra_factor = np.zeros((B, extra), dtype=scale.dtype)
    for b in range(B):
        for h in range(H):
            k = source[b, h]
            if k < 0:
                first_offset[b, h] = 0
                first_factor[b, h] = 0
            else:
                first_offset[b, h] = (k // Kp) * part_stride + k % Kp
                first_factor[b, h] = scale[b, k]
        e = 0
        for k in range(K):
            h = slot[b, k]
            if source[b, h] != k:
                extra_slot[b, e] = h
                extra_offset[b, e] = (k // Kp) * part_stride + k % Kp
                extra_factor[b, e] = scale[b, k]
                e += 1
    return extra_slot, extra_offset, extra_factor


def gather_plan(slot, scale, H: int, y_shape):
    """The scatter-add of ``slot`` as a gather (module notes) for y of shape ``y_shape``:
    (source (B, H), first_offset (B, H), first_factor (B, H), extra_slot (B, E), extra_offset (B, E),
    extra_factor (B, E), counts (B,)); offsets are into y flattened, relative to y[0, t, b, 0].
    A branch with ``counts[b] == 0`` and S Kp = H has slot[b] a permutation, source[b] its inverse."""
    _, T, B, Kp = y_shape
    source = np.empty((B, H), dtype=np.int64)
    first_offset = np.empty((B, H), dtype=np.int64)
    first_factor = np.empty((B, H), dtype=scale.dtype)
    counts = np.zeros(B, dtype=np.int64)
    extra = _plan_kernel(slot, scale, H, Kp, T * B * Kp, source, first_offset, first_factor, counts)
    return (source, first_offset, first_factor, *extra, counts)


def _packed_sources(source, K: int):
    """packed (G, H) int64, G = ceil(B / 4): field j (bits 16 j to 16 j + 15) of packed[g, h] is
    j K + source[4 g + j, h], the place of hidden value h of branch 4 g + j among the normalised
    values of branches 4 g.. held one after another (one load of indices for four branches)."""
    B, H = source.shape
    G = (B + 3) // 4
    packed = np.zeros((G, H), dtype=np.int64)
    for b in range(B):
        g, j = divmod(b, 4)
        packed[g] |= (j * K + source[b]) << (16 * j)
    return packed


def _packed_slots(slot, H: int):
    """(B, K // 4) int64: field j (bits 16 j to 16 j + 15) of entry i of branch b is
    slot[b, 4 i + j] (one load of indices for four coordinates); (B, 0) for H > 2^16."""
    B, K = slot.shape
    if H > 1 << 16:
        return np.zeros((B, 0), dtype=np.int64)
    quads = slot[:, :K - K % 4].reshape(B, K // 4, 4).astype(np.int64)
    return quads[..., 0] | quads[..., 1] << 16 | quads[..., 2] << 32 | quads[..., 3] << 48


def _layout(slot, scale, H: int, y_shape, backward: bool = False, plan=None):
    """(permuted, packed, gather plan) of a call: ``permuted`` when every branch's slot is a
    permutation (S Kp = H) and 4 S Kp fits 16 bits; ``packed`` its sources
    (:func:`_packed_sources`), or for ``backward`` its packed slots (:func:`_packed_slots`), else
    an empty array. ``plan``: :func:`gather_plan` of the same arguments, when already built."""
    K = y_shape[0] * y_shape[3]
    plan = gather_plan(slot, scale, H, y_shape) if plan is None else plan
    permuted = K == H and 4 * K <= 1 << 16 and not plan[-1].any()
    if backward:
        return permuted, _packed_slots(slot, H), plan
    if not permuted:
        return permuted, np.zeros((0, 0), dtype=np.int64), plan
    return permuted, _packed_sources(plan[0], K), plan


@jit(fastmath=_FASTMATH)
def _gather(u, flat, base, first_offset, first_factor, extra_slot, extra_offset, extra_factor, count):
    """u = the permuted chunk sum of the token and branch whose first value is flat[base]."""
    for h in range(u.shape[0]):
        u[h] = first_factor[h] * flat[base + first_offset[h]]
    for e in range(count):
        u[extra_slot[e]] += extra_factor[e] * flat[base + extra_offset[e]]


@jit(fastmath=_FASTMATH)
def _scaled(z, y, t, b, scale_b):
    """z[k] = scale_b[k] y[s, t, b, q] for k = s Kp + q: the coordinates in their own order."""
    Kp = y.shape[3]
    for s in range(y.shape[0]):
        yt = y[s, t, b]
        base = s * Kp
        for q in range(Kp):
            z[base + q] = scale_b[base + q] * yt[q]


@jit(fastmath=_FASTMATH)
def _moments(u, eps, typed):
    """(mean, 1 / sqrt(variance + eps)) of u, accumulated in float64 around u[0], stored in
    typed[0] and typed[1] (y's dtype)."""
    H = u.shape[0]
    shift = np.float64(u[0])
    total = 0.0
    squares = 0.0
    for h in range(H):
        d = np.float64(u[h]) - shift
        total += d
        squares += d * d
    mean = total / H
    variance = max(squares / H - mean * mean, 0.0)
    typed[0] = shift + mean
    typed[1] = 1.0 / np.sqrt(variance + eps)


@jit(fastmath=_FASTMATH)
def _add_permuted(o, p, packed, arity, first):
    """o[h] (= if first, else +=) the sum over j < arity of p[field j of packed[h]]
    (:func:`_packed_sources`), one loop per arity so that the loads of a token are independent."""
    mask = 0xFFFF
    H = o.shape[0]
    if arity == 1:
        for h in range(H):
            a = p[packed[h] & mask]
            o[h] = a if first else o[h] + a
    elif arity == 2:
        for h in range(H):
            x = packed[h]
            a = p[x & mask] + p[(x >> 16) & mask]
            o[h] = a if first else o[h] + a
    elif arity == 3:
        for h in range(H):
            x = packed[h]
            a = p[x & mask] + p[(x >> 16) & mask] + p[(x >> 32) & mask]
            o[h] = a if first else o[h] + a
    else:
        for h in range(H):
            x = packed[h]
            a = p[x & mask] + p[(x >> 16) & mask] + p[(x >> 32) & mask] + p[(x >> 48) & mask]
            o[h] = a if first else o[h] + a


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _forward_kernel(y, flat, permuted, packed, first_offset, first_factor, extra_slot, extra_offset, extra_factor,
                    counts, scale, weights, slope, eps, out):
    S, T, B, Kp = y.shape
    H = out.shape[1]
    K = S * Kp
    row = B * Kp
    zero = slope - slope
    for job in prange((T + TOKENS_PER_JOB - 1) // TOKENS_PER_JOB):
        p = np.empty(B * K if permuted else H, dtype=out.dtype)
        typed = np.empty(2, dtype=out.dtype)
        for t in range(job * TOKENS_PER_JOB, min(T, (job + 1) * TOKENS_PER_JOB)):
            o = out[t]
            for b in range(B):
                positive = weights[b]
                negative = positive * slope
                if permuted:  # normalised in k's order, weighted; summed over the branches below
                    u = p[b * K:(b + 1) * K]
                    _scaled(u, y, t, b, scale[b])
                    _moments(u, eps, typed)
                    mean = typed[0]
                    rstd = typed[1]
                    for k in range(K):
                        v = (u[k] - mean) * rstd
                        u[k] = (positive if v > zero else negative) * v
                    continue
                _gather(p, flat, t * row + b * Kp, first_offset[b], first_factor[b], extra_slot[b],
                        extra_offset[b], extra_factor[b], counts[b])
                _moments(p, eps, typed)
                mean = typed[0]
                rstd = typed[1]
                if b == 0:
                    for h in range(H):
                        v = (p[h] - mean) * rstd
                        o[h] = (positive if v > zero else negative) * v
                else:
                    for h in range(H):
                        v = (p[h] - mean) * rstd
                        o[h] += (positive if v > zero else negative) * v
            if permuted:
                for g in range(packed.shape[0]):
                    _add_permuted(o, p[4 * g * K:], packed[g], min(4, B - 4 * g), g == 0)


@jit
def _read_slots(out, values, packed_b, slot_b):
    """out[k] = values[slot_b[k]], the indices of four coordinates at a time from packed_b
    (:func:`_packed_slots`), the rest one at a time."""
    for i in range(packed_b.shape[0]):
        x = packed_b[i]
        out[4 * i] = values[x & 0xFFFF]
        out[4 * i + 1] = values[(x >> 16) & 0xFFFF]
        out[4 * i + 2] = values[(x >> 32) & 0xFFFF]
        out[4 * i + 3] = values[(x >> 48) & 0xFFFF]
    for k in range(4 * packed_b.shape[0], slot_b.shape[0]):
        out[k] = values[slot_b[k]]


@jit(fastmath=_FASTMATH)
def _activation_backward(u, g, gu, mean, rstd, w, slope, typed):
    """u := its normalised values v (in place), gu := the gradient of the normalised values
    (w PReLU'(v) g, the slope at 0 as torch's PReLU); returns (sum PReLU(v) g, sum min(v, 0) g,
    sum gu, sum gu v), accumulated in u's dtype."""
    zero = slope - slope
    one = typed[3]
    w_negative = w * slope
    dot_w = zero
    grad_slope = zero
    sum_gn = zero
    sum_gnu = zero
    for h in range(u.shape[0]):
        v = (u[h] - mean) * rstd
        u[h] = v
        gh = g[h]
        positive = v > zero
        dot_w += gh * ((one if positive else slope) * v)
        grad_slope += gh * (zero if positive else v)
        gn = gh * (w if positive else w_negative)
        gu[h] = gn
        sum_gn += gn
        sum_gnu += gn * v
    return dot_w, grad_slope, sum_gn, sum_gnu


@jit(parallel=True, nogil=True, fastmath=_FASTMATH)
def _backward_kernel(y, flat, slot, scale, permuted, packed, first_offset, first_factor, extra_slot, extra_offset,
                     extra_factor, counts, weights, slope, eps, grad, grad_y, part_scale, part_weights, part_slope):
    S, T, B, Kp = y.shape
    H = grad.shape[1]
    K = S * Kp
    row = B * Kp
    per = TOKENS_PER_JOB
    jobs = (T + per - 1) // per
    for job in prange(jobs):
        u = np.empty(max(H, K), dtype=y.dtype)
        gu = np.empty(max(H, K), dtype=y.dtype)
        gz = np.empty(K, dtype=y.dtype)
        typed = np.empty(4, dtype=y.dtype)  # y's dtype: the moments, 1 / H and 1
        typed[2] = 1.0 / H
        typed[3] = 1.0
        inverse_h = typed[2]
        acc = np.zeros((B, K), dtype=y.dtype)  # the scale gradient of this job's tokens
        sum_slope = 0.0
        for t in range(job * per, min(T, job * per + per)):
            g = grad[t]
            for b in range(B):
                sb = scale[b]
                lb = slot[b]
                ab = acc[b]
                w = weights[b]
                if permuted:  # everything in k's order
                    _scaled(u, y, t, b, sb)
                    _moments(u, eps, typed)
                    mean = typed[0]
                    rstd = typed[1]
                    _read_slots(gz, g, packed[b], lb)
                    dot_w, grad_slope, sum_gn, sum_gnu = _activation_backward(u, gz, gu, mean, rstd, w, slope,
                                                                              typed)
                    part_weights[job, b] += dot_w
                    sum_slope += w * grad_slope
                    mg = sum_gn * inverse_h
                    mgu = sum_gnu * inverse_h
                    for s in range(S):
                        yt = y[s, t, b]
                        gy = grad_y[s, t, b]
                        base = s * Kp
                        for q in range(Kp):
                            value = rstd * (gu[base + q] - mg - u[base + q] * mgu)
                            gy[q] = value * sb[base + q]
                            ab[base + q] += value * yt[q]
                    continue
                uh = u[:H]
                guh = gu[:H]
                _gather(uh, flat, t * row + b * Kp, first_offset[b], first_factor[b], extra_slot[b],
                        extra_offset[b], extra_factor[b], counts[b])
                _moments(uh, eps, typed)
                mean = typed[0]
                rstd = typed[1]
                dot_w, grad_slope, sum_gn, sum_gnu = _activation_backward(uh, g, guh, mean, rstd, w, slope, typed)
                part_weights[job, b] += dot_w
                sum_slope += w * grad_slope
                mg = sum_gn * inverse_h
                mgu = sum_gnu * inverse_h
                for h in range(H):
                    guh[h] = rstd * (guh[h] - mg - uh[h] * mgu)
                _read_slots(gz, guh, packed[b], lb)
                for s in range(S):
                    yt = y[s, t, b]
                    gy = grad_y[s, t, b]
                    base = s * Kp
                    for q in range(Kp):
                        value = gz[base + q]
                        gy[q] = value * sb[base + q]
                        ab[base + q] += value * yt[q]
        for b in range(B):
            for k in range(K):
                part_scale[job, b, k] = acc[b, k]
        part_slope[job] = sum_slope


def _jobs(T: int) -> int:
    return (T + TOKENS_PER_JOB - 1) // TOKENS_PER_JOB


def stage_forward(y, scale, slot, weights, slope: float, eps: float, H: int, plan=None):
    """out (T, H) of a stage (module docstring); arrays C-contiguous, y, scale and weights of one
    float dtype, slot int64 with values in 0..H-1; ``plan``: :func:`gather_plan` of
    (slot, scale, H, y.shape) when the caller keeps it for the backward pass (built here if None)."""
    out = np.empty((y.shape[1], H), dtype=y.dtype)
    permuted, packed, plan = _layout(slot, scale, H, y.shape, plan=plan)
    _forward_kernel(y, y.reshape(-1), permuted, packed, *plan[1:], scale, weights, y.dtype.type(slope), eps, out)
    return out


def stage_backward(y, scale, slot, weights, slope: float, eps: float, grad, plan=None):
    """(grad_y (S, T, B, Kp), grad_scale (B, K), grad_weights (B,), grad_slope) of a stage for the
    output gradient ``grad`` (T, H); the normalised values are recomputed from y. ``plan``: the
    forward pass's :func:`gather_plan` (built here if None)."""
    S, T, B, Kp = y.shape
    K = S * Kp
    H = grad.shape[1]
    jobs = _jobs(T)
    grad_y = np.empty_like(y)
    part_scale = np.empty((jobs, B, K), dtype=np.float64)
    part_weights = np.zeros((jobs, B), dtype=np.float64)
    part_slope = np.zeros(jobs, dtype=np.float64)
    permuted, packed, plan = _layout(slot, scale, H, y.shape, backward=True, plan=plan)
    _backward_kernel(y, y.reshape(-1), slot, scale, permuted, packed, *plan[1:], weights, y.dtype.type(slope), eps,
                     grad, grad_y, part_scale, part_weights, part_slope)
    return grad_y, part_scale.sum(0), part_weights.sum(0), float(part_slope.sum())
