r"""Symbolic multivectors over Cl(p, q, r) with sympy coefficients.

The blade order (shortlex) and the product signs are those of :mod:`galinear.blades`, so a
:class:`MultiVector` of Cl(n) lines up coefficient by coefficient with the arrays of the numeric
core. Products follow the usual grade rules: with :math:`A_r, B_s` of grades r and s,

- geometric product :math:`A B` (all grades),
- outer product :math:`A \wedge B = \langle A B \rangle_{r+s}`,
- left contraction :math:`A \rfloor B = \langle A B \rangle_{s-r}` (zero if r > s),
- right contraction :math:`A \lfloor B = \langle A B \rangle_{r-s}` (zero if s > r),
- scalar product :math:`A * B = \langle A B \rangle_0`,
- inner product :math:`A | B = \langle A B \rangle_{|r-s|}` (scalars included),
- regressive product :math:`A \& B = \star^{-1}(\star A \wedge \star B)`,

extended bilinearly; ``R @ x`` is :math:`R x \tilde R`, ``a / b`` is :math:`a b^{-1}`,
``A.inv()`` the inverse, ``meet`` / ``join`` the intersection and span of two blades
(exact, :mod:`galinear.symbolic.subspaces`) and ``project`` /
``reject`` :math:`(x \rfloor B) \rfloor B^{-1}` and the rest, the operator meanings of the
numeric :class:`galinear.MultiVector`. Reverse, grade involution and Clifford conjugation multiply grade g by
:math:`(-1)^{g(g-1)/2}`, :math:`(-1)^g` and :math:`(-1)^{g(g+1)/2}`.
"""
from __future__ import annotations

from itertools import combinations

import sympy as sp

from galinear import blades
from galinear._util import defer_operators
from galinear.symbolic.inverses import MultiVectorInverse
from galinear.symbolic.printing import MultiVectorPrinting
from galinear.symbolic.product_table import product_rules
from galinear.symbolic.subspaces import MultiVectorSubspaces

__all__ = ["MultiVector", "symbols", "vector", "bivector", "scalar", "blade", "basis", "product_rules"]


def _as_metric(metric) -> tuple[int, ...]:
    if isinstance(metric, bool):
        raise TypeError(f"metric must be an int n or a tuple of +1/-1/0, got {metric!r}")
    if isinstance(metric, int):
        return (1,) * blades.check_dimension(metric)
    try:
        out = tuple(int(m) for m in metric)
    except TypeError:
        raise TypeError(f"metric must be an int n or a tuple of +1/-1/0, got {metric!r}") from None
    if any(m not in (-1, 0, 1) for m in out):
        raise ValueError(f"metric entries must be +1, -1 or 0, got {out}")
    blades.check_dimension(len(out))
    return out


