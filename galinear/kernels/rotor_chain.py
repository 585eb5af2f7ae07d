r"""Numba kernels for rotor sandwich maps :math:`y = R\,x\,\tilde S` applied factor by factor.

A rotor is handed over as factors (V, W) of shape (P, k, n):
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
from galinear.blades import check_dimension, reorder_signs, shortlex_bitmasks
from galinear.kernels.factors import factor_coefficient_grads, factor_coefficients

__all__ = [
    "DEFAULT_TILE",
    "default_tile",
    "factor_coefficients",
    "factor_coefficient_grads",
    "sandwich_forward",
    "sandwich_backward",
]

#: Default tokens per tile (fastest on the benchmark machine for float32 and float64: longer
#: rows amortise the per-row work, but the (2**n, tile) buffers must stay near the L2 cache).
DEFAULT_TILE = 64
#: Tiles are multiples of this many tokens: inner loops of this fixed length become SIMD code.
LANES = 16

_FASTMATH = {"contract"}  # allow fused multiply-add, nothing that reorders sums


# ----------------------------------------------------------------------------------------------
# building blocks on (2**n, T) tiles in bitmask order
# ----------------------------------------------------------------------------------------------
# e_i e_A = (-1)^{#bits of A below i} e_{A xor 2^i} (left) and e_A e_i = (-1)^{#bits of A above i}
# e_{A xor 2^i} (right). Both signs are unchanged by flipping bit i, so they can be indexed by the
# output row; they are tabulated once per (n, side) as signs[side, row, i] (0 in padding columns).


_SIGN_CACHE: dict = {}


def sign_tables(n: int, dtype) -> np.ndarray:
    """(2, 2**n, n_pad) signs of the products with e_i, side 0 = left (e_i z), 1 = right (z e_i).

    ``(e_i z)[row] = signs[0, row, i] * z[row ^ 2**i]`` in bitmask order; n_pad = n rounded up
    to a multiple of 4, padding columns are 0.
    """
    key = (n, np.dtype(dtype).str)
    table = _SIGN_CACHE.get(key)
    if table is None:
        D = 1 << n
        n_pad = (n + 3) // 4 * 4
        rows = np.arange(D, dtype=np.int64)
        table = np.zeros((2, D, n_pad), dtype=dtype)
        for i in range(n):  # the blade reordering signs of galinear.blades (Euclidean: e_i^2 = 1)
            table[0, :, i] = reorder_signs(np.int64(1 << i), rows, n)
            table[1, :, i] = reorder_signs(rows, np.int64(1 << i), n)
        table.setflags(write=False)
        _SIGN_CACHE[key] = table
    return table


@jit
def _scaled(vec, scale, out):
    """out[i] = scale * vec[i] for i < n, 0 in the padding."""
    n = vec.shape[0]
    for i in range(out.shape[0]):
        out[i] = scale * vec[i] if i < n else 0


@jit(fastmath=_FASTMATH)
def _vec_mul(dst, src, cv, signs, base, a, T):
    """dst = a * base + (c src), c the vector with padded coefficients ``cv``, multiplied on the
    side whose sign table is ``signs`` (D, n_pad): dst[row] = a base[row] +
    sum_i signs[row, i] cv[i] src[row ^ 2**i].

    ``a`` must have the arrays' dtype (a float64 scalar would promote the loop). Source rows
    are summed four at a time into the destination row (fewer passes over it).
    """
    D = dst.shape[0]
    n_pad = cv.shape[0]
    mask = D - 1
    for row in range(D):
        d = dst[row]
        b = base[row]
        sr = signs[row]
        for q in range(0, n_pad, 4):
            s0 = src[row ^ ((1 << q) & mask)]
            s1 = src[row ^ ((1 << (q + 1)) & mask)]
            s2 = src[row ^ ((1 << (q + 2)) & mask)]
            s3 = src[row ^ ((1 << (q + 3)) & mask)]
            c0 = sr[q] * cv[q]
            c1 = sr[q + 1] * cv[q + 1]
            c2 = sr[q + 2] * cv[q + 2]
            c3 = sr[q + 3] * cv[q + 3]
            if q == 0:
                for t in range(T):
                    d[t] = a * b[t] + ((c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t]))
            else:
                for t in range(T):
                    d[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
        if n_pad == 0:
            for t in range(T):
                d[t] = a * b[t]


@jit(fastmath=_FASTMATH)
def _vec_mul_pair(dst1, dst2, src, cv1, cv2, signs, T):
    """dst1 = c1 src and dst2 = c2 src (same side, see ``_vec_mul``): one pass over the sources."""
    D = dst1.shape[0]
    n_pad = cv1.shape[0]
    mask = D - 1
    for row in range(D):
        d1 = dst1[row]
        d2 = dst2[row]
        sr = signs[row]
        for q in range(0, n_pad, 4):
            s0 = src[row ^ ((1 << q) & mask)]
            s1 = src[row ^ ((1 << (q + 1)) & mask)]
            s2 = src[row ^ ((1 << (q + 2)) & mask)]
            s3 = src[row ^ ((1 << (q + 3)) & mask)]
            c0 = sr[q] * cv1[q]
            c1 = sr[q + 1] * cv1[q + 1]
            c2 = sr[q + 2] * cv1[q + 2]
            c3 = sr[q + 3] * cv1[q + 3]
            e0 = sr[q] * cv2[q]
            e1 = sr[q + 1] * cv2[q + 1]
            e2 = sr[q + 2] * cv2[q + 2]
            e3 = sr[q + 3] * cv2[q + 3]
            if q == 0:
                for t in range(T):
                    d1[t] = (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
                    d2[t] = (e0 * s0[t] + e1 * s1[t]) + (e2 * s2[t] + e3 * s3[t])
            else:
                for t in range(T):
                    d1[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
                    d2[t] += (e0 * s0[t] + e1 * s1[t]) + (e2 * s2[t] + e3 * s3[t])


@jit(fastmath={"contract", "reassoc"})
def _vec_mul_grad(dst, src, cv, signs, base, a, T, other, acc_vec):
    """As ``_vec_mul``, and also the inner products needed for gradients.

    ``acc_vec[i] += <other, e_i src>`` (sum over rows and tokens, e_i multiplied on the side of
    ``signs``). Returns (<base, other>, <dst, other>) summed over the tile.
    """
    D = dst.shape[0]
    n_pad = cv.shape[0]
    mask = D - 1
    dot_base = 0.0
    dot_dst = 0.0
    zero = a * 0  # in the arrays' dtype (a is a finite coefficient; dst may hold garbage)
    for row in range(D):
        d = dst[row]
        b = base[row]
        o = other[row]
        sr = signs[row]
        for t in range(T):
            d[t] = a * b[t]
        for q in range(0, n_pad, 4):
            s0 = src[row ^ ((1 << q) & mask)]
            s1 = src[row ^ ((1 << (q + 1)) & mask)]
            s2 = src[row ^ ((1 << (q + 2)) & mask)]
            s3 = src[row ^ ((1 << (q + 3)) & mask)]
            c0 = sr[q] * cv[q]
            c1 = sr[q + 1] * cv[q + 1]
            c2 = sr[q + 2] * cv[q + 2]
            c3 = sr[q + 3] * cv[q + 3]
            p0 = zero
            p1 = p0
            p2 = p0
            p3 = p0
            for t in range(T):
                d[t] += (c0 * s0[t] + c1 * s1[t]) + (c2 * s2[t] + c3 * s3[t])
                p0 += o[t] * s0[t]
                p1 += o[t] * s1[t]
                p2 += o[t] * s2[t]
                p3 += o[t] * s3[t]
            acc_vec[q] += sr[q] * p0
            acc_vec[q + 1] += sr[q + 1] * p1
            acc_vec[q + 2] += sr[q + 2] * p2
            acc_vec[q + 3] += sr[q + 3] * p3
        pb = zero
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
def _forward_kernel(x, VL, WL, aL, sL, VR, WR, aR, sR, perm, signs, consts, tile, out):
    """consts = [0, 1] in x's dtype; signs = sign_tables(n, dtype)."""
    B, P, D = x.shape
    zero = consts[0]
    one = consts[1]
    k = VL.shape[1]
    n_pad = signs.shape[2]
    n_bt = (B + tile - 1) // tile
    for job in prange(P * n_bt):
        p = job // n_bt
        b0 = (job % n_bt) * tile
        T = min(tile, B - b0)
        z = np.empty((D, tile), dtype=x.dtype)
        tmp = np.empty((D, tile), dtype=x.dtype)
        nxt = np.empty((D, tile), dtype=x.dtype)
        cv = np.empty(n_pad, dtype=x.dtype)
        _load_tile(z, x, p, b0, T, perm)
        # R_0 ... R_{k-1} z S~_{k-1} ... S~_0: innermost factors first
        for side in range(2):
            V = VL if side == 0 else VR
            W = WL if side == 0 else WR
            a = aL if side == 0 else aR
            s = sL if side == 0 else sR
            for j in range(k - 1, -1, -1):
                _scaled(W[p, j], one, cv)
                _vec_mul(tmp, z, cv, signs[side], z, zero, tile)
                _scaled(V[p, j], s[p, j], cv)
                _vec_mul(nxt, tmp, cv, signs[side], z, a[p, j], tile)
                z, nxt = nxt, z
        _store_tile(out, z, p, b0, T, perm)


