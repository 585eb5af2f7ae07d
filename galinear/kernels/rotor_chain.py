r"""Numba kernels for rotor sandwich maps :math:`y = R\,x\,\tilde S` applied factor by factor.

A rotor is handed over as factors (V, W) of shape (P, k, n) (contract C3):
:math:`b_j = v_j \wedge w_j`, :math:`\theta_j = |b_j|`,
:math:`R_j = \cos\theta_j + \operatorname{sinc}\theta_j\, b_j`, :math:`R = R_0 R_1 \cdots R_{k-1}`.
Since :math:`v \wedge w = v w - v \cdot w`, one factor is

.. math:: R_j = a_j + s_j\, v_j w_j,\qquad a_j = \cos\theta_j - \operatorname{sinc}\theta_j\,(v_j\cdot w_j),
          \quad s_j = \operatorname{sinc}\theta_j ,

so :math:`R_j z = a_j z + s_j\, v_j (w_j z)` and :math:`z \tilde S_j = a_j z + s_j (z w_j) v_j`.
A product with a vector is a sum of n signed permutations of the 2**n coefficients
(:math:`e_i e_A = \pm e_{A \oplus i}`), so one factor costs 2n multiply-adds per coefficient and
the whole map :math:`O(n^2 2^n)` per token instead of :math:`O(4^n)` for the dense matrix.

Layout: the kernel copies a tile of ``tile`` tokens of one chunk into a (2**n, tile) buffer in
bitmask order (blade A at row A), so every signed-permutation step is a contiguous multiply-add
over the tile's tokens, and the n rows feeding one output row are gathered while the output row
is accumulated (one load per multiply-add). Tiles of all chunks are spread over threads
(``prange``); every token is computed by the same sequence of operations whatever the thread
count, and parameter gradients are reduced per tile, then summed in a fixed order.

Backward (reversible): each factor is orthogonal (:math:`R_j \tilde R_j = 1`), so its input is
recomputed from its output by the inverse factor while walking the chain backwards; the extra
memory is a few (2**n, tile) buffers per thread, independent of the number of factors.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange
from galinear.blades import check_dimension, shortlex_bitmasks

__all__ = [
    "DEFAULT_TILE_BYTES",
    "default_tile",
    "factor_coefficients",
    "factor_coefficient_grads",
    "sandwich_forward",
    "sandwich_backward",
]

#: Bytes per buffer row: the default tile is 128 float32 or 64 float64 tokens (fastest on the
#: benchmark machine: longer rows amortise the per-row work, shorter ones leave the SIMD idle).
DEFAULT_TILE_BYTES = 512
#: Tiles are multiples of this many tokens: inner loops of this fixed length become SIMD code.
LANES = 16

_FASTMATH = {"contract"}  # allow fused multiply-add, nothing that reorders sums


# ----------------------------------------------------------------------------------------------
# scalar coefficients of the factors (numpy, float64)
# ----------------------------------------------------------------------------------------------
def _wedge_norm_sq(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """|v ^ w|^2 = sum_{i<j} (v_i w_j - v_j w_i)^2 (never negative, unlike |v|^2|w|^2-(v.w)^2)."""
    outer = v[..., :, None] * w[..., None, :]
    return 0.5 * ((outer - np.swapaxes(outer, -1, -2)) ** 2).sum(axis=(-1, -2))


_SERIES_Q = 1e-2  # below this theta**2, sinc and its derivative come from their Taylor series


def _sinc_and_derivative(q: np.ndarray):
    """sinc(sqrt q) and d sinc(sqrt q) / dq, finite and accurate at q = 0."""
    small = q < _SERIES_Q
    qs = np.where(small, 1.0, q)
    th = np.sqrt(qs)
    sinc_big = np.sin(th) / th
    dsinc_big = (th * np.cos(th) - np.sin(th)) / (2.0 * qs * th)
    sinc_small = 1 - q / 6 + q**2 / 120 - q**3 / 5040 + q**4 / 362880
    dsinc_small = -1 / 6 + q / 60 - q**2 / 1680 + q**3 / 90720 - q**4 / 7983360
    return np.where(small, sinc_small, sinc_big), np.where(small, dsinc_small, dsinc_big)


def factor_coefficients(V: np.ndarray, W: np.ndarray):
    r"""Scalars (a, s) of the factors :math:`R_j = a_j + s_j v_j w_j`, shape (P, k), float64.

    :math:`s = \operatorname{sinc}\theta`, :math:`a = \cos\theta - s\,(v\cdot w)`,
    :math:`\theta = |v \wedge w|`.
    """
    v = np.asarray(V, dtype=np.float64)
    w = np.asarray(W, dtype=np.float64)
    q = _wedge_norm_sq(v, w)
    sinc, _ = _sinc_and_derivative(q)
    a = np.cos(np.sqrt(q)) - sinc * (v * w).sum(-1)
    return a, sinc


def factor_coefficient_grads(V, W, grad_a, grad_s, grad_v, grad_w):
    """Chain rule from (a, s, v, w) taken as independent to the factors (V, W) alone.

    ``grad_v``/``grad_w`` are the gradients with a and s held fixed; returns (dV, dW), float64.
    """
    v = np.asarray(V, dtype=np.float64)
    w = np.asarray(W, dtype=np.float64)
    q = _wedge_norm_sq(v, w)
    vw = (v * w).sum(-1)
    sinc, dsinc = _sinc_and_derivative(q)
    # a = cos(sqrt q) - sinc(q) vw, s = sinc(q);  d cos(sqrt q)/dq = -sinc/2
    grad_q = grad_a * (-0.5 * sinc - vw * dsinc) + grad_s * dsinc
    grad_vw = -grad_a * sinc
    vv = (v * v).sum(-1)
    ww = (w * w).sum(-1)
    dq_dv = 2.0 * (ww[..., None] * v - vw[..., None] * w)
    dq_dw = 2.0 * (vv[..., None] * w - vw[..., None] * v)
    dV = grad_v + grad_q[..., None] * dq_dv + grad_vw[..., None] * w
    dW = grad_w + grad_q[..., None] * dq_dw + grad_vw[..., None] * v
    return dV, dW


# ----------------------------------------------------------------------------------------------
# building blocks on (2**n, T) tiles in bitmask order
# ----------------------------------------------------------------------------------------------
# Sign of e_i e_A (left) is (-1)^{#bits of A below i}; of e_A e_i (right) (-1)^{#bits of A above i}.
# Both are unchanged by flipping bit i, so they can be read off the output row index.


@jit
def _row_coefficients(row, vec, scale, right, coefs, signs, cols):
    """coefs[i] = signs[i] * scale * vec[i], signs[i] = +-1 and cols[i] = row ^ 2**i: output row
    ``row`` of a product with the vector ``vec`` is sum_i coefs[i] * src[cols[i]].
    Entries past n are zero padding."""
    n = vec.shape[0]
    parity_total = 0
    for i in range(n):
        parity_total ^= (row >> i) & 1
    below = 0
    for i in range(n):
        bit = (row >> i) & 1
        neg = (parity_total ^ below ^ bit) if right else below
        c = scale * vec[i]
        coefs[i] = -c if neg else c
        signs[i] = -1 if neg else 1
        cols[i] = row ^ (1 << i)
        below ^= bit
    for i in range(n, coefs.shape[0]):
        coefs[i] = 0
        signs[i] = 0
        cols[i] = row


@jit(fastmath=_FASTMATH)
def _vec_mul(dst, src, vec, scale, base, a, right, T):
    """dst = a * base + scale * (vec src)   (right=False)  or   (src vec)   (right=True).

    ``scale`` and ``a`` must have the arrays' dtype (a float64 scalar would promote the loop).
    Source rows are summed four at a time into the destination row (fewer passes over it).
    """
    D = dst.shape[0]
    n = vec.shape[0]
    n_pad = (n + 3) // 4 * 4
    coefs = np.empty(n_pad, dtype=dst.dtype)
    signs = np.empty(n_pad, dtype=dst.dtype)
    cols = np.empty(n_pad, dtype=np.int64)
    for row in range(D):
        _row_coefficients(row, vec, scale, right, coefs, signs, cols)
        d = dst[row]
        b = base[row]
        for q in range(0, n, 4):
            s0 = src[cols[q]]
            s1 = src[cols[q + 1]]
            s2 = src[cols[q + 2]]
            s3 = src[cols[q + 3]]
            c0 = coefs[q]
            c1 = coefs[q + 1]
            c2 = coefs[q + 2]
            c3 = coefs[q + 3]
            if q == 0:
                for t in range(T):
                    d[t] = a * b[t] + ((c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t]))
            else:
                for t in range(T):
                    d[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
        if n == 0:
            for t in range(T):
                d[t] = a * b[t]


@jit(fastmath=_FASTMATH)
def _vec_mul_pair(dst1, dst2, src, vec1, vec2, right, T, one):
    """dst1 = vec1 src and dst2 = vec2 src (or src vec1, src vec2): one pass over the sources."""
    D = dst1.shape[0]
    n = vec1.shape[0]
    n_pad = (n + 3) // 4 * 4
    coefs1 = np.empty(n_pad, dtype=dst1.dtype)
    coefs2 = np.empty(n_pad, dtype=dst1.dtype)
    signs = np.empty(n_pad, dtype=dst1.dtype)
    cols = np.empty(n_pad, dtype=np.int64)
    for row in range(D):
        _row_coefficients(row, vec1, one, right, coefs1, signs, cols)
        for i in range(n_pad):
            coefs2[i] = signs[i] * vec2[i] if i < n else 0
        d1 = dst1[row]
        d2 = dst2[row]
        for t in range(T):
            d1[t] = 0
            d2[t] = 0
        for q in range(0, n, 4):  # (n >= 2 whenever this runs: k = n // 2 factors)
            s0 = src[cols[q]]
            s1 = src[cols[q + 1]]
            s2 = src[cols[q + 2]]
            s3 = src[cols[q + 3]]
            c0 = coefs1[q]
            c1 = coefs1[q + 1]
            c2 = coefs1[q + 2]
            c3 = coefs1[q + 3]
            e0 = coefs2[q]
            e1 = coefs2[q + 1]
            e2 = coefs2[q + 2]
            e3 = coefs2[q + 3]
            for t in range(T):
                d1[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
                d2[t] += (e0 * s0[t] + e1 * s1[t]) + (e2 * s2[t] + e3 * s3[t])


@jit(fastmath={"contract", "reassoc"})
def _vec_mul_grad(dst, src, vec, scale, base, a, right, T, other, acc_vec):
    """As ``_vec_mul``, and also the inner products needed for gradients.

    ``acc_vec[i] += <other, e_i src>`` (sum over rows and tokens, e_i multiplied on the side
    given by ``right``). Returns (<base, other>, <dst, other>) summed over the tile.
    """
    D = dst.shape[0]
    n = vec.shape[0]
    n_pad = (n + 3) // 4 * 4
    coefs = np.empty(n_pad, dtype=dst.dtype)
    signs = np.empty(n_pad, dtype=dst.dtype)
    cols = np.empty(n_pad, dtype=np.int64)
    dot_base = 0.0
    dot_dst = 0.0
    for row in range(D):
        _row_coefficients(row, vec, scale, right, coefs, signs, cols)
        d = dst[row]
        b = base[row]
        o = other[row]
        for t in range(T):
            d[t] = a * b[t]
        for q in range(0, n, 4):
            s0 = src[cols[q]]
            s1 = src[cols[q + 1]]
            s2 = src[cols[q + 2]]
            s3 = src[cols[q + 3]]
            c0 = coefs[q]
            c1 = coefs[q + 1]
            c2 = coefs[q + 2]
            c3 = coefs[q + 3]
            p0 = d[0] * 0
            p1 = p0
            p2 = p0
            p3 = p0
            for t in range(T):
                d[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
                p0 += o[t] * s0[t]
                p1 += o[t] * s1[t]
                p2 += o[t] * s2[t]
                p3 += o[t] * s3[t]
            acc_vec[q] += signs[q] * p0
            acc_vec[q + 1] += signs[q + 1] * p1
            acc_vec[q + 2] += signs[q + 2] * p2
            acc_vec[q + 3] += signs[q + 3] * p3
        pb = d[0] * 0
        pd = pb
        for t in range(T):
            pb += b[t] * o[t]
            pd += d[t] * o[t]
        dot_base += pb
        dot_dst += pd
    return dot_base, dot_dst


@jit
def _load_tile(buf, x, p, b0, T, perm):
    """buf[perm[c], t] = x[b0 + t, p, c]; tokens past the batch are zero."""
    D = buf.shape[0]
    tile = buf.shape[1]
    for t in range(T):
        for c in range(D):
            buf[perm[c], t] = x[b0 + t, p, c]
    for t in range(T, tile):
        for c in range(D):
            buf[c, t] = 0.0


@jit
def _store_tile(out, buf, p, b0, T, perm):
    D = buf.shape[0]
    for t in range(T):
        for c in range(D):
            out[b0 + t, p, c] = buf[perm[c], t]


# ----------------------------------------------------------------------------------------------
# forward and backward over a whole batch
# ----------------------------------------------------------------------------------------------
@jit(parallel=True, fastmath=_FASTMATH)
def _forward_kernel(x, VL, WL, aL, sL, VR, WR, aR, sR, perm, consts, tile, out):
    """consts = [0, 1] in x's dtype."""
    B, P, D = x.shape
    zero = consts[0]
    one = consts[1]
    k = VL.shape[1]
    n_bt = (B + tile - 1) // tile
    for job in prange(P * n_bt):
        p = job // n_bt
        b0 = (job % n_bt) * tile
        T = min(tile, B - b0)
        z = np.empty((D, tile), dtype=x.dtype)
        tmp = np.empty((D, tile), dtype=x.dtype)
        nxt = np.empty((D, tile), dtype=x.dtype)
        _load_tile(z, x, p, b0, T, perm)
        # R_0 ... R_{k-1} z S~_{k-1} ... S~_0: innermost factors first
        for j in range(k - 1, -1, -1):
            _vec_mul(tmp, z, WL[p, j], one, z, zero, False, tile)
            _vec_mul(nxt, tmp, VL[p, j], sL[p, j], z, aL[p, j], False, tile)
            z, nxt = nxt, z
        for j in range(k - 1, -1, -1):
            _vec_mul(tmp, z, WR[p, j], one, z, zero, True, tile)
            _vec_mul(nxt, tmp, VR[p, j], sR[p, j], z, aR[p, j], True, tile)
            z, nxt = nxt, z
        _store_tile(out, z, p, b0, T, perm)


