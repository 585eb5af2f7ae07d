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
count.

Only the map itself is computed: gradients of a sandwich need no kernel of their own (the input
gradient is the same map with the transposed factors, see :func:`galinear.nn.dexp.transposed_factors`).
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange
from galinear.blades import check_dimension, reorder_signs, shortlex_bitmasks
from galinear.rotor_kernels.factors import factor_coefficients

__all__ = [
    "DEFAULT_TILE",
    "default_tile",
    "factor_coefficients",
    "sandwich_forward",
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
# the map over a whole batch
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