@jit(fastmath=_FASTMATH)
def _factor_backward(z, g, tmp, h, z_in, g_in, v, w, a, s, signs, tile, cv, cw, acc_v, acc_w,
                     grads, gj, zero, one):
    """One factor f(z) = a z + s v(w z) (left) or a z + s (z w) v (right), walked backwards.

    On entry z is the factor's output and g the gradient there; on exit z_in holds its input,
    g_in the gradient there, and grads[gj] += (d a, d s, d v (n), d w (n)) for this tile.
    The inverse and the transpose are both a + s w(v .) (left) / a + s (. v) w (right).
    """
    n = v.shape[0]
    _scaled(v, one, cv)
    _scaled(w, one, cw)
    _vec_mul_pair(tmp, h, z, cv, cw, signs, tile)            # v z and w z in one pass
    _scaled(w, s, cw)
    _vec_mul(z_in, tmp, cw, signs, z, a, tile)               # z_in = a z + s w (v z)
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
    _, ds = _vec_mul_grad(h, g, cv, signs, g, zero, tile, tmp, acc_v)
    # g_in = a g + s w h;  acc_w[i] = <z_in, e_i h>;  d a = <g, z_in>
    da, _ = _vec_mul_grad(g_in, h, cw, signs, g, a, tile, z_in, acc_w)
    grads[gj, 0] += da
    grads[gj, 1] += ds
    for i in range(n):
        grads[gj, 2 + i] += s * acc_v[i]
        grads[gj, 2 + n + i] += s * acc_w[i]


