r"""The outermorphism of a linear map of vectors as a (..., 2**n, 2**n) matrix on multivector arrays;
see :meth:`MultiVector.outermorphism <galinear.core.algebra.MultiVector.outermorphism>`.
"""
from __future__ import annotations

import numpy as np

from galinear.core.checks import coerce_float
from galinear.core.layout import Layout

__all__ = ["outermorphism_matrix"]


def outermorphism_matrix(alg: Layout, matrix) -> np.ndarray:
    r"""The (..., 2**n, 2**n) matrix of the outermorphism of a linear map of vectors.

    ``matrix`` (..., n, n) maps :math:`e_i \mapsto \sum_j` ``matrix[j, i]`` :math:`e_j` (column i
    is the image of :math:`e_i`); the outermorphism extends it by
    :math:`f(e_{i_1} \wedge \dots \wedge e_{i_g}) = f(e_{i_1}) \wedge \dots \wedge f(e_{i_g})`
    and :math:`f(1) = 1`. Column j of the result is the image of the j-th shortlex blade; the
    pseudoscalar maps to :math:`\det(\text{matrix})\, I`.
    """
    M = coerce_float(matrix, "matrix")
    n = alg.n
    if M.ndim < 2 or M.shape[-2:] != (n, n):
        raise ValueError(f"matrix must have shape (..., n, n) = (..., {n}, {n}) for {alg!r}, got {M.shape}")
    batch = M.shape[:-2]
    images = np.zeros(batch + (alg.dim, alg.dim), dtype=M.dtype)  # images[..., bitmask, :]
    images[..., 0, 0] = 1.0
    for i in range(n):
        images[..., 1 << i, 1 : 1 + n] = M[..., :, i]
    masks = alg.bitmasks
    grades = alg.grades
    for g in range(2, n + 1):
        group = masks[grades == g]
        high = np.array([1 << (int(m).bit_length() - 1) for m in group], dtype=np.int64)
        images[..., group, :] = alg.op(images[..., group ^ high, :], images[..., high, :])
    cols = images[..., masks, :]  # (..., shortlex j, coefficients)
    return np.ascontiguousarray(np.swapaxes(cols, -1, -2))
