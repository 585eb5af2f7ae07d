r"""Blade bookkeeping shared by every layer of galinear (numpy only).

A basis blade :math:`e_{i_1 i_2 \dots i_g}` (:math:`i_1 < \dots < i_g`) is stored internally as
the bitmask :math:`\sum_j 2^{i_j - 1}`. Coefficient arrays are laid out in *shortlex* order:
grade first, then lexicographic inside a grade (``1, e1, e2, e3, e12, e13, e23, e123`` for
n = 3), the order of the ``clifford`` package.

The product of two blades is a signed blade:
:math:`e_A e_B = \sigma(A, B)\, \prod_{i \in A \cap B} m_i \; e_{A \oplus B}`, with
:math:`\sigma` the sign of the permutation that sorts the concatenated indices and
:math:`m_i = e_i^2` the metric (+1, -1 or 0).
"""
from __future__ import annotations

from functools import lru_cache
from itertools import combinations

import numpy as np

__all__ = [
    "MAX_DIMENSION",
    "check_dimension",
    "metric_from_signature",
    "shortlex_bitmasks",
    "bitmask_to_shortlex",
    "blade_grades",
    "blade_names",
    "blade_index",
    "bivector_pairs",
    "reorder_sign",
    "blade_product_sign",
    "cayley_tables",
]

#: Largest n accepted anywhere (a full multivector of Cl(20) has 2**20 coefficients).
MAX_DIMENSION = 20


def check_dimension(n: int) -> int:
    """Return ``n`` as an int after checking 0 <= n <= MAX_DIMENSION, else raise ValueError."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ValueError(f"the dimension n must be an integer, got {n!r}")
    n = int(n)
    if n < 0 or n > MAX_DIMENSION:
        need = 8 * 2.0 ** max(n, 0)
        raise ValueError(
            f"dimension n={n} is out of range: galinear supports 0 <= n <= {MAX_DIMENSION}; "
            f"one float64 multivector of Cl({n}) would need {need:.3g} bytes"
        )
    return n


def metric_from_signature(p: int, q: int = 0, r: int = 0) -> tuple[int, ...]:
    """Squares of the basis vectors for signature (p, q, r).

    Follows the ``clifford`` package: the r null vectors come first, then p vectors squaring
    to +1, then q squaring to -1.
    """
    for name, value in (("p", p), ("q", q), ("r", r)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
            raise ValueError(f"signature entry {name} must be a non-negative integer, got {value!r}")
    check_dimension(p + q + r)
    return (0,) * r + (1,) * p + (-1,) * q


@lru_cache(maxsize=None)
def _shortlex(n: int) -> np.ndarray:
    masks = [0]
    for grade in range(1, n + 1):
        for combo in combinations(range(n), grade):
            masks.append(sum(1 << i for i in combo))
    out = np.array(masks, dtype=np.int64)
    out.setflags(write=False)
    return out


def shortlex_bitmasks(n: int) -> np.ndarray:
    """Bitmask of the blade at each shortlex position, shape (2**n,), read-only int64."""
    return _shortlex(check_dimension(n))


@lru_cache(maxsize=None)
def _inverse(n: int) -> np.ndarray:
    masks = _shortlex(n)
    out = np.empty_like(masks)
    out[masks] = np.arange(masks.size)
    out.setflags(write=False)
    return out


def bitmask_to_shortlex(n: int) -> np.ndarray:
    """Shortlex position of each bitmask: ``bitmask_to_shortlex(n)[shortlex_bitmasks(n)] == arange``."""
    return _inverse(check_dimension(n))


@lru_cache(maxsize=None)
def _grades(n: int) -> np.ndarray:
    masks = _shortlex(n)
    out = np.array([bin(int(m)).count("1") for m in masks], dtype=np.int64)
    out.setflags(write=False)
    return out


def blade_grades(n: int) -> np.ndarray:
    """Grade of the blade at each shortlex position, shape (2**n,)."""
    return _grades(check_dimension(n))


def _mask_name(mask: int) -> str:
    if mask == 0:
        return "1"
    return "e" + "".join(str(i + 1) if i < 9 else f"({i + 1})" for i in range(mask.bit_length()) if mask >> i & 1)


@lru_cache(maxsize=None)
def _names(n: int) -> tuple[str, ...]:
    return tuple(_mask_name(int(m)) for m in _shortlex(n))


def blade_names(n: int) -> tuple[str, ...]:
    """Names in shortlex order: ``("1", "e1", ..., "e12", ...)``; indices >= 10 are parenthesised."""
    return _names(check_dimension(n))


def blade_index(n: int, name: str) -> int:
    """Shortlex position of the blade called ``name`` (e.g. ``"e13"``, ``"1"``)."""
    names = blade_names(n)
    try:
        return names.index(name)
    except ValueError:
        raise ValueError(
            f"no blade named {name!r} in Cl({n}); names run {names[0]!r}, {names[1] if n else ''!r}, ... "
            f"with indices 1..{n} in increasing order, e.g. 'e12'"
        ) from None


@lru_cache(maxsize=None)
def _pairs(n: int) -> np.ndarray:
    out = np.array(list(combinations(range(n), 2)), dtype=np.int64).reshape(-1, 2)
    out.setflags(write=False)
    return out


def bivector_pairs(n: int) -> np.ndarray:
    """The C(n, 2) index pairs (i, j), i < j, 0-based, in lexicographic order, shape (C(n,2), 2).

    This is the order of bivector coefficients everywhere in galinear, and it coincides with
    the order of the grade-2 blades in shortlex order.
    """
    return _pairs(check_dimension(n))


def reorder_sign(a: int, b: int) -> int:
    """Sign (+1/-1) from sorting the indices of blade a followed by blade b (bitmasks)."""
    a >>= 1
    swaps = 0
    while a:
        swaps += bin(a & b).count("1")
        a >>= 1
    return -1 if swaps & 1 else 1


def reorder_signs(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Vectorised :func:`reorder_sign` over broadcast bitmask arrays of blades of Cl(n) (int8)."""
    swaps = np.zeros(np.broadcast(a, b).shape, dtype=np.int64)
    for shift in range(1, n + 1):
        swaps += np.bitwise_count((a >> shift) & b).astype(np.int64)
    return np.where(swaps & 1, -1, 1).astype(np.int8)


