r"""The inverse of every invertible multivector array (..., 2**n), in every signature: closed forms
for n <= :data:`CLOSED_FORM_MAX_N`, the left-multiplication matrix above; :class:`NotInvertibleError`
for the others.
"""
from __future__ import annotations

import numpy as np

from galinear.core.layout import Layout, scaled_inverse

__all__ = ["NotInvertibleError", "inverse", "CLOSED_FORM_MAX_N"]


class NotInvertibleError(ValueError):
    """Raised by :meth:`MultiVector.inv` (and ``/``, negative ``**``) for non-invertible inputs."""


def _involution(alg: Layout, x: np.ndarray, grades) -> np.ndarray:
    """x with the listed grades negated."""
    sign = np.where(np.isin(alg.grades, grades), -1.0, 1.0).astype(x.dtype)
    return x * sign


#: Closed-form inverses (Hitzer and Sangwine 2017) exist for n <= this value; above it the
#: left-multiplication matrix is solved.
CLOSED_FORM_MAX_N = 5


def inverse(alg: Layout, x) -> np.ndarray:
    r"""Inverse of every invertible multivector, shape (..., 2**n); NotInvertibleError otherwise.

    For n <= 5 the closed forms of Hitzer and Sangwine (2017), valid in every signature:
    with :math:`\bar x` the Clifford conjugate, :math:`\hat x` the grade involution,
    :math:`\tilde x` the reverse and :math:`m_{i,j}` the map that negates grades i and j,

    * n <= 2: :math:`x^{-1} = \bar x / (x \bar x)`;
    * n = 3: :math:`x^{-1} = \bar x \hat x \tilde x / (x \bar x \hat x \tilde x)`;
    * n = 4: :math:`x^{-1} = \bar x\, m_{3,4}(x \bar x) / (x \bar x\, m_{3,4}(x \bar x))`;
    * n = 5: with :math:`t = \bar x \hat x \tilde x`,
      :math:`x^{-1} = t\, m_{1,4}(x t) / (x t\, m_{1,4}(x t))`.

    In each case the denominator is a scalar, zero exactly when x is not invertible. For n > 5
    the linear system :math:`L_x y = 1` (:math:`L_x` the left-multiplication matrix, built with
    the product kernels) is solved; x is invertible exactly when :math:`L_x` is. Each
    multivector is divided by its largest |coefficient| first and the inverse by it again
    (:func:`~galinear.core.layout.scaled_inverse`), so ``(1e200 * e1).inv()`` is ``1e-200 * e1``;
    an OverflowError names the limit when the inverse does not fit the dtype (x too small).
    """
    x_in = alg._mv(x, "x")
    # float32 inputs are inverted in float64, then rounded back; scaled to a largest coefficient
    # of 1 first, so that huge and tiny inputs do not overflow (Algebra.inverse does the same)
    return scaled_inverse(x_in.astype(np.float64), lambda y: _inverse_unscaled(alg, y), x_in.dtype)


def _inverse_unscaled(alg: Layout, x: np.ndarray) -> np.ndarray:
    """:func:`inverse` of float64 x whose largest coefficient is about 1."""
    n = alg.n
    if n > CLOSED_FORM_MAX_N:
        return _inverse_matrix(alg, x)
    if n == 0:
        num = np.ones_like(x)
        degree = 1
    elif n <= 2:
        num = alg.conjugate(x)
        degree = 2
    elif n == 3:
        num = alg.gp(alg.gp(alg.conjugate(x), alg.involute(x)), alg.reverse(x))
        degree = 4
    elif n == 4:
        c = alg.conjugate(x)
        num = alg.gp(c, _involution(alg, alg.gp(x, c), (3, 4)))
        degree = 4
    else:
        t = alg.gp(alg.gp(alg.conjugate(x), alg.involute(x)), alg.reverse(x))
        num = alg.gp(t, _involution(alg, alg.gp(x, t), (1, 4)))
        degree = 8
    den = alg.gp(x, num) if n else x * num
    scalar = den[..., 0]
    size = np.sqrt(np.sum(x * x, axis=-1))
    eps = np.finfo(x.dtype).eps
    scale = np.maximum(size, np.finfo(x.dtype).tiny) ** degree
    bad = np.abs(scalar) <= 64 * eps * scale
    if np.any(bad):
        raise NotInvertibleError(
            f"{int(np.sum(bad))} of {bad.size} multivectors are not invertible in {alg!r} (the closed-form "
            f"denominator vanishes: a null vector, a degenerate blade or a zero divisor such as (1 + e1)/2); "
            f"check the input or divide by a scalar instead"
        )
    return num / scalar[..., None]


def _inverse_matrix(alg: Layout, x: np.ndarray) -> np.ndarray:
    eye = np.eye(alg.dim, dtype=x.dtype)
    # rows j of L are x e_j, so L^T is the matrix of y -> x y
    L = alg.gp(x[..., None, :], eye)
    M = np.swapaxes(L, -1, -2).astype(np.float64)
    rhs = np.zeros(M.shape[:-1], dtype=np.float64)
    rhs[..., 0] = 1.0
    try:
        y = np.linalg.solve(M, rhs[..., None])[..., 0]
    except np.linalg.LinAlgError:
        y = np.full(M.shape[:-1], np.nan)
    res = np.einsum("...ij,...j->...i", M, np.nan_to_num(y, nan=0.0, posinf=0.0, neginf=0.0)) - rhs
    err = np.sqrt(np.sum(res * res, axis=-1))
    tol = 1e3 * np.finfo(x.dtype).eps * max(1, alg.n)
    bad = ~np.isfinite(y).all(axis=-1) | (err > tol)
    if np.any(bad):
        raise NotInvertibleError(
            f"{int(np.sum(bad))} of {bad.size} multivectors are not invertible in {alg!r} (their "
            f"left-multiplication matrix is singular to working precision); check the input"
        )
    return y.astype(x.dtype)