@jit(fastmath=_FASTMATH)
def _factor_backward(z, g, tmp, h, z_in, g_in, v, w, a, s, right, tile, acc_v, acc_w, grads, gj,
                     zero, one):
    """One factor f(z) = a z + s v(w z) (left) or a z + s (z w) v (right), walked backwards.

    On entry z is the factor's output and g the gradient there; on exit z_in holds its input,
    g_in the gradient there, and grads[gj] += (d a, d s, d v (n), d w (n)) for this tile.
    The inverse and the transpose are both a + s w(v .) (left) / a + s (. v) w (right).
    """
    n = v.shape[0]
    _vec_mul_pair(tmp, h, z, v, w, right, tile, one)              # v z and w z in one pass
    _vec_mul(z_in, tmp, w, s, z, a, right, tile)               # z_in = a z + s w (v z)
    # u = w z_in = a (w z) + s (w w)(v z),  w w = |w|^2
    ww = zero
    for i in range(n):
        ww += w[i] * w[i]
    sww = s * ww
    D = z.shape[0]
    for row in range(D):
        tr = tmp[row]
        hr = h[row]
        for t in range(tile):
            tr[t] = a * hr[t] + sww * tr[t]
    acc_v[:] = 0.0
    acc_w[:] = 0.0
    # h = v g;  acc_v[i] = <u, e_i g>;  d s = <h, u>
    _, ds = _vec_mul_grad(h, g, v, one, g, zero, right, tile, tmp, acc_v)
    # g_in = a g + s w h;  acc_w[i] = <z_in, e_i h>;  d a = <g, z_in>
    da, _ = _vec_mul_grad(g_in, h, w, s, g, a, right, tile, z_in, acc_w)
    grads[gj, 0] += da
    grads[gj, 1] += ds
    for i in range(n):
        grads[gj, 2 + i] += s * acc_v[i]
        grads[gj, 2 + n + i] += s * acc_w[i]