def _grade_sign(kind: str, g: int) -> int:
    if kind == "reverse":
        return -1 if (g * (g - 1) // 2) % 2 else 1
    if kind == "involute":
        return -1 if g % 2 else 1
    if kind == "conjugate":
        return -1 if (g * (g + 1) // 2) % 2 else 1
    raise ValueError(kind)


class MultiVector(MultiVectorInverse, MultiVectorPrinting, MultiVectorSubspaces):
    r"""A multivector of Cl(metric) with sympy coefficients in shortlex order.

    Parameters
    ----------
    metric : int or tuple of int
        n for Euclidean Cl(n), or the squares (+1, -1, 0) of the basis vectors.
    coefficients : sequence, optional
        2**n entries (sympified); zeros if omitted.

    Examples
    --------
    >>> a = vector(3, "a"); b = vector(3, "b")
    >>> sp.expand((a * b).grade(0) - a.lc(b).grade(0)) == 0
    True
    """

    __slots__ = ("metric", "n", "coefficients")
    __array_priority__ = 1000

    def __init__(self, metric, coefficients=None):
        self.metric = _as_metric(metric)
        self.n = len(self.metric)
        size = 1 << self.n
        if coefficients is None:
            coefficients = [sp.S.Zero] * size
        coefficients = [sp.sympify(c) for c in coefficients]
        if len(coefficients) != size:
            raise ValueError(
                f"Cl({self.n}) multivectors have 2**{self.n} = {size} coefficients, got {len(coefficients)}"
            )
        self.coefficients = tuple(coefficients)

    # ---------------------------------------------------------------- construction helpers
    def _new(self, coefficients) -> "MultiVector":
        return MultiVector(self.metric, coefficients)

    def _coerce(self, other) -> "MultiVector":
        if isinstance(other, MultiVector):
            if other.metric != self.metric:
                raise ValueError(
                    f"cannot combine multivectors of different algebras: metric {self.metric} and {other.metric}"
                )
            return other
        value = sp.sympify(other)
        if isinstance(value, sp.MatrixBase) or not isinstance(value, sp.Expr):
            raise TypeError(f"cannot combine a multivector with {type(other).__name__}")
        return self._new([value] + [0] * ((1 << self.n) - 1))

    # ---------------------------------------------------------------- linear structure
    def __add__(self, other):
        other = self._coerce(other)
        return self._new([a + b for a, b in zip(self.coefficients, other.coefficients)])

    __radd__ = __add__

    def __sub__(self, other):
        other = self._coerce(other)
        return self._new([a - b for a, b in zip(self.coefficients, other.coefficients)])

    def __rsub__(self, other):
        return self._coerce(other) - self

    def __neg__(self):
        return self._new([-a for a in self.coefficients])

    def __truediv__(self, other):
        r"""``a / b``: :math:`a\, b^{-1}` for a multivector b (see :meth:`inv`), else division by a scalar."""
        if isinstance(other, MultiVector):
            return self.gp(self._coerce(other).inv())
        value = sp.sympify(other)
        return self._new([a / value for a in self.coefficients])

    def __rtruediv__(self, other):
        return self.inv() * sp.sympify(other)

    # ---------------------------------------------------------------- products
    def _product(self, other, keep) -> "MultiVector":
        other = self._coerce(other)
        terms = [[] for _ in range(1 << self.n)]
        a, b = self.coefficients, other.coefficients
        for i, j, k, sign, gi, gj, gk in product_rules(self.metric):
            if a[i] == 0 or b[j] == 0 or not keep(gi, gj, gk):
                continue
            terms[k].append(sign * a[i] * b[j])
        return self._new([sp.Add(*t) for t in terms])  # one Add per blade: linear, not quadratic

    def gp(self, other) -> "MultiVector":
        """Geometric product."""
        return self._product(other, lambda gi, gj, gk: True)

    def op(self, other) -> "MultiVector":
        """Outer (wedge) product."""
        return self._product(other, lambda gi, gj, gk: gk == gi + gj)

    def lc(self, other) -> "MultiVector":
        """Left contraction ``self _| other``."""
        return self._product(other, lambda gi, gj, gk: gk == gj - gi)

    def rc(self, other) -> "MultiVector":
        """Right contraction ``self |_ other``."""
        return self._product(other, lambda gi, gj, gk: gk == gi - gj)

    def scalar_product(self, other) -> sp.Expr:
        """Scalar product :math:`\\langle A B \\rangle_0`."""
        other = self._coerce(other)
        total = sp.S.Zero
        for i, j, k, sign, gi, gj, gk in product_rules(self.metric):
            if k == 0:
                total += sign * self.coefficients[i] * other.coefficients[j]
        return total

    def __mul__(self, other):
        if isinstance(other, MultiVector):
            return self.gp(other)
        value = sp.sympify(other)
        return self._new([a * value for a in self.coefficients])

    def __rmul__(self, other):
        if isinstance(other, MultiVector):  # pragma: no cover - handled by __mul__
            return other.gp(self)
        value = sp.sympify(other)
        return self._new([value * a for a in self.coefficients])

    def __xor__(self, other):
        return self.op(other)

    def __rxor__(self, other):
        return self._coerce(other).op(self)

    def __lshift__(self, other):
        """``a << b`` is the left contraction ``a _| b``."""
        return self.lc(other)

    def __rshift__(self, other):
        """``a >> b`` is the right contraction ``a |_ b``."""
        return self.rc(other)

    def __pow__(self, exponent: int):
        """Integer powers; negative ones are powers of :meth:`inv`."""
        if isinstance(exponent, bool) or not isinstance(exponent, int):
            raise ValueError(f"only integer powers are defined, got {exponent!r}")
        base = self.inv() if exponent < 0 else self
        out = self._coerce(1)
        for _ in range(abs(exponent)):
            out = out.gp(base)
        return out

    def inner(self, other) -> "MultiVector":
        r"""Inner product ``|``: :math:`\sum_{r,s} \langle A_r B_s \rangle_{|r-s|}`, scalars included.

        The same choice as :class:`galinear.MultiVector` (kingdon's ``|``; clifford's drops the
        terms with a scalar factor).
        """
        other = self._coerce(other)
        out = list(self.lc(other).coefficients)
        rc = self.rc(other).coefficients
        out = [a + b for a, b in zip(out, rc)]
        out[0] -= self.scalar_product(other)
        return self._new(out)

    def __or__(self, other):
        return self.inner(other)

    def __ror__(self, other):
        return self._coerce(other).inner(self)

    def sandwich(self, x) -> "MultiVector":
        r"""``R @ x`` = :math:`R\, x\, \tilde R`, as in the numeric class."""
        if not isinstance(x, MultiVector):
            raise TypeError(f"R @ x needs a MultiVector x, got {type(x).__name__}")
        return self.gp(self._coerce(x)).gp(self.reverse())

    def __matmul__(self, other):
        return self.sandwich(other)

    def __call__(self, *grades) -> "MultiVector":
        """Sum of the listed grade parts, always a MultiVector: ``A(2)``, ``A(0, 2)``."""
        if not grades:
            raise ValueError("A(...) needs at least one grade, e.g. A(2)")
        for g in grades:
            if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= self.n:
                raise ValueError(f"grades must be integers in 0..{self.n}, got {g!r}")
        grade_of = blades.blade_grades(self.n).tolist()
        return self._new([c if gr in grades else 0 for gr, c in zip(grade_of, self.coefficients)])

    # ---------------------------------------------------------------- duality
    def dual(self, kind: str = "auto") -> "MultiVector":
        r"""Dual, as in :meth:`galinear.MultiVector.dual`: ``"polarity"`` :math:`A I^{-1}`,
        ``"hodge"`` the right complement (:math:`e_A \wedge \star e_A = I`, metric-free),
        ``"auto"`` polarity unless the metric is degenerate."""
        return self._dual(kind, inverse=False)

    def undual(self, kind: str = "auto") -> "MultiVector":
        """Inverse of :meth:`dual` with the same ``kind``."""
        return self._dual(kind, inverse=True)

    def _dual(self, kind, inverse):
        if kind == "auto":
            kind = "hodge" if 0 in self.metric else "polarity"
        full = (1 << self.n) - 1
        I = self._new([0] * full + [1])
        if kind == "polarity":
            if 0 in self.metric:
                raise ValueError("the polarity dual needs an invertible pseudoscalar; use dual(kind='hodge')")
            return self.gp(I) if inverse else self.gp(I.inv())
        if kind != "hodge":
            raise ValueError(f"kind must be 'auto', 'polarity' or 'hodge', got {kind!r}")
        masks = blades.shortlex_bitmasks(self.n).tolist()
        pos = blades.bitmask_to_shortlex(self.n)
        out = [sp.S.Zero] * (full + 1)
        for i, m in enumerate(masks):
            target = int(pos[full ^ m])
            sign = blades.reorder_sign(m, full ^ m)
            if inverse:  # star(e_A) = s_A e_{A^c}  =>  star^-1(e_{A^c}) = s_A e_A
                out[i] = sign * self.coefficients[target]
            else:
                out[target] = sign * self.coefficients[i]
        return self._new(out)

    def regressive(self, other) -> "MultiVector":
        r"""Regressive product ``&``: :math:`\star^{-1}(\star A \wedge \star B)`, metric-free."""
        other = self._coerce(other)
        return self.dual("hodge").op(other.dual("hodge")).undual("hodge")

    def __and__(self, other):
        return self.regressive(other)

    def __rand__(self, other):
        return self._coerce(other).regressive(self)

    # ---------------------------------------------------------------- unary operations
    def _graded(self, kind) -> "MultiVector":
        grades = blades.blade_grades(self.n).tolist()
        return self._new([_grade_sign(kind, g) * c for g, c in zip(grades, self.coefficients)])

    def reverse(self) -> "MultiVector":
        """Reverse :math:`\\tilde A`: grade g times :math:`(-1)^{g(g-1)/2}`."""
        return self._graded("reverse")

    def __invert__(self):
        return self.reverse()

    def involute(self) -> "MultiVector":
        """Grade involution :math:`\\hat A`: grade g times :math:`(-1)^g`."""
        return self._graded("involute")

    def conjugate(self) -> "MultiVector":
        """Clifford conjugate :math:`\\bar A`: grade g times :math:`(-1)^{g(g+1)/2}`."""
        return self._graded("conjugate")

    def grade(self, g: int):
        """Grade-g part (a MultiVector); ``grade(0)`` returns the scalar part as an expression."""
        if isinstance(g, bool) or not isinstance(g, int) or not 0 <= g <= self.n:
            raise ValueError(f"grade must be an integer in 0..{self.n}, got {g!r}")
        grades = blades.blade_grades(self.n).tolist()
        if g == 0:
            return self.coefficients[0]
        return self._new([c if gr == g else 0 for gr, c in zip(grades, self.coefficients)])

    def grade_part(self, g: int) -> "MultiVector":
        """Grade-g part as a MultiVector (also for g = 0)."""
        grades = blades.blade_grades(self.n).tolist()
        return self._new([c if gr == g else 0 for gr, c in zip(grades, self.coefficients)])

    def grades(self) -> tuple[int, ...]:
        """Grades with a coefficient that is not identically zero (after expansion)."""
        grades = blades.blade_grades(self.n).tolist()
        return tuple(sorted({g for g, c in zip(grades, self.coefficients) if sp.expand(c) != 0}))

    def norm_squared(self) -> sp.Expr:
        """:math:`\\langle A \\tilde A \\rangle_0` (the sum of squared coefficients in Cl(n))."""
        return self.scalar_product(self.reverse())

    def norm(self) -> sp.Expr:
        """:math:`\\sqrt{\\langle A \\tilde A \\rangle_0}`."""
        return sp.sqrt(self.norm_squared())

    # ---------------------------------------------------------------- sympy helpers
    def applyfunc(self, func) -> "MultiVector":
        """Apply ``func`` to every coefficient (e.g. ``sympy.simplify``)."""
        return self._new([func(c) for c in self.coefficients])

    def simplify(self) -> "MultiVector":
        return self.applyfunc(sp.simplify)

    def expand(self) -> "MultiVector":
        return self.applyfunc(sp.expand)

    def subs(self, *args, **kwargs) -> "MultiVector":
        return self.applyfunc(lambda c: sp.sympify(c).subs(*args, **kwargs))

    def is_zero(self, simplify=sp.simplify) -> bool:
        """True if every coefficient simplifies to exactly 0 (``simplify(c) == 0``)."""
        return all(simplify(c) == 0 for c in self.coefficients)

    def free_symbols(self) -> set:
        out = set()
        for c in self.coefficients:
            out |= c.free_symbols
        return out

    def __eq__(self, other):
        """Structural equality of the expanded coefficients (use :meth:`is_zero` for proofs)."""
        try:
            other = self._coerce(other)
        except (TypeError, ValueError):
            return NotImplemented
        return all(sp.expand(a - b) == 0 for a, b in zip(self.coefficients, other.coefficients))

    __hash__ = None

# ---------------------------------------------------------------------- constructors
def _sym(prefix, suffix, **assumptions):
    return sp.Symbol(f"{prefix}{suffix}", **assumptions)


def symbols(metric, prefix: str = "a", grades=None, **assumptions) -> MultiVector:
    """A multivector with one symbol per blade, named ``<prefix>`` + blade indices.

    ``symbols(3, "a")`` gives :math:`a_0 + a_1 e_1 + \\dots + a_{123} e_{123}`; ``grades``
    restricts to the listed grades (others are 0). Extra keywords are sympy assumptions.
    """
    metric = _as_metric(metric)
    n = len(metric)
    names = blades.blade_names(n)
    grade_of = blades.blade_grades(n).tolist()
    coefficients = []
    for name, g in zip(names, grade_of):
        if grades is not None and g not in grades:
            coefficients.append(0)
            continue
        suffix = "0" if name == "1" else name[1:].replace("(", "_").replace(")", "_")
        coefficients.append(_sym(prefix, suffix, **assumptions))
    return MultiVector(metric, coefficients)


def vector(metric, values, **assumptions) -> MultiVector:
    """Vector :math:`\\sum_i v_i e_i` from n values, or from a symbol prefix (``"v"`` -> v1..vn)."""
    metric = _as_metric(metric)
    n = len(metric)
    if isinstance(values, str):
        values = [sp.Symbol(f"{values}{i + 1}", **assumptions) for i in range(n)]
    values = list(values)
    if len(values) != n:
        raise ValueError(f"a vector of Cl({n}) needs {n} values, got {len(values)}")
    coefficients = [0] * (1 << n)
    for i, v in enumerate(values):
        coefficients[1 + i] = v
    return MultiVector(metric, coefficients)


def bivector(metric, values, **assumptions) -> MultiVector:
    """Bivector from C(n,2) values in :func:`galinear.blades.bivector_pairs` order, or a prefix.

    With a prefix ``"b"`` the coefficients are symbols b12, b13, ...
    """
    metric = _as_metric(metric)
    n = len(metric)
    pairs = blades.bivector_pairs(n).tolist()
    if isinstance(values, str):
        sep = "_" if n >= 10 else ""
        values = [sp.Symbol(f"{values}{i + 1}{sep}{j + 1}", **assumptions) for i, j in pairs]
    values = list(values)
    if len(values) != len(pairs):
        raise ValueError(f"a bivector of Cl({n}) needs C({n},2) = {len(pairs)} values, got {len(values)}")
    coefficients = [0] * (1 << n)
    pos = blades.bitmask_to_shortlex(n)
    for (i, j), v in zip(pairs, values):
        coefficients[int(pos[(1 << i) | (1 << j)])] = v
    return MultiVector(metric, coefficients)


def scalar(metric, value) -> MultiVector:
    metric = _as_metric(metric)
    return MultiVector(metric, [value] + [0] * ((1 << len(metric)) - 1))


defer_operators(MultiVector)  # a traced multivector on the right takes the operation


def blade(metric, name: str, value=1) -> MultiVector:
    """``value`` times the basis blade called ``name`` (e.g. ``"e13"``, ``"1"``)."""
    metric = _as_metric(metric)
    n = len(metric)
    coefficients = [0] * (1 << n)
    coefficients[blades.blade_index(n, name)] = value
    return MultiVector(metric, coefficients)


def basis(metric) -> tuple[MultiVector, ...]:
    """All basis blades in shortlex order."""
    metric = _as_metric(metric)
    return tuple(blade(metric, name) for name in blades.blade_names(len(metric)))


def bivector_coefficients(b: MultiVector) -> list:
    """The C(n,2) coefficients of the grade-2 part of ``b`` in bivector_pairs order."""
    pos = blades.bitmask_to_shortlex(b.n)
    return [b.coefficients[int(pos[(1 << i) | (1 << j)])] for i, j in combinations(range(b.n), 2)]