@jit(parallel=True, fastmath=_FASTMATH)
def _backward_kernel(y, gy, VL, WL, aL, sL, VR, WR, aR, sR, perm, signs, consts, tile, gx, grads):
    """grads: (P * n_bt, 2, k, 2 + 2n) per-tile partial sums (side 0 = left, 1 = right)."""
    B, P, D = y.shape
    zero = consts[0]
    one = consts[1]
    k = VL.shape[1]
    n_pad = signs.shape[2]
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
        cv = np.empty(n_pad, dtype=y.dtype)
        cw = np.empty(n_pad, dtype=y.dtype)
        acc_v = np.empty(n_pad, dtype=np.float64)
        acc_w = np.empty(n_pad, dtype=np.float64)
        part = grads[job]
        _load_tile(z, y, p, b0, T, perm)
        _load_tile(g, gy, p, b0, T, perm)
        # forward order was: left j = k-1..0, then right j = k-1..0; walk it backwards
        for side in range(1, -1, -1):
            V = VL if side == 0 else VR
            W = WL if side == 0 else WR
            a = aL if side == 0 else aR
            s = sL if side == 0 else sR
            for j in range(k):
                _factor_backward(z, g, tmp, h, z2, g2, V[p, j], W[p, j], a[p, j], s[p, j],
                                 signs[side], tile, cv, cw, acc_v, acc_w, part[side], j, zero, one)
                z, z2 = z2, z
                g, g2 = g2, g
        _store_tile(gx, g, p, b0, T, perm)


