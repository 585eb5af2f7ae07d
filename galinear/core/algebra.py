r"""The Clifford algebra and its elements: :class:`Algebra` and :class:`MultiVector`.

:class:`Algebra` is Cl(p, q, r): the array methods of :class:`~galinear.core.layout.Layout` and
the rotor methods of :class:`~galinear.core.algebrarotors.RotorMethods`. The two classes share
this module because each constructs the other (``alg.multivector(...)`` returns a MultiVector;
:meth:`MultiVector.from_clifford` / :meth:`~MultiVector.from_kingdon` build the Algebra they
infer); they sit above everything they use (:mod:`galinear.core.layout` for the arrays,
:mod:`galinear.core.algebrarotors` for the rotors, the ``mv*`` modules for the methods of
MultiVector), and none of those modules imports this one.

A :class:`MultiVector` is a batch of multivectors: it holds an :class:`Algebra` and an array
``values`` of shape ``(..., 2**n)`` (shortlex blade order). Leading axes are batch axes and
broadcast as in numpy. A MultiVector also tracks which grades it may hold (vectors, bivectors,
rotors, and everything computed from them); products then run only the terms those grades need
(:mod:`galinear.core.graded`): a vector times a vector in Cl(10) costs n**2 multiply-adds, not
4**n. A MultiVector built from a bare array finds its grades from the array's all-zero columns
(exact), so it takes the same kernels. Kernels are looked up once per grade pattern
(:mod:`galinear.core.mvfast`): a call on one multivector costs a few microseconds
(``benchmarks/bench_multivector.py``).

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

import numpy as np

from galinear._util import defer_operators
from galinear.core import graded
from galinear.core.algebrarotors import RotorMethods
from galinear.core.inverses import NotInvertibleError, inverse
from galinear.core.layout import Layout
from galinear.core.products import TABLE_MAX_N
from galinear.core.mvconstructors import ConstructorMethods
from galinear.core.mvconveniences import (
    COMPLEX_REASON,
    ConvenienceMethods,
    is_scalar_array,
    operand_error,
    scalar_operand,
)
from galinear.core.mvfast import infer_pattern, product_plan, run_plan, sandwich_plan
from galinear.core.mvindexing import IndexingMethods
from galinear.core.mvinterop import (
    InteropMethods,
    clifford_signature,
    from_kingdon,
    kingdon_signature,
)
from galinear.core.mvnorms import NormMethods, _is_scalar
from galinear.core.mvsubspaces import SubspaceMethods

__all__ = ["Algebra", "MultiVector"]


class Algebra(RotorMethods, Layout):
    r"""The Clifford algebra Cl(p, q, r) with batched numpy/numba operations.

    Parameters
    ----------
    p, q, r : int
        Numbers of basis vectors squaring to +1, -1 and 0. ``Algebra(3)`` is Euclidean Cl(3).
        Following the ``clifford`` package, the r null vectors come first, then the p positive
        ones, then the q negative ones.
    signature : tuple of int, optional
        ``(p,)``, ``(p, q)`` or ``(p, q, r)``; an alternative to the positional arguments.

    Attributes
    ----------
    n : int
        Dimension of the vector space, p + q + r.
    dim : int
        Number of coefficients, 2**n.
    metric : tuple of int
        Squares of the basis vectors, e.g. ``(1, 1, 1)``.
    signature : tuple of int
        ``(p, q, r)``.
    euclidean : bool
        True when every basis vector squares to +1 (required by the rotor methods).

    Notes
    -----
    The array methods come from :class:`~galinear.core.layout.Layout`, the rotor methods from
    :class:`~galinear.core.algebrarotors.RotorMethods`. It shares its module with
    :class:`MultiVector` because each constructs the other (:meth:`multivector`,
    :meth:`MultiVector.from_clifford`). Coefficients are stored in shortlex order (grade, then
    lexicographic): ``1, e1, e2, e3, e12, e13, e23, e123`` for n = 3. :attr:`bitmasks` maps
    shortlex positions to blade bitmasks and :attr:`shortlex_index` maps back.
    """

    def multivector(self, coefficients=None, /, **blades) -> "MultiVector":
        """A :class:`~galinear.MultiVector` by blade names: ``alg.multivector(e12=2, e1=1)`` or
        ``alg.multivector({"e12": 2, "1": 0.5})`` (kingdon's style); the same as
        :meth:`MultiVector.from_blades(alg, ...) <galinear.MultiVector.from_blades>`, whose name
        rules, batching and errors apply. The other constructors here return arrays."""
        return MultiVector.from_blades(self, coefficients, **blades)


class MultiVector(ConstructorMethods, IndexingMethods, ConvenienceMethods, SubspaceMethods, InteropMethods,
                  NormMethods):
    r"""A batch of multivectors of an :class:`Algebra`.

    Parameters
    ----------
    algebra : Algebra
    values : array_like, shape (..., 2**n)
        Coefficients in shortlex order; leading axes are batch axes. The array is used as is
        when it is already float32/float64 (no copy, like ``np.asarray``).
    grades : iterable of int, optional
        The grades ``values`` holds (checked: other coefficients must be zero), e.g. to declare
        grades a later value may fill. Default: read from ``values``, a grade being present when
        one of its coefficients is non-zero in some batch entry (:func:`galinear.core.mvfast.infer_pattern`).
        Products run only the terms the grades need.

    The values are read-only (writing a coefficient of another grade would make the grade record
    wrong): set blades with ``mv["e12"] = 2.0``, or build a new MultiVector. A float32/float64
    array is used without a copy: do not change it afterwards.

    Examples
    --------
    >>> from galinear import Algebra, MultiVector
    >>> alg = Algebra(3)
    >>> e1, e2, e3 = MultiVector.basis_vectors(alg)
    >>> R = ((e1 * e2) * 0.25).exp()          # a rotor
    >>> round(float((R @ e1)["e1"]), 12)     # R x ~R turns e1 by 2 * 0.25 rad in the e12 plane
    0.87758256189
    >>> (e1 * e2).known_grades                # tracked: a vector times a vector, n**2 terms, not 4**n
    (0, 2)
    """

    __slots__ = ("algebra", "_values", "_pattern", "_packed")
    # numpy must defer to the reflected operators (2.0 * mv, np.float64(2) + mv)
    __array_ufunc__ = None

    def __init__(self, algebra: Algebra, values=None, grades=None):
        if not isinstance(algebra, Algebra):
            raise TypeError(f"the first argument must be a galinear.Algebra, got {type(algebra).__name__}")
        if values is None:
            values = np.zeros(algebra.dim)
            grades = () if grades is None else grades
        if np.iscomplexobj(values):
            raise TypeError(COMPLEX_REASON)
        values = algebra._mv(values, "values", check_finite=False)
        pattern = None
        if grades is not None:
            pattern = graded.mask_of(grades)
            if any(not 0 <= g <= algebra.n for g in graded.grades_of(pattern)):
                raise ValueError(f"grades must lie in 0..{algebra.n} for {algebra!r}, got {tuple(grades)}")
            stray = np.abs(values[..., ((pattern >> algebra.grades) & 1) == 0]).max(initial=0.0)
            if stray > 0:
                raise ValueError(
                    f"values has coefficients of grades outside {tuple(graded.grades_of(pattern))} "
                    f"(largest {stray:.3g}); project first (mv.grade(...)) or leave grades=None"
                )
        else:
            pattern = infer_pattern(algebra, values)
        _init(self, algebra, values, pattern)

    @staticmethod
    def _wrap(algebra: Algebra, values: np.ndarray, pattern: int | None = None) -> "MultiVector":
        """A MultiVector of checked ``values``; the grades are inferred when pattern is None."""
        out = _new(MultiVector)
        _init(out, algebra, values, infer_pattern(algebra, values) if pattern is None else pattern)
        return out

    @classmethod
    def from_clifford(cls, mv, algebra: Algebra | None = None) -> "MultiVector":
        """From a ``clifford.MultiVector`` or MVArray; the algebra is read from its layout if
        omitted."""
        algebra = Algebra(*clifford_signature(mv)) if algebra is None else algebra
        return cls._wrap(algebra, algebra.from_clifford(mv), None)

    @classmethod
    def from_kingdon(cls, x, algebra: Algebra | None = None) -> "MultiVector":
        """From a kingdon multivector (any subset of blades, batched or not); its grades are kept.
        The algebra is read from its signature if omitted."""
        algebra = Algebra(*kingdon_signature(x)) if algebra is None else algebra
        pattern = graded.mask_of(bin(int(k)).count("1") for k in x.keys())
        return cls._wrap(algebra, from_kingdon(x, algebra), pattern)

    @property
    def values(self) -> np.ndarray:
        """The coefficients, shape (..., 2**n) in blade order; read-only when the grades are tracked."""
        values = self._values
        if values is None:  # held packed: the dense array is made once, on first use
            values = graded.unpack(self.algebra.n, self._packed, self._pattern)
            values.setflags(write=False)
            _set_values(self, values)
        return values

    def _packed_values(self) -> np.ndarray | None:
        """The packed columns of a tracked multivector (made once and kept; the values of a tracked
        multivector are read-only; with every grade, the values themselves); None when untracked."""
        packed = self._packed
        if packed is None:
            pattern, n = self._pattern, self.algebra.n
            if pattern is None or n > TABLE_MAX_N:
                return None
            if pattern == graded.ALL(n):
                packed = self._values
                _set_packed(self, packed)
                return packed
            packed = graded.pack(n, self._values, pattern)
            packed.setflags(write=False)
            _set_packed(self, packed)
        return packed

    def _data(self) -> np.ndarray:
        return self._values if self._values is not None else self._packed

    @property
    def known_grades(self) -> tuple[int, ...] | None:
        """The grades this multivector may hold, as tracked (None: not tracked, any grade)."""
        return None if self._pattern is None else graded.grades_of(self._pattern)

    def _like(self, values, pattern="same") -> "MultiVector":
        return MultiVector._wrap(self.algebra, values, self._pattern if pattern == "same" else pattern)

    # ---------------------------------------------------------------- array-like
    @property
    def shape(self) -> tuple[int, ...]:
        """Batch shape (the values' shape without the last axis)."""
        return self._data().shape[:-1]

    @property
    def ndim(self) -> int:
        return self._data().ndim - 1

    @property
    def dtype(self):
        return self._data().dtype

    def __bool__(self) -> bool:
        """True when any coefficient is nonzero (clifford's rule); a batch has no single truth
        value (numpy's rule): use ``mv.values.any()`` or ``(mv.values != 0).any(axis=-1)``."""
        if self._data().ndim > 1:
            raise ValueError("the truth value of a batch of multivectors is ambiguous; use mv.values.any() or "
                             "(mv.values != 0).any(axis=-1) for one value per multivector")
        return bool(np.any(self._data() != 0))

    def __len__(self) -> int:
        if self._data().ndim == 1:
            raise TypeError("len() of an unbatched MultiVector; it has no batch axis")
        return self._data().shape[0]

    def __iter__(self):
        if self.values.ndim == 1:
            raise TypeError("iteration over an unbatched MultiVector; use mv.values for its coefficients")
        for row in self.values:
            yield self._like(row)

    def astype(self, dtype) -> "MultiVector":
        return self._like(self.values.astype(dtype))

    def copy(self) -> "MultiVector":
        return self._like(self.values.copy())

    def __reduce__(self):  # pickle and copy: rebuild from (algebra, values, grades)
        return (MultiVector, (self.algebra, np.array(self.values), self.known_grades))

    def __deepcopy__(self, memo):
        return self.copy()

    def __array__(self, dtype=None, copy=None):
        return self.values if dtype is None else self.values.astype(dtype)

    # ---------------------------------------------------------------- coercion
    def _other(self, other):
        """(values, pattern) of another MultiVector of the same algebra, None for a real scalar or
        an array of them (a batch of scalars); else raise, naming the fix."""
        if isinstance(other, MultiVector):
            self._same_algebra(other)
            return other.values, other._pattern
        if _is_scalar(other) or is_scalar_array(other):
            return None
        raise operand_error(other)

    def _same_algebra(self, other: "MultiVector") -> None:
        if other.algebra is not self.algebra and other.algebra != self.algebra:
            raise ValueError(
                f"cannot combine multivectors of {self.algebra!r} and {other.algebra!r}; convert one of them first"
            )

    def _operand(self, other):
        """(values, pattern) of a MultiVector or a real scalar."""
        b = self._other(other)
        return (self._scalar_mv(other), 0b1) if b is None else b

    def _scalar_mv(self, s) -> np.ndarray:
        """Coefficients (..., 2**n) of the scalar s (a real number or an array of them)."""
        dtype = np.result_type(self.values.dtype, np.float32)
        if isinstance(s, np.ndarray) and s.ndim > 0:
            dtype = np.result_type(dtype, s.dtype)
        out = np.zeros(np.shape(s) + (self.algebra.dim,), dtype=dtype)
        out[..., 0] = s
        return out

    # ---------------------------------------------------------------- linear structure
    def __add__(self, other):
        b = self._other(other)
        if b is None:
            if is_scalar_array(other):
                return self._like(self.values + self._scalar_mv(other), _union(self._pattern, 0b1))
            out = self.values.copy()
            out[..., 0] += other
            return self._like(out, _union(self._pattern, 0b1))
        return self._like(self.values + b[0], _union(self._pattern, b[1]))

    __radd__ = __add__

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __neg__(self):
        return self._like(-self.values)

    def __pos__(self):
        return self

    # ---------------------------------------------------------------- products
    def _binary(self, kind: str, other, reflected: bool = False):
        if not reflected and type(other) is MultiVector and self._pattern is not None and other._pattern is not None:
            if other.algebra is not self.algebra:
                self._same_algebra(other)
            plan = product_plan(self.algebra, kind, self._pattern, other._pattern)
            if plan is not None:
                a = self._packed if self._packed is not None else self._packed_values()
                b = other._packed if other._packed is not None else other._packed_values()
                return _wrap_plan(self.algebra, plan, run_plan(plan, a, b))
        b = self._other(other)
        if b is None:
            if kind in ("gp", "op"):
                return self._like(self.values * scalar_operand(other))
            b = (self._scalar_mv(other), 0b1)
        a = (self.values, self._pattern)
        if reflected:
            a, b = b, a
        if a[1] is None and b[1] is None:
            return self._like(getattr(self.algebra, kind)(a[0], b[0]), None)
        values, pattern = graded.product(self.algebra, kind, a[0], a[1], b[0], b[1])
        return self._like(values, pattern)

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
        b = MultiVector._wrap(self.algebra, *self._operand(other))
        left, right = self.lc(b), self.rc(b)
        out = left.values + right.values
        out[..., 0] -= self.algebra.scalar_product(self.values, b.values)
        return self._like(out, _union(left._pattern, right._pattern))

    def __or__(self, other):
        return self.inner(other)

    def __ror__(self, other):
        values, pattern = self._operand(other)
        shape = np.broadcast_shapes(values.shape, self.values.shape)
        return MultiVector._wrap(self.algebra, np.broadcast_to(values, shape), pattern).inner(self)

    def scalar_product(self, other) -> np.ndarray:
        """:math:`\\langle a b \\rangle_0`, an array of the batch shape."""
        return self.algebra.scalar_product(self.values, self._operand(other)[0])

    def sandwich(self, x) -> "MultiVector":
        r""":math:`R\, x\, \tilde R` (``R @ x``); for a unit rotor R the rotation of x.

        Odd versors get no extra sign (clifford's convention for ``R * x * ~R``; kingdon's ``>>``
        applies the grade involution to x for odd R instead). With known grades, one fused
        kernel writes only the blades of the result that are not identically zero.
        """
        if not isinstance(x, MultiVector):
            raise TypeError(f"R @ x needs a MultiVector x, got {type(x).__name__}")
        self._same_algebra(x)
        if self._pattern is None and x._pattern is None:
            alg = self.algebra
            return self._like(alg.gp(alg.gp(self.values, x.values), alg.reverse(self.values)), None)
        if self._pattern is not None and x._pattern is not None:
            plan = sandwich_plan(self.algebra, self._pattern, x._pattern)
            if plan is not None:
                a = self._packed if self._packed is not None else self._packed_values()
                b = x._packed if x._packed is not None else x._packed_values()
                return _wrap_plan(self.algebra, plan, run_plan(plan, a, b))
        values, pattern = graded.sandwich(self.algebra, self.values, self._pattern, x.values, x._pattern)
        return self._like(values, pattern)

    def __matmul__(self, other):
        return self.sandwich(other)

    def __invert__(self):
        return self._like(self.algebra.reverse(self.values))

    def reverse(self) -> "MultiVector":
        return ~self

    def involute(self) -> "MultiVector":
        return self._like(self.algebra.involute(self.values))

    def conjugate(self) -> "MultiVector":
        return self._like(self.algebra.conjugate(self.values))

    # ---------------------------------------------------------------- inverse, powers, division
    def inv(self) -> "MultiVector":
        """Inverse of every invertible multivector (:func:`~galinear.core.inverses.inverse`); NotInvertibleError otherwise."""
        return self._like(inverse(self.algebra, self.values), None)

    def __pow__(self, exponent):
        if isinstance(exponent, (bool, np.bool_)) or not isinstance(exponent, (int, np.integer)):
            raise TypeError(f"only integer powers are defined, got {exponent!r}; for exp use mv.exp()")
        exponent = int(exponent)
        base = self.inv() if exponent < 0 else self
        exponent = abs(exponent)
        result = None
        power = base
        while exponent:
            if exponent & 1:
                result = power if result is None else result * power
            exponent >>= 1
            if exponent:
                power = power * power
        if result is None:
            ones = np.broadcast_to(self._scalar_mv(1.0).astype(self.values.dtype), self.values.shape).copy()
            return self._like(ones, 0b1)
        return result

    def __truediv__(self, other):
        b = self._other(other)
        if b is None:
            divisor = scalar_operand(other)
            if np.any(np.asarray(divisor) == 0):
                zeros = int(np.count_nonzero(np.asarray(divisor) == 0))
                raise NotInvertibleError(f"division by zero: {zeros} of {np.size(divisor)} scalar divisor(s) are 0, "
                                         "and 0 has no inverse; divide by a non-zero number")
            return self._like(self.values / divisor)
        return self * MultiVector._wrap(self.algebra, inverse(self.algebra, b[0]))

    def __rtruediv__(self, other):
        if self._other(other) is not None:  # pragma: no cover - handled by __truediv__
            return NotImplemented
        return self._like(inverse(self.algebra, self.values) * scalar_operand(other), None)

    def _reset(self, values: np.ndarray, pattern: int | None) -> None:
        """Replace the coefficients (``mv["e12"] = 2.0``); the grades are inferred when pattern is None."""
        _init(self, self.algebra, values, infer_pattern(self.algebra, values) if pattern is None else pattern)


defer_operators(MultiVector)  # a traced multivector on the right takes the operation

_new = object.__new__
_set_algebra = MultiVector.algebra.__set__
_set_values = MultiVector._values.__set__
_set_pattern = MultiVector._pattern.__set__
_set_packed = MultiVector._packed.__set__


def _init(mv: MultiVector, algebra: Algebra, values: np.ndarray | None, pattern: int | None,
          packed: np.ndarray | None = None) -> None:
    """Set the slots: dense ``values``, or (tracked only) ``packed`` columns with values None."""
    if values is not None and pattern is not None and values.flags.writeable:
        values = values.view()
        values.setflags(write=False)
    if packed is not None and packed.flags.writeable:
        packed.setflags(write=False)
    _set_algebra(mv, algebra)
    _set_values(mv, values)
    _set_pattern(mv, pattern)
    _set_packed(mv, packed)


def _wrap_plan(algebra: Algebra, plan, packed: np.ndarray) -> MultiVector:
    """The result of a plan's kernel (:mod:`galinear.core.mvfast`) as a MultiVector."""
    out = _new(MultiVector)
    _set_algebra(out, algebra)
    _set_values(out, packed if plan[3] else None)
    _set_pattern(out, plan[1])
    _set_packed(out, packed)
    return out


def _union(p: int | None, q: int | None) -> int | None:
    return None if p is None or q is None else p | q
