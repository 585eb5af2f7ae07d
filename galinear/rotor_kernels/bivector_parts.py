r"""Numba kernel for the summed bivector parts that the exact gradient of a rotor map needs.

For a, b of shape (T, P, 2**n) (shortlex order, as the torch layers hold multivectors) it returns

.. math:: \sum_t \langle a_t \tilde b_t\rangle_2 \quad\text{and}\quad \sum_t \langle \tilde b_t a_t\rangle_2,

each (P, C(n, 2)), the same quantities as :func:`galinear.nn.dexp.bivector_parts`, whose
definition and sign tables (:func:`galinear.blades.bivector_part_tables`) this kernel reads.

Layout: a block of ``block`` tokens of one chunk pair is copied into two (2**n, block) buffers in
bitmask order, so the partner of row A for the bivector blade with bits m is row ``A ^ m`` and the
innermost loop runs over the block's tokens (SIMD). All C(n, 2) blades are accumulated from the
same resident buffers: one read of a and b from memory instead of one gather pass per blade.
Blocks are spread over threads; each block's sums are written to its own row and the rows are
added in a fixed order, so the result does not depend on the thread count.
"""
from __future__ import annotations

import numpy as np

from galinear._numba import jit, prange
from galinear.blades import bitmask_to_shortlex, bivector_pairs, bivector_part_tables, check_dimension, shortlex_bitmasks

__all__ = ["bivector_parts", "DEFAULT_BLOCK"]

#: Tokens per block: two float32 buffers of 2**11 x 8 coefficients are 128 KB (L2-resident).
DEFAULT_BLOCK = 8

_TABLES: dict = {}


def _tables(n: int, dtype):
    """(shortlex position of each bitmask, bitmask of each bivector blade, left and right signs
    indexed [blade, bitmask row]) for Euclidean Cl(n)."""
    key = (n, np.dtype(dtype).str)
    found = _TABLES.get(key)
    if found is None:
        _, left, right = bivector_part_tables(n)
        position = np.asarray(bitmask_to_shortlex(n), dtype=np.int64)
        pairs = np.asarray(bivector_pairs(n), dtype=np.int64).reshape(-1, 2)
        blades = (np.int64(1) << pairs[:, 0]) | (np.int64(1) << pairs[:, 1])
        # tables are indexed by shortlex position c; row A of the bitmask buffers is c = position[A]
        signs = np.stack([left[:, position], right[:, position]]).astype(dtype)  # (2, M, 2**n)
        assert np.array_equal(np.asarray(shortlex_bitmasks(n))[position], np.arange(2**n))
        found = (position, blades, np.ascontiguousarray(signs))
        _TABLES[key] = found
    return found


@jit(parallel=True, fastmath={"contract", "reassoc"})
def _parts_kernel(a, b, position, blades, signs, block, out):
    T, P, d = a.shape
    M = blades.shape[0]
    blocks = (T + block - 1) // block
    for job in prange(blocks * P):
        k = job // P
        p = job - k * P
        t0 = k * block
        count = min(block, T - t0)
        abuf = np.zeros((d, block), dtype=a.dtype)
        bbuf = np.zeros((d, block), dtype=a.dtype)
        for row in range(d):
            col = position[row]
            for t in range(count):
                abuf[row, t] = a[t0 + t, p, col]
                bbuf[row, t] = b[t0 + t, p, col]
        acc_left = np.empty(block, dtype=a.dtype)
        acc_right = np.empty(block, dtype=a.dtype)
        for m in range(M):
            mask = blades[m]
            acc_left[:] = 0
            acc_right[:] = 0
            for row in range(d):
                s_left = signs[0, m, row]
                s_right = signs[1, m, row]
                partner = row ^ mask
                for t in range(block):
                    product = abuf[partner, t] * bbuf[row, t]
                    acc_left[t] += s_left * product
                    acc_right[t] += s_right * product
            total_left = 0.0
            total_right = 0.0
            for t in range(block):
                total_left += acc_left[t]
                total_right += acc_right[t]
            out[k, p, 0, m] = total_left
            out[k, p, 1, m] = total_right


def bivector_parts(a: np.ndarray, b: np.ndarray, *, block: int = DEFAULT_BLOCK) -> tuple[np.ndarray, np.ndarray]:
    r"""(:math:`\sum_t \langle a_t \tilde b_t\rangle_2`, :math:`\sum_t \langle \tilde b_t a_t\rangle_2`),
    each (P, C(n, 2)), for float32 or float64 arrays a, b of shape (T, P, 2**n) in shortlex order."""
    if a.shape != b.shape or a.ndim != 3:
        raise ValueError(f"a and b must both be (T, P, 2**n), got {a.shape} and {b.shape}")
    if a.dtype != b.dtype or a.dtype not in (np.float32, np.float64):
        raise ValueError(f"a and b must share a float32 or float64 dtype, got {a.dtype} and {b.dtype}")
    if not (isinstance(block, (int, np.integer)) and block >= 1):
        raise ValueError(f"block must be a positive integer, got {block!r}")
    T, P, d = a.shape
    n = d.bit_length() - 1
    if 2**n != d:
        raise ValueError(f"the last axis must hold 2**n coefficients, got {d}")
    check_dimension(n)
    position, blades, signs = _tables(n, a.dtype)
    M = blades.shape[0]
    blocks = max((T + block - 1) // block, 1)
    out = np.zeros((blocks, P, 2, M), dtype=a.dtype)
    if T and M:
        _parts_kernel(np.ascontiguousarray(a), np.ascontiguousarray(b), position, blades, signs, int(block), out)
    total = out.sum(axis=0)  # fixed order over blocks
    return total[:, 0], total[:, 1]
