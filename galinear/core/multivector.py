r"""Batched numeric multivectors: :class:`MultiVector`, a numpy array with the operators of GA.

A :class:`MultiVector` holds an :class:`~galinear.core.algebra.Algebra` and an array ``values``
of shape ``(..., 2**n)`` (shortlex blade order). Leading axes are batch axes and broadcast as in
numpy. Every product calls the Algebra's kernels on ``values``; the class only adds the wrapping,
so the array API (``alg.gp(a, b)``) stays the fast path and the class costs a small constant per
call (``benchmarks/bench_multivector.py``).

Operators (grades r, s of homogeneous parts, extended bilinearly):

======== ======================================================================================
``a * b``  geometric product
``a ^ b``  outer product :math:`\langle a_r b_s\rangle_{r+s}`
``a | b``  inner product :math:`\langle a_r b_s\rangle_{|r-s|}`, scalars included (Dorst's "fat
           dot", kingdon's ``|``; clifford's ``|`` drops the terms with a scalar factor)
``a << b`` left contraction :math:`\langle a_r b_s\rangle_{s-r}` (zero for r > s)
``a >> b`` right contraction :math:`\langle a_r b_s\rangle_{r-s}` (zero for s > r)
``a & b``  regressive product :math:`a \vee b`, metric-free (see :meth:`MultiVector.meet`)
``~a``     reverse; ``a.involute()``, ``a.conjugate()`` the other involutions
``R @ x``  sandwich :math:`R\,x\,\tilde R` (the Algebra's convention for rotors)
``a ** k`` integer power (negative powers through :meth:`MultiVector.inv`)
``a / b``  :math:`a\, b^{-1}` for an invertible b, or division by a scalar
======== ======================================================================================
"""
from __future__ import annotations

from functools import lru_cache
from numbers import Number

import numpy as np

from galinear import blades
from galinear.core.algebra import Algebra, coerce_float

__all__ = ["MultiVector", "outermorphism_matrix", "hodge_signs", "inverse", "NotInvertibleError"]


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


def _involution(alg: Algebra, x: np.ndarray, grades) -> np.ndarray:
    """x with the listed grades negated."""
    sign = np.where(np.isin(alg.grades, grades), -1.0, 1.0).astype(x.dtype)
    return x * sign


#: Closed-form inverses (Hitzer and Sangwine 2017) exist for n <= this value; above it the
#: left-multiplication matrix is solved.
CLOSED_FORM_MAX_N = 5