@lru_cache(maxsize=None)
def bivector_part_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""(gather, left, right), each (C(n, 2), 2**n), for bivector parts of products in Euclidean Cl(n).

    For the bivector blade m (:func:`bivector_pairs` order) and the shortlex position c of a
    blade I: ``gather[m, c]`` is the position of :math:`I \oplus m` and

    .. math::

        \langle a \tilde b\rangle_m = \sum_c \mathrm{left}[m, c]\, a[\mathrm{gather}[m, c]]\, b[c], \qquad
        \langle \tilde b a\rangle_m = \sum_c \mathrm{right}[m, c]\, a[\mathrm{gather}[m, c]]\, b[c].

    Used by the exact gradient of rotor maps (galinear.nn.dexp); proved in proofs/dexp.py.
    """
    n = check_dimension(n)
    masks = shortlex_bitmasks(n)
    position = bitmask_to_shortlex(n)
    pairs = bivector_pairs(n)
    blade = ((np.int64(1) << pairs[:, 0]) | (np.int64(1) << pairs[:, 1]))[:, None]
    partner = masks[None, :] ^ blade  # I xor m
    grades = blade_grades(n)
    reverse = np.where((grades * (grades - 1) // 2) % 2, -1, 1).astype(np.int8)[None, :]
    left = (reorder_signs(partner, masks[None, :], n) * reverse).astype(np.int8)   # e_{I^m} e_I~ = left e_m
    right = (reorder_signs(masks[None, :], partner, n) * reverse).astype(np.int8)  # e_I~ e_{I^m} = right e_m
    gather = position[partner]
    for array in (gather, left, right):
        array.setflags(write=False)
    return gather, left, right


def blade_product_sign(a: int, b: int, metric) -> int:
    """Coefficient c with e_a e_b = c e_{a xor b}: reorder sign times the squares of shared vectors."""
    sign = reorder_sign(a, b)
    common = a & b
    i = 0
    while common:
        if common & 1:
            sign *= int(metric[i])
        common >>= 1
        i += 1
    return sign


@lru_cache(maxsize=64)
def _cayley(metric: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    n = len(metric)
    masks = _shortlex(n)
    pos = _inverse(n)
    size = masks.size
    index = np.empty((size, size), dtype=np.int64)
    sign = np.empty((size, size), dtype=np.int8)
    for i, a in enumerate(masks.tolist()):
        for j, b in enumerate(masks.tolist()):
            index[i, j] = pos[a ^ b]
            sign[i, j] = blade_product_sign(a, b, metric)
    index.setflags(write=False)
    sign.setflags(write=False)
    return index, sign


def cayley_tables(metric) -> tuple[np.ndarray, np.ndarray]:
    """Dense product tables in shortlex order for small n (n <= 10).

    Returns ``(index, sign)``, both (2**n, 2**n): blade i times blade j equals
    ``sign[i, j] * blade(index[i, j])``. ``metric`` is an int (Euclidean Cl(n)) or the tuple
    of squares of the basis vectors.
    """
    if isinstance(metric, (int, np.integer)):
        metric = (1,) * check_dimension(metric)
    metric = tuple(int(m) for m in metric)
    if any(m not in (-1, 0, 1) for m in metric):
        raise ValueError(f"metric entries must be +1, -1 or 0, got {metric}")
    if len(metric) > 10:
        raise ValueError(
            f"dense Cayley tables for n={len(metric)} would hold {4 ** len(metric):,} entries; "
            "they are offered for n <= 10 only (use the bitmask routines for larger n)"
        )
    return _cayley(metric)