# ----------------------------------------------------------------------------------------------
# public entry points (numpy in, numpy out)
# ----------------------------------------------------------------------------------------------
def default_tile(dtype, tokens: int) -> int:
    """Tokens per tile: DEFAULT_TILE, but no more than ``tokens`` rounded up to a multiple of
    LANES (a batch of one token is not padded to a whole tile)."""
    tile = DEFAULT_TILE
    needed = max(LANES, (int(tokens) + LANES - 1) // LANES * LANES)
    return int(min(tile, needed))


def check_arguments(x, VL, WL, VR, WR, name="x"):
    """Shape and dtype checks shared by the kernels; returns (B, P, n)."""
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
    return B, P, n


def _check(x, VL, WL, VR, WR, tile, name="x"):
    B, P, n = check_arguments(x, VL, WL, VR, WR, name)
    if tile is None:
        tile = default_tile(x.dtype, B)
    if isinstance(tile, bool) or not isinstance(tile, (int, np.integer)) or tile < 1 \
            or tile % LANES:
        raise ValueError(f"tile must be a positive multiple of {LANES} tokens, got {tile!r}")
    return B, P, n, int(tile)


def prepare_factors(dtype, VL, WL, VR, WR):
    """(VL, WL, aL, sL, VR, WR, aR, sR) contiguous in ``dtype``; VR = None means S = R."""
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
        Factors of the left rotors R_p (the rotor-factor convention of docs/nn.md).
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
    args = prepare_factors(x.dtype, VL, WL, VR, WR)
    out = np.empty_like(x)
    if B == 0 or P == 0:
        return out
    perm = np.ascontiguousarray(shortlex_bitmasks(n))
    _forward_kernel(x, *args, perm, sign_tables(n, x.dtype), np.array([0, 1], dtype=x.dtype), tile, out)
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
    y = np.ascontiguousarray(y)
    grad_y = np.ascontiguousarray(grad_y, dtype=y.dtype)
    args = prepare_factors(y.dtype, VL, WL, VR, WR)
    k = n // 2
    n_bt = (B + tile - 1) // tile
    gx = np.empty_like(y)
    parts = np.zeros((P * n_bt, 2, k, 2 + 2 * n), dtype=np.float64)
    if B > 0 and P > 0:
        perm = np.ascontiguousarray(shortlex_bitmasks(n))
        _backward_kernel(y, grad_y, *args, perm, sign_tables(n, y.dtype), np.array([0, 1], dtype=y.dtype),
                         tile, gx, parts)
    tot = parts.reshape(P, n_bt, 2, k, 2 + 2 * n).sum(axis=1)  # fixed order: independent of threads
    return finish_gradients(gx, tot, VL, WL, VR, WR)


def finish_gradients(gx, tot, VL, WL, VR, WR):
    """(grad_x, grad_VL, grad_WL, grad_VR, grad_WR) from the kernels' sums ``tot`` (P, 2, k, 2 + 2n)
    of (d a, d s, d v, d w) per factor; single rotor (VR None): left and right summed."""
    n = tot.shape[-1] // 2 - 1
    single = VR is None
    grads = []
    for side, (V, W) in enumerate(((VL, WL), (VR if not single else VL, WR if not single else WL))):
        t = tot[:, side]
        dV, dW = factor_coefficient_grads(V, W, t[..., 0], t[..., 1], t[..., 2:2 + n], t[..., 2 + n:])
        grads.append((dV, dW))
    (dVL, dWL), (dVR, dWR) = grads
    dtype = gx.dtype
    if single:
        return gx, (dVL + dVR).astype(dtype), (dWL + dWR).astype(dtype), None, None
    return gx, dVL.astype(dtype), dWL.astype(dtype), dVR.astype(dtype), dWR.astype(dtype)
