r"""Functions on multivector arrays behind :class:`~galinear.core.multivector.MultiVector`.

Blade names, the metric-free (Hodge) and polarity duals, the inverse of every invertible
multivector and the outermorphism of a linear map, all on arrays of shape (..., 2**n).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear import blades
from galinear.core.checks import coerce_float
from galinear.core.layout import Layout, scaled_inverse

__all__ = ["NotInvertibleError", "hodge_signs", "dual", "inverse", "outermorphism_matrix", "CLOSED_FORM_MAX_N"]


class NotInvertibleError(ValueError):
    """Raised by :meth:`MultiVector.inv` (and ``/``, negative ``**``) for non-invertible inputs."""


# ---------------------------------------------------------------------------- blade names
@lru_cache(maxsize=4096)
def _blade_lookup(n: int, name: str) -> tuple[int, int]:
    """(shortlex index, sign) of a blade name; ``"e21"`` is ``-e12``; ``"1"``, ``"e"``, ``"scalar"`` are 1."""
    names = blades.blade_names(n)
    if name in ("1", "e", "scalar", ""):
        return 0, 1
    try:
        return names.index(name), 1
    except ValueError:
        pass
    body = name[1:] if name.startswith("e") else None
    indices = None
    if body:
        if "(" in body or "_" in body or n >= 10:
            parts = body.replace(")", "(").replace("_", "(").split("(")
            try:
                indices = [int(p) for p in parts if p]
            except ValueError:
                indices = None
        elif body.isdigit():
            indices = [int(c) for c in body]
    if not indices or any(not 1 <= i <= n for i in indices) or len(set(indices)) != len(indices):
        raise KeyError(
            f"no blade named {name!r} in Cl({n}): use 'e' followed by distinct indices 1..{n} "
            f"(e.g. 'e12', 'e21' = -e12), or '1' for the scalar part"
        )
    mask = 0
    for i in indices:
        mask |= 1 << (i - 1)
    # sign of the permutation that sorts the indices
    inversions = sum(1 for a in range(len(indices)) for b in range(a + 1, len(indices)) if indices[a] > indices[b])
    index = int(blades.bitmask_to_shortlex(n)[mask])
    return index, -1 if inversions % 2 else 1


# ---------------------------------------------------------------------------- free functions
@lru_cache(maxsize=64)
def hodge_signs(n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Index and sign of the right complement: :math:`e_A \wedge \star e_A = e_{12\dots n}`.

    Returns ``(target, sign)``, both (2**n,) in shortlex order: :math:`\star e_A` is
    ``sign[A] * blade(target[A])``. The map is metric-free (it uses the outer product only), so
    it is the dual that works in degenerate algebras (the Hodge dual of PGA).
    """
    masks = blades.shortlex_bitmasks(n)
    pos = blades.bitmask_to_shortlex(n)
    full = (1 << n) - 1
    target = np.array([pos[full ^ int(m)] for m in masks], dtype=np.int64)
    sign = np.array([blades.reorder_sign(int(m), full ^ int(m)) for m in masks], dtype=np.float64)
    target.setflags(write=False)
    sign.setflags(write=False)
    return target, sign


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


@lru_cache(maxsize=64)
def _polarity_signs(metric: tuple[int, ...], inverse: bool):
    """x I^-1 (or x I when ``inverse``) as a signed permutation: blade A goes to target[A] with sign[A]."""
    alg = Layout(signature=(metric.count(1), metric.count(-1), metric.count(0)))
    I = alg.blade(alg.blade_names[-1])
    images = alg.gp(np.eye(alg.dim), I if inverse else alg.inverse(I))
    target = np.argmax(np.abs(images), axis=1)
    sign = images[np.arange(alg.dim), target]
    return target, sign


def dual(alg: Layout, x: np.ndarray, kind: str = "auto", inverse: bool = False) -> np.ndarray:
    """Dual (``inverse=False``) or undual of the array x; see :meth:`MultiVector.dual`."""
    if kind == "auto":
        kind = "hodge" if 0 in alg.metric else "polarity"
    if kind == "polarity":
        if 0 in alg.metric:
            raise ValueError(
                f"the polarity dual x I^-1 needs an invertible pseudoscalar; {alg!r} is degenerate. "
                f"Use dual(kind='hodge') (the default 'auto' does)"
            )
        target, sign = _polarity_signs(alg.metric, inverse)
        out = np.empty_like(x)
        out[..., target] = x * sign.astype(x.dtype)
        return out
    if kind == "hodge":
        target, sign = hodge_signs(alg.n)
        out = np.empty_like(x)
        if inverse:
            # star(e_A) = s_A e_{A^c}  =>  star^-1(e_{A^c}) = s_A e_A
            out[..., :] = x[..., target] * sign.astype(x.dtype)
        else:
            out[..., target] = x * sign.astype(x.dtype)
        return out
    raise ValueError(f"kind must be 'auto', 'polarity' or 'hodge', got {kind!r}")
