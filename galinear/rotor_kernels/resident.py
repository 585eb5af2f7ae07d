r"""Token-resident numba kernels for rotor sandwiches :math:`y = R\,x\,\tilde S` (one token at a time).

Same maths, factor convention, arguments and results as :mod:`galinear.rotor_kernels.rotor_chain`
(:math:`R_j z = a_j z + s_j\, v_j (w_j z)`, :math:`z \tilde S_j = a_j z + s_j (z w_j) v_j`), with
another memory layout. The tile kernel of ``rotor_chain`` applies every factor to a
(2**n, 64 tokens) tile in bitmask order and vectorises along tokens; at n = 11 that tile is
512 KB. Here one token's multivector (2**n coefficients: 8 KB in float32 at n = 11) is copied
into a buffer of length 2**n in bitmask order and ALL factors of both rotors are applied to it
while it sits in the L1 cache; the loops are vectorised along the coefficient axis.

Products with a vector, coefficient-major: :math:`(c z)[r] = \sum_i \sigma_i(r)\, c_i\, z[r \oplus 2^i]`.
For bit i the rows split into blocks of :math:`2^{i+1}`; the first half of a block pairs with the
second half, i.e. contiguous runs of length :math:`2^i`. With :math:`\tau(m) = (-1)^{\mathrm{popcount}(m)}`
the signs are

- left (:math:`e_i z`): :math:`\sigma_i(r) = \tau(r \bmod 2^i)`, the same run pattern in every block;
  with the source multiplied once by :math:`\tau` it becomes one sign per run, since
  :math:`\tau(t)\, z[b + t] = \tau(b)\, (\tau z)[b + t]` when b and t share no bit;
- right (:math:`z e_i`): :math:`\sigma_i(r) = \tau(\lfloor r / 2^{i+1} \rfloor)`, one sign per block.

Runs of length 1, 2 and 4 (bits 0, 1, 2) are too short to vectorise, so those three bits are
applied together on groups of 8 rows (a fixed pattern of 3 x 8 signs), after the long runs.

Parallel work: one job per (chunk pair, block of ``TOKENS_PER_JOB`` tokens); every token is
computed by the same operations whatever the thread count, so the bits do not depend on it.
A call with one token does no padding: the work is exactly one token's. As in ``rotor_chain``,
only the map itself is computed.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange
from galinear._switch_points import RESIDENT_MAX_TOKENS
from galinear.blades import shortlex_bitmasks
from galinear.rotor_kernels import rotor_chain

__all__ = ["RESIDENT_MAX_TOKENS", "TOKENS_PER_JOB", "sandwich_forward"]

#: Tokens per parallel job.
TOKENS_PER_JOB = 8

_FASTMATH = {"contract"}  # fused multiply-add, nothing that reorders sums

_TAU_CACHE: dict = {}


def tau_table(n: int, dtype) -> np.ndarray:
    """tau[m] = (-1)**popcount(m) for m < 2**n, in ``dtype`` (at least 8 entries)."""
    key = (n, np.dtype(dtype).str)
    table = _TAU_CACHE.get(key)
    if table is None:
        m = np.arange(max(1 << n, 8), dtype=np.int64)
        parity = np.zeros_like(m)
        while np.any(m):
            parity ^= m & 1
            m >>= 1
        table = (1 - 2 * parity).astype(dtype)
        table.setflags(write=False)
        _TAU_CACHE[key] = table
    return table


_PATTERN_CACHE: dict = {}


def low_bit_patterns(dtype) -> np.ndarray:
    """(2, 3, 8) signs sigma_i(u) of bits i = 0, 1, 2 within a group of 8 rows, side 0 = left.

    Left: tau(u mod 2**i); right: tau(u // 2**(i+1)), times tau(g // 8) for the group at row g.
    """
    key = np.dtype(dtype).str
    table = _PATTERN_CACHE.get(key)
    if table is None:
        tau = tau_table(3, np.float64)
        u = np.arange(8)
        table = np.array([[tau[u % (1 << i)] for i in range(3)],
                          [tau[u >> (i + 1)] for i in range(3)]], dtype=dtype)
        table.setflags(write=False)
        _PATTERN_CACHE[key] = table
    return table


@jit(fastmath=_FASTMATH)
def _vmul(dst, src, cv, scale, side, tab, base, a):
    """dst = a base + (c src), c = scale * cv a vector multiplied on the left (side 0) or the
    right (side 1); buffers (2**n,) in bitmask order; ``dst`` must not alias ``src``.

    Bits i >= 3: blocks of 2**(i+1) rows whose halves pair up (runs of 2**i, vectorised);
    bits 0, 1, 2 together on groups of 8 rows (:func:`_low_bits`).
    """
    tau, pat, signed = tab
    D = dst.shape[0]
    n = cv.shape[0]
    for r in range(D):
        dst[r] = a * base[r]
    lo = 3 if n >= 3 else 0
    if side == 0 and lo < n:
        # tau(t) src[blk + h + t] = tau(blk + h) signed[blk + h + t] with signed = tau * src
        # (t < 2**i has no bit in common with blk + h): one sign per run on both sides
        for r in range(D):
            signed[r] = tau[r] * src[r]
        runs = signed
    else:
        runs = src
    for i in range(lo, n):
        h = 1 << i
        c = scale * cv[i]
        for blk in range(0, D, 2 * h):
            if side == 0:
                c0 = c * tau[blk + h]
                c1 = c * tau[blk]
            else:
                c0 = c * tau[blk >> (i + 1)]
                c1 = c0
            _axpy(dst[blk:blk + h], runs[blk + h:blk + 2 * h], c0)
            _axpy(dst[blk + h:blk + 2 * h], runs[blk:blk + h], c1)
    if lo == 3:
        _low_bits(dst, src, scale * cv[0], scale * cv[1], scale * cv[2], pat[side], tau, side)


@jit(fastmath=_FASTMATH)
def _axpy(d, s, c):
    """d += c s (one contiguous run)."""
    for t in range(d.shape[0]):
        d[t] += c * s[t]


@jit(fastmath=_FASTMATH)
def _low_bits(dst, src, c0, c1, c2, ps, tau, side):
    """dst += (c_0 e_0 + c_1 e_1 + c_2 e_2) src on groups of 8 rows (signs ``ps`` (3, 8))."""
    D = dst.shape[0]
    for g in range(0, D, 8):
        gs = tau[g >> 3] if side == 1 else tau[0]
        e0 = gs * c0
        e1 = gs * c1
        e2 = gs * c2
        for u in range(8):
            dst[g + u] += (e0 * ps[0, u]) * src[g + (u ^ 1)] + (e1 * ps[1, u]) * src[g + (u ^ 2)] \
                + (e2 * ps[2, u]) * src[g + (u ^ 4)]


@jit(fastmath=_FASTMATH)
def _forward_token(z, nxt, tmp, VL, WL, aL, sL, VR, WR, aR, sR, p, tab, zero, one):
    """All factors of both rotors on one token z (bitmask order); returns the buffer holding y."""
    k = VL.shape[1]
    for side in range(2):
        V = VL if side == 0 else VR
        W = WL if side == 0 else WR
        a = aL if side == 0 else aR
        s = sL if side == 0 else sR
        for j in range(k - 1, -1, -1):
            _vmul(tmp, z, W[p, j], one, side, tab, z, zero)
            _vmul(nxt, tmp, V[p, j], s[p, j], side, tab, z, a[p, j])
            z, nxt = nxt, z
    return z


@jit(parallel=True, fastmath=_FASTMATH)
def _forward_kernel(x, VL, WL, aL, sL, VR, WR, aR, sR, perm, tau, pat, consts, per_job, out):
    B, P, D = x.shape
    zero = consts[0]
    one = consts[1]
    n_bj = (B + per_job - 1) // per_job
    for job in prange(P * n_bj):
        p = job // n_bj
        b0 = (job % n_bj) * per_job
        tab = (tau, pat, np.empty(D, dtype=x.dtype))
        z = np.empty(D, dtype=x.dtype)
        nxt = np.empty(D, dtype=x.dtype)
        tmp = np.empty(D, dtype=x.dtype)
        for b in range(b0, min(B, b0 + per_job)):
            for c in range(D):
                z[perm[c]] = x[b, p, c]
            y = _forward_token(z, nxt, tmp, VL, WL, aL, sL, VR, WR, aR, sR, p, tab, zero, one)
            for c in range(D):
                out[b, p, c] = y[perm[c]]


_PERM_CACHE: dict = {}


def _perm(n: int) -> np.ndarray:
    perm = _PERM_CACHE.get(n)
    if perm is None:
        perm = np.ascontiguousarray(shortlex_bitmasks(n), dtype=np.int64)
        _PERM_CACHE[n] = perm
    return perm


def _tables(n, dtype):
    return _perm(n), tau_table(n, dtype), low_bit_patterns(dtype), _consts(dtype)


_CONSTS = {}


def _consts(dtype):
    key = np.dtype(dtype).str
    if key not in _CONSTS:
        _CONSTS[key] = np.array([0, 1], dtype=dtype)
    return _CONSTS[key]


def sandwich_forward(x, VL, WL, VR=None, WR=None):
    r"""y[b, p] = R_p x[b, p] S_p~, token by token; arguments and result as
    :func:`galinear.rotor_kernels.rotor_chain.sandwich_forward` (no ``tile``: nothing is padded)."""
    B, P, n = rotor_chain.check_arguments(x, VL, WL, VR, WR)
    x = np.ascontiguousarray(x)
    args = rotor_chain.prepare_factors(x.dtype, VL, WL, VR, WR)
    out = np.empty_like(x)
    if B == 0 or P == 0:
        return out
    _forward_kernel(x, *args, *_tables(n, x.dtype), TOKENS_PER_JOB, out)
    return out
