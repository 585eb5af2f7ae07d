r"""Float64 numpy references for tests: the geometric product, the reverse and rotor maps, built
from the bitmask routines of :mod:`galinear.blades` only (no decomposition, no kernel, no torch).

One map, :func:`reference_sandwich` (y = R x S~), with rotors given as multivectors or as chains
R = R_0 R_1 ... R_{k-1} of them; :func:`reference_rotor_map` builds the rotors from bivectors
(``scipy.linalg.expm``) or from factor vectors (the convention of docs/nn.md) and applies it.
Products run blade by blade over the sparser operand, so a chain of simple factors costs
O(k C(n, 2) 2**n) per token and n up to 20 works.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear.blades import (
    bitmask_to_shortlex,
    bivector_pairs,
    blade_grades,
    check_dimension,
    reorder_signs,
    shortlex_bitmasks,
)

__all__ = [
    "as_float64",
    "reference_gp",
    "reference_reverse",
    "rotor_from_rows",
    "reference_sandwich",
    "reference_rotor_map",
    "reference_factor_map",
    "relative_error",
    "random_factor_case",
    "transposed_map_factors",
]


def as_float64(a) -> np.ndarray:
    """A float64 numpy copy of an array, a nested list or a torch tensor (detached, on the CPU)."""
    if hasattr(a, "detach"):
        a = a.detach().cpu().double().numpy()
    return np.asarray(a, dtype=np.float64)


def _metric(metric, dim: int) -> tuple[int, ...]:
    n = dim.bit_length() - 1
    if dim != 1 << n:
        raise ValueError(f"the last axis must have length 2**n, got {dim}")
    if metric is None:
        metric = n
    if isinstance(metric, (int, np.integer)):
        metric = (1,) * check_dimension(int(metric))
    metric = tuple(int(m) for m in metric)
    if len(metric) != n:
        raise ValueError(f"a metric of {len(metric)} squares does not fit multivectors of length {dim}")
    if any(m not in (-1, 0, 1) for m in metric):
        raise ValueError(f"metric entries must be +1, -1 or 0, got {metric}")
    return metric


@lru_cache(maxsize=2048)
def _blade_times_all(metric: tuple[int, ...], position: int, left: bool) -> tuple[np.ndarray, np.ndarray]:
    """(targets, signs) of e_p e_j for every blade j (left=True) or of e_j e_p (left=False):
    e_p e_j = signs[j] e_targets[j]. For a fixed p, j -> targets[j] is a permutation."""
    n = len(metric)
    masks = shortlex_bitmasks(n).astype(np.int64)
    mask = masks[position]
    signs = (reorder_signs(mask, masks, n) if left else reorder_signs(masks, mask, n)).astype(np.float64)
    common = masks & mask
    for i, square in enumerate(metric):
        if square != 1:
            signs = np.where((common >> i) & 1, signs * square, signs)
    targets = bitmask_to_shortlex(n)[masks ^ mask]
    targets.setflags(write=False)
    signs.setflags(write=False)
    return targets, signs


def reference_gp(a, b, metric=None) -> np.ndarray:
    """The geometric product a b of multivectors (..., 2**n) in shortlex order, in float64.

    ``metric``: None or n (Euclidean Cl(n)), or the tuple of squares of the basis vectors.
    Batch axes broadcast; the sum runs over the nonzero blades of the sparser operand.
    """
    a, b = as_float64(a), as_float64(b)
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"operands of different algebras: last axes {a.shape[-1]} and {b.shape[-1]}")
    metric = _metric(metric, a.shape[-1])
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1]) + a.shape[-1:]
    a, b = np.broadcast_to(a, shape), np.broadcast_to(b, shape)
    out = np.zeros(shape)
    batch = tuple(range(len(shape) - 1))
    used_a = np.flatnonzero(np.any(a != 0, axis=batch))
    used_b = np.flatnonzero(np.any(b != 0, axis=batch))
    if used_a.size <= used_b.size:
        for i in used_a.tolist():
            targets, signs = _blade_times_all(metric, i, True)
            out[..., targets] += a[..., i, None] * signs * b
    else:
        for j in used_b.tolist():
            targets, signs = _blade_times_all(metric, j, False)
            out[..., targets] += a * signs * b[..., j, None]
    return out


def reference_reverse(x) -> np.ndarray:
    """The reverse x~ of multivectors (..., 2**n): grade r times (-1)**(r (r - 1) / 2)."""
    x = as_float64(x)
    grades = blade_grades(x.shape[-1].bit_length() - 1)
    return x * np.where((grades * (grades - 1) // 2) % 2 == 1, -1.0, 1.0)


def rotor_from_rows(rows, n: int) -> np.ndarray:
    """Multivectors (..., 2**n) from rows (..., 1 + C(n, 2)): the scalar, then the bivector
    coefficients in :func:`galinear.blades.bivector_pairs` order."""
    rows = as_float64(rows)
    pairs = bivector_pairs(n)
    if rows.shape[-1] != 1 + len(pairs):
        raise ValueError(f"rows of Cl({n}) rotors need 1 + C(n, 2) = {1 + len(pairs)} entries, got {rows.shape[-1]}")
    out = np.zeros(rows.shape[:-1] + (1 << n,))
    out[..., 0] = rows[..., 0]
    out[..., bitmask_to_shortlex(n)[(1 << pairs[:, 0]) | (1 << pairs[:, 1])]] = rows[..., 1:]
    return out


def reference_sandwich(x, left, right=None, metric=None) -> np.ndarray:
    r"""y = R x S~ in float64 (S = R when ``right`` is None).

    ``left`` and ``right``: a multivector array (..., 2**n), or a list [R_0, ..., R_{k-1}] of them
    standing for the product R = R_0 R_1 ... R_{k-1} (applied one factor at a time, which keeps
    each product sparse). Batch axes broadcast against x's.
    """
    left = list(left) if isinstance(left, (list, tuple)) else [left]
    right = left if right is None else (list(right) if isinstance(right, (list, tuple)) else [right])
    y = as_float64(x)
    for R in reversed(left):
        y = reference_gp(R, y, metric)
    for S in reversed(right):  # (R_0 ... R_{k-1})~ = R_{k-1}~ ... R_0~
        y = reference_gp(y, reference_reverse(S), metric)
    return y


def _bivector_rotor(bivectors, n: int) -> np.ndarray:
    """exp(B) = expm(L_B) 1, L_B the matrix of left multiplication by B (Euclidean Cl(n))."""
    import scipy.linalg

    B = rotor_from_rows(np.concatenate([np.zeros(bivectors.shape[:-1] + (1,)), bivectors], axis=-1), n)
    d = 1 << n
    metric = (1,) * n
    L = np.zeros(B.shape[:-1] + (d, d))
    columns = np.arange(d)
    for i in np.flatnonzero(np.any(B != 0, axis=tuple(range(B.ndim - 1)))).tolist():
        targets, signs = _blade_times_all(metric, i, True)
        L[..., targets, columns] += B[..., i, None] * signs
    return scipy.linalg.expm(L)[..., :, 0]


def _factor_rotors(V, W) -> list[np.ndarray]:
    """The simple rotors R_j = cos t + sin t / t (v_j ^ w_j), t = |v_j ^ w_j|, of factor vectors
    V, W (..., k, n): R = R_0 R_1 ... R_{k-1}."""
    V, W = as_float64(V), as_float64(W)
    if V.shape != W.shape or V.ndim < 2:
        raise ValueError(f"factor vectors V and W need one shape (..., k, n), got {V.shape} and {W.shape}")
    n = V.shape[-1]
    i, j = bivector_pairs(n).T
    b = V[..., i] * W[..., j] - V[..., j] * W[..., i]
    theta = np.sqrt((b * b).sum(-1, keepdims=True))
    rows = np.concatenate([np.cos(theta), np.sinc(theta / np.pi) * b], axis=-1)
    return [rotor_from_rows(rows[..., k, :], n) for k in range(V.shape[-2])]


def reference_rotor_map(x, left, right=None) -> np.ndarray:
    r"""y = R x S~ in float64 numpy, the rotors built independently of galinear's decomposition
    and rotor code (Euclidean Cl(n)); arrays or tensors.

    ``left`` and ``right`` (S = R when None): bivectors (P, C(n, 2)), R = exp(B) through
    ``scipy.linalg.expm`` of the matrix of left multiplication by B (for small n), or a pair
    ``(V, W)`` of factor vectors (P, k, n), R = R_0 ... R_{k-1} with
    R_j = cos t + sin t / t (v_j ^ w_j), t = |v_j ^ w_j| (docs/nn.md; any n). x (T, P, 2**n).
    """
    x = as_float64(x)
    n = x.shape[-1].bit_length() - 1

    def rotors(spec):
        if isinstance(spec, tuple):
            if len(spec) != 2:
                raise ValueError(f"factors are a pair (V, W), got a tuple of {len(spec)}")
            return _factor_rotors(*spec)
        return [_bivector_rotor(as_float64(spec), n)]

    R = rotors(left)
    return reference_sandwich(x, R, None if right is None else rotors(right))


def reference_factor_map(x, factors) -> np.ndarray:
    """:func:`reference_rotor_map` of factor arrays in the kernels' order: [VL, WL] (y = R x R~)
    or [VL, WL, VR, WR] (y = R x S~)."""
    if len(factors) not in (2, 4):
        raise ValueError(f"factors are [VL, WL] or [VL, WL, VR, WR], got {len(factors)} arrays")
    return reference_rotor_map(x, tuple(factors[:2]), tuple(factors[2:]) or None)


def relative_error(a, b) -> float:
    """Norm-wise relative error ||a - b|| / ||b|| in float64 (||a - b|| when b is zero)."""
    a, b = as_float64(a), as_float64(b)
    scale = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / (scale if scale > 0 else 1.0))


def random_factor_case(rng, n: int, tokens: int, pairs: int, dtype=np.float64, double: bool = False):
    """x (tokens, pairs, 2**n) ~ N(0, 1) and the factor arrays [VL, WL] (or [VL, WL, VR, WR] with
    ``double``) of shape (pairs, n // 2, n), entries N(0, 1/n) so angles are of order 1."""
    k = n // 2
    x = rng.standard_normal((tokens, pairs, 1 << n)).astype(dtype)
    factors = [(rng.standard_normal((pairs, k, n)) / np.sqrt(n)).astype(dtype) for _ in range(4 if double else 2)]
    return x, factors


def transposed_map_factors(factors):
    """Factors of the transposed map y -> R~ y S of y = R x S~: each rotor reversed (order of its
    factors flipped, v and w swapped); a single rotor (two arrays) stays single."""
    return [f.copy() for V, W in zip(factors[::2], factors[1::2]) for f in (W[:, ::-1], V[:, ::-1])]
