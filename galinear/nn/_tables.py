"""Index and sign tables for rotor maps in Euclidean Cl(n), built from galinear.blades.

Two families, both in shortlex order (numpy, cached per n; moved to torch by the callers):

- vector tables ``(gather, left_sign, right_sign)``, each (n, 2**n): for the basis vector e_i,
  ``(e_i x)[c] = left_sign[i, c] * x[gather[i, c]]`` and
  ``(x e_i)[c] = right_sign[i, c] * x[gather[i, c]]``. ``gather[i]`` is an involution
  (it flips bit i of the blade bitmask), so the same table serves the adjoint.
- full tables ``(index, left_sign, right_sign)``, each (2**n, 2**n): the matrix of
  x -> A x is ``left_sign * A[index]`` and the matrix of x -> x A is ``right_sign * A[index]``.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear.blades import bitmask_to_shortlex, blade_grades, check_dimension, shortlex_bitmasks
from galinear.blades import reorder_signs as _reorder_signs


@lru_cache(maxsize=None)
def vector_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(gather, left_sign, right_sign), each (n, 2**n); see the module docstring."""
    n = check_dimension(n)
    masks = shortlex_bitmasks(n)
    position = bitmask_to_shortlex(n)
    bits = (np.int64(1) << np.arange(n, dtype=np.int64))[:, None]
    source = masks[None, :] ^ bits
    gather = position[source]
    left = _reorder_signs(bits, source, n)   # e_i * e_source = left * e_c
    right = _reorder_signs(source, bits, n)  # e_source * e_i = right * e_c
    for array in (gather, left, right):
        array.setflags(write=False)
    return gather, left, right


@lru_cache(maxsize=4)
def full_tables(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(index, left_sign, right_sign), each (2**n, 2**n); see the module docstring."""
    n = check_dimension(n)
    masks = shortlex_bitmasks(n)
    position = bitmask_to_shortlex(n)
    source = masks[:, None] ^ masks[None, :]  # blade a with e_a e_i ~ e_c, row c, column i
    index = position[source]
    left = _reorder_signs(source, masks[None, :], n)   # e_a e_i
    right = _reorder_signs(masks[None, :], source, n)  # e_i e_a
    for array in (index, left, right):
        array.setflags(write=False)
    return index, left, right


@lru_cache(maxsize=None)
def reverse_signs(n: int) -> np.ndarray:
    """(-1)**(g(g-1)/2) per shortlex blade: the sign the reverse puts on grade g."""
    grades = blade_grades(n)
    out = np.where((grades * (grades - 1) // 2) % 2, -1, 1).astype(np.int8)
    out.setflags(write=False)
    return out