def inverse(alg: Algebra, x) -> np.ndarray:
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
    the product kernels) is solved; x is invertible exactly when :math:`L_x` is.
    """
    x_in = alg._mv(x, "x")
    x = x_in.astype(np.float64)  # float32 inputs are inverted in float64, then rounded back
    n = alg.n
    if n > CLOSED_FORM_MAX_N:
        return _inverse_matrix(alg, x).astype(x_in.dtype)
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
    return (num / scalar[..., None]).astype(x_in.dtype)


def _inverse_matrix(alg: Algebra, x: np.ndarray) -> np.ndarray:
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


def outermorphism_matrix(alg: Algebra, matrix) -> np.ndarray:
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


# ---------------------------------------------------------------------------- the class
def _is_scalar(x) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, Number) and not isinstance(x, complex):
        return True
    return isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf"


class MultiVector:
    r"""A batch of multivectors of an :class:`~galinear.core.algebra.Algebra`.

    Parameters
    ----------
    algebra : Algebra
    values : array_like, shape (..., 2**n)
        Coefficients in shortlex order; leading axes are batch axes. The array is used as is
        when it is already float32/float64 (no copy, like ``np.asarray``).

    Examples
    --------
    >>> from galinear import Algebra, MultiVector
    >>> alg = Algebra(3)
    >>> e1, e2, e3 = MultiVector.basis_vectors(alg)
    >>> R = ((e1 * e2) * 0.25).exp()          # a rotor
    >>> round(float((R @ e1)["e1"]), 12)     # R x ~R turns e1 by 2 * 0.25 rad in the e12 plane
    0.87758256189
    """

    __slots__ = ("algebra", "values")
    # numpy must defer to the reflected operators (2.0 * mv, np.float64(2) + mv)
    __array_ufunc__ = None

    def __init__(self, algebra: Algebra, values=None):
        if not isinstance(algebra, Algebra):
            raise TypeError(f"the first argument must be a galinear.Algebra, got {type(algebra).__name__}")
        if values is None:
            values = np.zeros(algebra.dim)
        _set_algebra(self, algebra)
        _set_values(self, algebra._mv(values, "values", check_finite=False))

    @staticmethod
    def _wrap(algebra: Algebra, values: np.ndarray) -> "MultiVector":
        out = _new(MultiVector)
        _set_algebra(out, algebra)
        _set_values(out, values)
        return out

    # ---------------------------------------------------------------- constructors
    @classmethod
    def zeros(cls, algebra: Algebra, shape=(), dtype=np.float64) -> "MultiVector":
        """Zero multivectors with batch shape ``shape``."""
        shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
        return cls._wrap(algebra, np.zeros(shape + (algebra.dim,), dtype=dtype))

    @classmethod
    def scalar(cls, algebra: Algebra, s) -> "MultiVector":
        """Scalars ``s`` (shape (...))."""
        return cls._wrap(algebra, algebra.scalar(s))

    @classmethod
    def vector(cls, algebra: Algebra, v) -> "MultiVector":
        """Vectors from coefficients (..., n) on e1..en."""
        return cls._wrap(algebra, algebra.vector(v))

    @classmethod
    def bivector(cls, algebra: Algebra, b) -> "MultiVector":
        """Bivectors from coefficients (..., C(n, 2)) in :func:`galinear.blades.bivector_pairs` order."""
        return cls._wrap(algebra, algebra.bivector(b))

    @classmethod
    def blade(cls, algebra: Algebra, name: str, coefficient=1.0) -> "MultiVector":
        """``coefficient`` times the blade called ``name`` (``"e13"``; ``"e31"`` is ``-e13``)."""
        index, sign = _blade_lookup(algebra.n, name)
        return cls._wrap(algebra, algebra.blade(algebra.blade_names[index], sign * coerce_float(coefficient)))

    @classmethod
    def basis_vectors(cls, algebra: Algebra) -> tuple["MultiVector", ...]:
        """The n basis vectors e1..en (for ``e1, e2, e3 = MultiVector.basis_vectors(alg)``)."""
        return tuple(cls.blade(algebra, f"e{i + 1}" if i < 9 else f"e({i + 1})") for i in range(algebra.n))

    @classmethod
    def basis(cls, algebra: Algebra) -> dict[str, "MultiVector"]:
        """Every basis blade by name, in shortlex order: ``{"1": 1, "e1": e1, ..., "e12": e12, ...}``."""
        return {name: cls.blade(algebra, name) for name in algebra.blade_names}

    @classmethod
    def pseudoscalar(cls, algebra: Algebra) -> "MultiVector":
        """The unit pseudoscalar :math:`I = e_{12\\dots n}`."""
        return cls._wrap(algebra, algebra.blade(algebra.blade_names[-1]))

    # ---------------------------------------------------------------- array-like
    @property
    def shape(self) -> tuple[int, ...]:
        """Batch shape (the values' shape without the last axis)."""
        return self.values.shape[:-1]

    @property
    def ndim(self) -> int:
        return self.values.ndim - 1

    @property
    def dtype(self):
        return self.values.dtype

    def __len__(self) -> int:
        if self.values.ndim == 1:
            raise TypeError("len() of an unbatched MultiVector; it has no batch axis")
        return self.values.shape[0]

    def __iter__(self):
        if self.values.ndim == 1:
            raise TypeError("iteration over an unbatched MultiVector; use mv.values for its coefficients")
        for row in self.values:
            yield MultiVector._wrap(self.algebra, row)

    def astype(self, dtype) -> "MultiVector":
        return MultiVector._wrap(self.algebra, self.values.astype(dtype))

    def copy(self) -> "MultiVector":
        return MultiVector._wrap(self.algebra, self.values.copy())

    def __reduce__(self):  # pickle and copy: rebuild from (algebra, values)
        return (MultiVector, (self.algebra, self.values))

    def __deepcopy__(self, memo):
        return MultiVector._wrap(self.algebra, self.values.copy())

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)

    # ---------------------------------------------------------------- coercion
    def _other(self, other):
        """values of another MultiVector of the same algebra, or None for a real scalar; else raise."""
        if isinstance(other, MultiVector):
            if other.algebra is not self.algebra and other.algebra != self.algebra:
                raise ValueError(
                    f"cannot combine multivectors of {self.algebra!r} and {other.algebra!r}; "
                    f"convert one of them first"
                )
            return other.values
        if _is_scalar(other):
            return None
        raise TypeError(
            f"cannot combine a MultiVector with {type(other).__name__}; use a real number, or wrap "
            f"coefficient arrays first: MultiVector(alg, values) or MultiVector.scalar(alg, array)"
        )

    def _scalar_mv(self, s) -> np.ndarray:
        out = np.zeros(self.algebra.dim, dtype=np.result_type(self.values.dtype, np.float32))
        out[0] = s
        return out

    # ---------------------------------------------------------------- linear structure
    def __add__(self, other):
        b = self._other(other)
        if b is None:
            out = self.values.copy() if self.values.dtype.kind == "f" else self.values.astype(np.float64)
            out[..., 0] += other
            return MultiVector._wrap(self.algebra, out)
        return MultiVector._wrap(self.algebra, self.values + b)

    __radd__ = __add__

    def __sub__(self, other):
        b = self._other(other)
        if b is None:
            out = self.values.copy()
            out[..., 0] -= other
            return MultiVector._wrap(self.algebra, out)
        return MultiVector._wrap(self.algebra, self.values - b)

    def __rsub__(self, other):
        return (-self) + other

    def __neg__(self):
        return MultiVector._wrap(self.algebra, -self.values)

    def __pos__(self):
        return self

    # ---------------------------------------------------------------- products
    def _binary(self, kind: str, other, reflected: bool = False):
        b = self._other(other)
        if b is None:
            if kind in ("gp", "op"):
                return MultiVector._wrap(self.algebra, self.values * other)
            b = self._scalar_mv(other)
        a = self.values
        if reflected:
            a, b = b, a
        return MultiVector._wrap(self.algebra, getattr(self.algebra, kind)(a, b))

    def __mul__(self, other):
        return self._binary("gp", other)

    def __rmul__(self, other):
        return self._binary("gp", other, reflected=True)

    def __xor__(self, other):
        return self._binary("op", other)

    def __rxor__(self, other):
        return self._binary("op", other, reflected=True)

    def __lshift__(self, other):
        return self._binary("lc", other)

    def __rlshift__(self, other):
        return self._binary("lc", other, reflected=True)

    def __rshift__(self, other):
        return self._binary("rc", other)

    def __rrshift__(self, other):
        return self._binary("rc", other, reflected=True)

    def gp(self, other) -> "MultiVector":
        """Geometric product (``*``)."""
        return self._binary("gp", other)

    def op(self, other) -> "MultiVector":
        """Outer product (``^``)."""
        return self._binary("op", other)

    def lc(self, other) -> "MultiVector":
        """Left contraction (``<<``)."""
        return self._binary("lc", other)

    def rc(self, other) -> "MultiVector":
        """Right contraction (``>>``)."""
        return self._binary("rc", other)

    def inner(self, other) -> "MultiVector":
        r"""Inner product ``|``: :math:`\sum_{r,s} \langle a_r b_s \rangle_{|r-s|}` (scalars included).

        Computed as ``lc + rc - <a b>_0`` (the grade-0 terms r = s appear in both contractions).
        Equal to clifford's ``|`` except for the terms with a scalar factor, which clifford drops.
        """
        b = self._other(other)
        if b is None:
            b = self._scalar_mv(other)
        alg = self.algebra
        a = self.values
        out = alg.lc(a, b) + alg.rc(a, b)
        out[..., 0] -= alg.scalar_product(a, b)
        return MultiVector._wrap(alg, out)

    def __or__(self, other):
        return self.inner(other)

    def __ror__(self, other):
        return MultiVector._wrap(self.algebra, np.broadcast_to(self._scalar_mv(other), self.values.shape)).inner(self)

    def scalar_product(self, other) -> np.ndarray:
        """:math:`\\langle a b \\rangle_0`, an array of the batch shape."""
        b = self._other(other)
        if b is None:
            b = self._scalar_mv(other)
        return self.algebra.scalar_product(self.values, b)

    def sandwich(self, x) -> "MultiVector":
        r""":math:`R\, x\, \tilde R` (``R @ x``); for a unit rotor R the rotation of x.

        Odd versors get no extra sign (clifford's convention for ``R * x * ~R``; kingdon's ``>>``
        applies the grade involution to x for odd R instead).
        """
        if not isinstance(x, MultiVector):
            raise TypeError(f"R @ x needs a MultiVector x, got {type(x).__name__}")
        self._other(x)
        alg = self.algebra
        return MultiVector._wrap(alg, alg.gp(alg.gp(self.values, x.values), alg.reverse(self.values)))

    def __matmul__(self, other):
        return self.sandwich(other)

    def __invert__(self):
        return MultiVector._wrap(self.algebra, self.algebra.reverse(self.values))

    def reverse(self) -> "MultiVector":
        return ~self

    def involute(self) -> "MultiVector":
        return MultiVector._wrap(self.algebra, self.algebra.involute(self.values))

    def conjugate(self) -> "MultiVector":
        return MultiVector._wrap(self.algebra, self.algebra.conjugate(self.values))

    # ---------------------------------------------------------------- inverse, powers, division
    def inv(self) -> "MultiVector":
        """Inverse of every invertible multivector (:func:`inverse`); NotInvertibleError otherwise."""
        return MultiVector._wrap(self.algebra, inverse(self.algebra, self.values))

    def __pow__(self, exponent):
        if isinstance(exponent, (bool, np.bool_)) or not isinstance(exponent, (int, np.integer)):
            raise TypeError(f"only integer powers are defined, got {exponent!r}; for exp use mv.exp()")
        exponent = int(exponent)
        base = self.inv() if exponent < 0 else self
        exponent = abs(exponent)
        alg = self.algebra
        result = None
        power = base.values
        while exponent:
            if exponent & 1:
                result = power if result is None else alg.gp(result, power)
            exponent >>= 1
            if exponent:
                power = alg.gp(power, power)
        if result is None:
            result = np.broadcast_to(self._scalar_mv(1.0).astype(self.values.dtype), self.values.shape).copy()
        return MultiVector._wrap(alg, result)

    def __truediv__(self, other):
        b = self._other(other)
        if b is None:
            return MultiVector._wrap(self.algebra, self.values / other)
        return MultiVector._wrap(self.algebra, self.algebra.gp(self.values, inverse(self.algebra, b)))

    def __rtruediv__(self, other):
        if self._other(other) is not None:  # pragma: no cover - handled by __truediv__
            return NotImplemented
        return MultiVector._wrap(self.algebra, inverse(self.algebra, self.values) * other)

    # ---------------------------------------------------------------- grades and blades
    def grade(self, *grades) -> "MultiVector":
        """Grade projection: ``mv.grade(2)``, ``mv.grade(0, 2)`` (also ``mv(2)``)."""
        return MultiVector._wrap(self.algebra, self.algebra.grade(self.values, *grades))

    __call__ = grade

    def grades(self, tol: float = 0.0) -> tuple[int, ...]:
        """Grades with a coefficient of magnitude above ``tol`` in any batch entry."""
        mags = np.abs(self.values).reshape(-1, self.algebra.dim).max(axis=0, initial=0.0)
        return tuple(sorted({int(g) for g, m in zip(self.algebra.grades, mags) if m > tol}))

    def __getitem__(self, key):
        if isinstance(key, str):
            index, sign = _blade_lookup(self.algebra.n, key)
            out = self.values[..., index]
            return out * sign if sign < 0 else out.copy()
        if not isinstance(key, tuple):
            key = (key,)
        if any(k is Ellipsis for k in key):
            return MultiVector._wrap(self.algebra, self.values[key + (slice(None),)])
        return MultiVector._wrap(self.algebra, self.values[key + (Ellipsis, slice(None))])

    def __setitem__(self, key, value):
        if not isinstance(key, str):
            raise TypeError(
                f"set blade coefficients by name (mv['e12'] = 2.0), got key {key!r}; "
                f"to change batch entries write to mv.values"
            )
        index, sign = _blade_lookup(self.algebra.n, key)
        if not self.values.flags.writeable:
            _set_values(self, self.values.copy())
        self.values[..., index] = sign * np.asarray(value)

    def __getattr__(self, name):
        if name.startswith("e") and not name.startswith("__"):
            try:
                return self[name]
            except KeyError:
                pass
        raise AttributeError(f"'MultiVector' object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name in ("algebra", "values"):
            raise AttributeError(
                f"MultiVector.{name} is fixed at construction; build a new MultiVector(alg, values)"
            )
        if name.startswith("e"):
            try:
                _blade_lookup(self.algebra.n, name)
            except KeyError:
                raise AttributeError(f"no blade named {name!r} in {self.algebra!r}") from None
            self[name] = value
            return
        raise AttributeError(f"'MultiVector' object has no attribute {name!r}")

    # ---------------------------------------------------------------- norms and comparison
    def norm(self) -> np.ndarray:
        """:math:`\\sqrt{|\\langle \\tilde x x\\rangle_0|}` per batch entry (clifford's ``abs``)."""
        return self.algebra.norm(self.values)

    def norm_squared(self) -> np.ndarray:
        return self.algebra.norm_squared(self.values)

    def normalized(self) -> "MultiVector":
        """``x / norm(x)`` per batch entry."""
        nrm = self.norm()
        if np.any(nrm == 0):
            raise ValueError("normalized() of a multivector with zero norm (zero or null); nothing to divide by")
        return MultiVector._wrap(self.algebra, self.values / nrm[..., None])

    def __eq__(self, other):
        if isinstance(other, MultiVector):
            return other.algebra == self.algebra and bool(np.array_equal(self.values, other.values))
        if _is_scalar(other):
            return bool(np.array_equal(self.values, np.broadcast_to(self._scalar_mv(other), self.values.shape)))
        return NotImplemented

    __hash__ = None

    def allclose(self, other, rtol: float = 1e-7, atol: float = 1e-9) -> bool:
        """``np.allclose`` on the coefficients (other: a MultiVector or a scalar)."""
        b = self._other(other)
        if b is None:
            b = self._scalar_mv(other)
        return bool(np.allclose(self.values, b, rtol=rtol, atol=atol))

    # ---------------------------------------------------------------- duality and subspaces
    def dual(self, kind: str = "auto") -> "MultiVector":
        r"""Dual of x.

        ``kind="polarity"``: :math:`x I^{-1}` (clifford's and kingdon's ``dual`` in
        non-degenerate algebras). ``kind="hodge"``: the right complement, metric-free,
        :math:`e_A \wedge \star e_A = I` for every basis blade (kingdon's dual in degenerate
        algebras such as PGA). ``"auto"`` (default): polarity unless the metric is degenerate.
        :meth:`undual` inverts the same choice.
        """
        return MultiVector._wrap(self.algebra, self._dual(self.values, kind, inverse=False))

    def undual(self, kind: str = "auto") -> "MultiVector":
        """Inverse of :meth:`dual` with the same ``kind``: ``x.dual().undual() == x``."""
        return MultiVector._wrap(self.algebra, self._dual(self.values, kind, inverse=True))

    def _dual(self, x, kind, inverse):
        alg = self.algebra
        if kind == "auto":
            kind = "hodge" if 0 in alg.metric else "polarity"
        if kind == "polarity":
            if 0 in alg.metric:
                raise ValueError(
                    f"the polarity dual x I^-1 needs an invertible pseudoscalar; {alg!r} is degenerate. "
                    f"Use dual(kind='hodge') (the default 'auto' does)"
                )
            I = alg.blade(alg.blade_names[-1]).astype(x.dtype)
            if inverse:
                return alg.gp(x, I)
            return alg.gp(x, alg.inverse(I))
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

    def regressive(self, other) -> "MultiVector":
        r"""Regressive product :math:`a \vee b = \star^{-1}(\star a \wedge \star b)` (``&``).

        Built on the right complement (:meth:`dual` with ``kind="hodge"``), so it is metric-free
        and the same in every signature, degenerate ones included. Grades: r + s - n.
        """
        b = self._other(other)
        if b is None:
            b = self._scalar_mv(other)
        alg = self.algebra
        a = self.values
        da = self._dual(a, "hodge", inverse=False)
        db = self._dual(np.asarray(b), "hodge", inverse=False)
        return MultiVector._wrap(alg, self._dual(alg.op(da, db), "hodge", inverse=True))

    def __and__(self, other):
        return self.regressive(other)

    def meet(self, other) -> "MultiVector":
        r"""Meet: the regressive product :math:`a \vee b`.

        For blades a, b that represent subspaces directly (a vector is a direction, ``a ^ b``
        spans both) and together span the whole space, it represents their intersection. In
        plane-based PGA, where vectors are planes, the intersection is the outer product and
        the regressive product joins: use ``a ^ b`` and ``a & b`` there.
        """
        return self.regressive(other)

    def join(self, other) -> "MultiVector":
        r"""Join of subspaces that share nothing: the outer product :math:`a \wedge b`."""
        return self._binary("op", other)

    def project(self, onto) -> "MultiVector":
        r"""Projection onto a blade B: :math:`(x \rfloor B) \rfloor B^{-1}` (Dorst et al. 2007)."""
        alg = self.algebra
        B = self._other(onto)
        if B is None:
            B = self._scalar_mv(onto)
        return MultiVector._wrap(alg, alg.lc(alg.lc(self.values, B), inverse(alg, B)))

    def reject(self, onto) -> "MultiVector":
        r"""Rejection from a blade B: :math:`x - (x \rfloor B) \rfloor B^{-1}` (for vectors x,
        :math:`(x \wedge B) B^{-1}`)."""
        return self - self.project(onto)

    # ---------------------------------------------------------------- maps
    def outermorphism(self, matrix) -> "MultiVector":
        """Apply the outermorphism of ``matrix`` (..., n, n) (:func:`outermorphism_matrix`)."""
        O = outermorphism_matrix(self.algebra, matrix)
        return MultiVector._wrap(self.algebra, np.einsum("...ij,...j->...i", O, self.values))

    def exp(self, **options) -> "MultiVector":
        """Exponential of a bivector (any signature): :meth:`Algebra.exp`."""
        return MultiVector._wrap(self.algebra, self.algebra.exp(self.values, **options))

    def log(self) -> "MultiVector":
        """Logarithm of a rotor (any signature): :meth:`Algebra.log`."""
        return MultiVector._wrap(self.algebra, self.algebra.log(self.values))

    # ---------------------------------------------------------------- interop
    def to_clifford(self):
        """A ``clifford.MultiVector`` (unbatched) or ``clifford.MVArray`` (batched)."""
        return self.algebra.to_clifford(self.values)

    @classmethod
    def from_clifford(cls, mv, algebra: Algebra | None = None) -> "MultiVector":
        """From a ``clifford.MultiVector`` or MVArray; the algebra is read from its layout if omitted."""
        if algebra is None:
            import clifford

            first = mv if isinstance(mv, clifford.MultiVector) else np.asarray(mv, dtype=object).reshape(-1)[0]
            algebra = _algebra_from_metric(tuple(int(s) for s in first.layout.sig), "clifford")
        return cls._wrap(algebra, algebra.from_clifford(mv))

    def to_kingdon(self, kingdon_algebra=None):
        """A kingdon multivector (batch axes last, as kingdon stores them); needs kingdon installed."""
        kalg = kingdon_algebra if kingdon_algebra is not None else _kingdon_algebra(self.algebra)
        if sorted(np.asarray(kalg.signature).tolist()) != sorted(self.algebra.metric):
            raise ValueError(
                f"the kingdon algebra has signature {list(kalg.signature)}, this one {list(self.algebra.metric)}"
            )
        keys, signs = _blade_map(self.algebra.metric, tuple(int(s) for s in np.asarray(kalg.signature)))
        keys, signs = keys[self.algebra.bitmasks], signs[self.algebra.bitmasks]
        values = np.moveaxis(np.asarray(self.values, dtype=np.float64) * signs, -1, 0)
        return kalg.multivector(values=values, keys=tuple(int(k) for k in keys))

    @classmethod
    def from_kingdon(cls, x, algebra: Algebra | None = None) -> "MultiVector":
        """From a kingdon multivector (any subset of blades, batched or not)."""
        ksig = tuple(int(s) for s in np.asarray(x.algebra.signature))
        if algebra is None:
            algebra = Algebra(ksig.count(1), ksig.count(-1), ksig.count(0))
        elif sorted(ksig) != sorted(algebra.metric):
            raise ValueError(f"the kingdon multivector has signature {list(ksig)}, {algebra!r} has {list(algebra.metric)}")
        targets, signs = _blade_map(ksig, algebra.metric)  # indexed by kingdon bitmask (order of ksig)
        keys = list(x.keys())
        vals = np.asarray(x.values(), dtype=np.float64)
        if vals.ndim == 0 or vals.shape[0] != len(keys):
            vals = np.reshape(vals, (len(keys),) + vals.shape[1:] if vals.ndim else (len(keys),))
        out = np.zeros(vals.shape[1:] + (algebra.dim,), dtype=np.float64)
        pos = algebra.shortlex_index
        for key, v in zip(keys, vals):
            out[..., int(pos[int(targets[int(key)])])] = signs[int(key)] * v
        return cls._wrap(algebra, out)

    # ---------------------------------------------------------------- printing
    def _terms(self, row, latex: bool, precision: int = 6):
        names = self.algebra.blade_names
        masks = self.algebra.bitmasks
        for name, mask, c in zip(names, masks, row):
            if c == 0:
                continue
            text = f"{float(c):.{precision}g}"
            if mask == 0:
                yield text
                continue
            if latex:
                idx = ",".join(str(i + 1) for i in range(self.algebra.n) if int(mask) >> i & 1) if self.algebra.n >= 10 else name[1:]
                blade = rf"e_{{{idx}}}"
                yield blade if text == "1" else ("-" + blade if text == "-1" else rf"{text}\,{blade}")
            else:
                yield name if text == "1" else ("-" + name if text == "-1" else f"{text}*{name}")

    def _format_row(self, row, latex: bool = False) -> str:
        parts = list(self._terms(row, latex))
        if not parts:
            return "0"
        out = parts[0]
        for part in parts[1:]:
            out += f" - {part[1:]}" if part.startswith("-") else f" + {part}"
        return out

    def __str__(self):
        if self.values.ndim == 1:
            return self._format_row(self.values)
        flat = self.values.reshape(-1, self.algebra.dim)
        rows = [self._format_row(r) for r in flat[:4]]
        more = f", ... ({flat.shape[0]} in all)" if flat.shape[0] > 4 else ""
        return "[" + ", ".join(rows) + more + "]"

    def __repr__(self):
        dtype = "" if self.values.dtype == np.float64 else f", dtype={self.values.dtype}"
        if self.values.ndim == 1:
            return f"MultiVector({self.algebra!r}, {self}{dtype})"
        return f"MultiVector({self.algebra!r}, shape={self.shape}, grades={self.grades()}{dtype}: {self})"

    def latex(self) -> str:
        r"""LaTeX source, e.g. ``1 + 2\,e_{12}``; batched values give a comma-separated list."""
        if self.values.ndim == 1:
            return self._format_row(self.values, latex=True)
        flat = self.values.reshape(-1, self.algebra.dim)
        rows = [self._format_row(r, latex=True) for r in flat[:4]]
        more = r",\ \dots" if flat.shape[0] > 4 else ""
        return r"\left[" + r",\ ".join(rows) + more + r"\right]"

    def _repr_latex_(self):
        return f"${self.latex()}$"


_new = object.__new__
_set_algebra = MultiVector.algebra.__set__
_set_values = MultiVector.values.__set__


def _algebra_from_metric(metric: tuple[int, ...], source: str) -> Algebra:
    r, p, q = metric.count(0), metric.count(1), metric.count(-1)
    alg = Algebra(p, q, r)
    if alg.metric != metric:
        raise ValueError(
            f"the {source} algebra orders its basis as {metric}; galinear's Algebra({p}, {q}, {r}) "
            f"uses {alg.metric} (null vectors first, then +1, then -1). Pass algebra=... with "
            f"a matching order, or reorder the {source} basis"
        )
    return alg


def _blade_map(src: tuple[int, ...], dst: tuple[int, ...]):
    """Map blades between two orders of the same basis vectors (same squares, order kept per square).

    Returns (dst bitmask, sign), both indexed by the src bitmask: src blade m equals
    ``sign[m]`` times dst blade ``target[m]``.
    """
    n = len(src)
    perm = [0] * n  # src vector i -> dst vector perm[i]
    for value in (0, 1, -1):
        for i, j in zip([i for i in range(n) if src[i] == value], [j for j in range(n) if dst[j] == value]):
            perm[i] = j
    masks = range(1 << n)
    targets = np.zeros(1 << n, dtype=np.int64)
    signs = np.ones(1 << n)
    for m in masks:
        image = [perm[i] for i in range(n) if m >> i & 1]
        inversions = sum(1 for a in range(len(image)) for b in range(a + 1, len(image)) if image[a] > image[b])
        targets[m] = sum(1 << j for j in image)
        signs[m] = -1.0 if inversions % 2 else 1.0
    return targets, signs


_KINGDON: dict = {}


def _kingdon_algebra(alg: Algebra):
    try:
        import kingdon
    except ImportError:
        raise ImportError("to_kingdon() needs the kingdon package: pip install kingdon") from None
    if alg.metric not in _KINGDON:
        p, q, r = alg.signature
        _KINGDON[alg.metric] = kingdon.Algebra(p, q, r)
    return _KINGDON[alg.metric]