@jit(parallel=True, fastmath=_FASTMATH)
def _backward_kernel(y, gy, VL, WL, aL, sL, VR, WR, aR, sR, perm, consts, tile, gx, grads):
    """grads: (P * n_bt, 2, k, 2 + 2n) per-tile partial sums (side 0 = left, 1 = right)."""
    B, P, D = y.shape
    zero = consts[0]
    one = consts[1]
    k = VL.shape[1]
    n = VL.shape[2]
    n_bt = (B + tile - 1) // tile
    for job in prange(P * n_bt):
        p = job // n_bt
        b0 = (job % n_bt) * tile
        T = min(tile, B - b0)
        z = np.empty((D, tile), dtype=y.dtype)
        g = np.empty((D, tile), dtype=y.dtype)
        z2 = np.empty((D, tile), dtype=y.dtype)
        g2 = np.empty((D, tile), dtype=y.dtype)
        tmp = np.empty((D, tile), dtype=y.dtype)
        h = np.empty((D, tile), dtype=y.dtype)
        acc_v = np.empty(n + 4, dtype=np.float64)
        acc_w = np.empty(n + 4, dtype=np.float64)
        part = grads[job]
        _load_tile(z, y, p, b0, T, perm)
        _load_tile(g, gy, p, b0, T, perm)
        # forward order was: left j = k-1..0, then right j = k-1..0; walk it backwards
        for j in range(k):
            _factor_backward(z, g, tmp, h, z2, g2, VR[p, j], WR[p, j], aR[p, j], sR[p, j], True,
                             tile, acc_v, acc_w, part[1], j, zero, one)
            z, z2 = z2, z
            g, g2 = g2, g
        for j in range(k):
            _factor_backward(z, g, tmp, h, z2, g2, VL[p, j], WL[p, j], aL[p, j], sL[p, j], False,
                             tile, acc_v, acc_w, part[0], j, zero, one)
            z, z2 = z2, z
            g, g2 = g2, g
        _store_tile(gx, g, p, b0, T, perm)


# ----------------------------------------------------------------------------------------------
# public entry points (numpy in, numpy out)
# ----------------------------------------------------------------------------------------------
def default_tile(dtype, tokens: int) -> int:
    """Tokens per tile: DEFAULT_TILE_BYTES per row, but no more than ``tokens`` rounded up to
    a multiple of LANES (a batch of one token is not padded to a whole tile)."""
    tile = DEFAULT_TILE_BYTES // np.dtype(dtype).itemsize
    needed = max(LANES, (int(tokens) + LANES - 1) // LANES * LANES)
    return int(min(tile, needed))


def _check(x, VL, WL, VR, WR, tile, name="x"):
    if not isinstance(x, np.ndarray) or x.ndim != 3:
        raise ValueError(f"{name} must be a numpy array of shape (B, P, 2**n), got "
                         f"{getattr(x, 'shape', type(x))}")
    if x.dtype not in (np.float32, np.float64):
        raise TypeError(f"{name} must be float32 or float64, got {x.dtype}; cast it with .astype")
    B, P, D = x.shape
    n = D.bit_length() - 1
    if D < 1 or (1 << n) != D:
        raise ValueError(f"the last axis of {name} must be 2**n, got {D}")
    check_dimension(n)
    k = n // 2
    sides = [("left", VL, WL)] + ([("right", VR, WR)] if VR is not None or WR is not None else [])
    for side, V, W in sides:
        for label, arr in (("V", V), ("W", W)):
            if arr is None:
                raise ValueError(f"{side} rotor needs both V and W; got {label}=None")
            if np.shape(arr) != (P, k, n):
                raise ValueError(f"{side} {label} must have shape (P, k, n) = {(P, k, n)} for "
                                 f"{name} of shape {x.shape}, got {np.shape(arr)}")
    if tile is None:
        tile = default_tile(x.dtype, B)
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1 \
            or tile % LANES:
        raise ValueError(f"tile must be a positive multiple of {LANES} tokens, got {tile!r}")
    return B, P, n, int(tile)


def _prepare(dtype, VL, WL, VR, WR):
    if VR is None:
        VR, WR = VL, WL
    aL, sL = factor_coefficients(VL, WL)
    aR, sR = factor_coefficients(VR, WR)
    cast = [np.ascontiguousarray(arr, dtype=dtype) for arr in (VL, WL, aL, sL, VR, WR, aR, sR)]
    return cast


def sandwich_forward(x, VL, WL, VR=None, WR=None, *, tile=None):
    r"""y[b, p] = R_p x[b, p] S_p~ for a whole batch and every chunk pair, O(n^2 2^n) per token.

    Parameters
    ----------
    x : ndarray (B, P, 2**n), float32 or float64, shortlex coefficient order
    VL, WL : ndarray (P, k, n), k = n // 2
        Factors of the left rotors R_p (contract C3).
    VR, WR : ndarray (P, k, n) or None
        Factors of the right rotors S_p; None means S = R (single-rotor map R x R~).
    tile : int or None
        Tokens per tile, a multiple of LANES (16); changes speed only. None: :func:`default_tile`.

    Returns
    -------
    ndarray (B, P, 2**n) of x's dtype.
    """
    B, P, n, tile = _check(x, VL, WL, VR, WR, tile)
    x = np.ascontiguousarray(x)
    args = _prepare(x.dtype, VL, WL, VR, WR)
    out = np.empty_like(x)
    if B == 0 or P == 0:
        return out
    perm = np.ascontiguousarray(shortlex_bitmasks(n))
    _forward_kernel(x, *args, perm, np.array([0, 1], dtype=x.dtype), tile, out)
    return out


def sandwich_backward(y, grad_y, VL, WL, VR=None, WR=None, *, tile=None):
    """Gradients of a loss through ``y = sandwich_forward(x, VL, WL, VR, WR)``, from y alone.

    The input x is not needed: it is recomputed from y by the inverse factors (the map is
    orthogonal). Returns ``(grad_x, grad_VL, grad_WL, grad_VR, grad_WR)``; with VR = None
    (single rotor) the left and right contributions are summed into grad_VL, grad_WL and
    grad_VR = grad_WR = None.
    """
    B, P, n, tile = _check(y, VL, WL, VR, WR, tile, name="y")
    if not isinstance(grad_y, np.ndarray) or grad_y.shape != y.shape:
        raise ValueError(f"grad_y must be an array of y's shape {y.shape}, "
                         f"got {getattr(grad_y, 'shape', type(grad_y))}")
    single = VR is None
    y = np.ascontiguousarray(y)
    grad_y = np.ascontiguousarray(grad_y, dtype=y.dtype)
    args = _prepare(y.dtype, VL, WL, VR, WR)
    k = n // 2
    n_bt = (B + tile - 1) // tile
    gx = np.empty_like(y)
    parts = np.zeros((P * n_bt, 2, k, 2 + 2 * n), dtype=np.float64)
    if B > 0 and P > 0:
        perm = np.ascontiguousarray(shortlex_bitmasks(n))
        _backward_kernel(y, grad_y, *args, perm, np.array([0, 1], dtype=y.dtype), tile, gx, parts)
    tot = parts.reshape(P, n_bt, 2, k, 2 + 2 * n).sum(axis=1)  # fixed order: independent of threads
    grads = []
    for side, (V, W) in enumerate(((VL, WL), (VR if not single else VL, WR if not single else WL))):
        t = tot[:, side]
        dV, dW = factor_coefficient_grads(V, W, t[..., 0], t[..., 1], t[..., 2:2 + n], t[..., 2 + n:])
        grads.append((dV, dW))
    (dVL, dWL), (dVR, dWR) = grads
    dtype = y.dtype
    if single:
        return gx, (dVL + dVR).astype(dtype), (dWL + dWR).astype(dtype), None, None
    return gx, dVL.astype(dtype), dWL.astype(dtype), dVR.astype(dtype), dWR.astype(dtype)
