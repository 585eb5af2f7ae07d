r"""Tracing a Python function of multivectors into a straight-line program (sympy only).

:func:`trace` calls the user's function once with :class:`Traced` multivectors whose
coefficients are sympy symbols, one per blade that the input pattern allows. Every operator of
:class:`galinear.symbolic.MultiVector` is available (``* ^ | << >> & ~ @``, ``A(k)`` and
``.grade(k)``, ``dual``, ``undual``, ``reverse``, ``involute``, ``conjugate``, ``inv``, scalar
``+ - * /``) and a few steps that are not polynomial:

``inv()`` and ``a / b``
    The closed-form inverse :math:`A^{-1} = N(A)/\langle A N(A)\rangle_0` (Hitzer and Sangwine
    2017, n <= 5). The denominator becomes a *guarded* step: the generated kernel checks that it
    is nonzero on every row and raises :class:`KernelDomainError` otherwise.
``sqrt(s)``, ``norm(x)``
    The square root of a scalar part (guarded: the argument must be >= 0); ``norm(x)`` is
    :math:`\sqrt{|\langle x \tilde x\rangle_0|}`, the numeric core's norm.
``exp(B)``
    The exponential of a bivector from the closed forms of :mod:`galinear.symbolic.signatures`:
    :math:`e^b = C(\lambda) + S(\lambda) b` for a simple b (:math:`b^2 = \lambda`; every
    bivector for n <= 3, or one that is simple by its pattern), and in a degenerate
    algebra where :math:`\sigma_2 = \langle W_2 W_2\rangle_0` vanishes identically (3D PGA) the
    screw form :math:`e^B = C(\sigma_1) + S(\sigma_1)(B + W_2) + T(\sigma_1) Y_1`
    (:math:`W_2 = B\wedge B/2`, :math:`Y_1 = \langle B W_2\rangle_2`). :math:`C, S, T` are
    entire functions of the square (see :class:`Gm`), so no branch is taken on the sign of
    :math:`\lambda` in the maths; the kernels evaluate them stably on both sides of 0.

The result is a :class:`Graph`: the inputs (symbols and blade names), ordered steps (symbol,
expression, kind) and the output coefficients with their blade names. Blades that are zero by
the input patterns are never read and never written; lowering (CSE, counting, choosing the
cheaper of two orders) is :mod:`galinear.symbolic.lowering`.
"""
from __future__ import annotations

import inspect
import linecache
import math
import os
import sys
from dataclasses import dataclass, field

import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import MultiVector, _as_metric
from galinear.symbolic.polynomials import Probe, term_bound

__all__ = ["Gm", "Traced", "Graph", "Step", "trace", "input_blades", "KernelDomainError", "CompileTooLarge",
           "MAX_TRACE_TERMS", "MAX_TRACE_N", "estimate_seconds", "exact_number"]

#: Largest n whose functions are traced: 2**n coefficients per multivector, 4**n products.
MAX_TRACE_N = 8


#: Most product terms a traced program may hold before a compile is refused (``max_terms``):
#: about two minutes of compiling on a 2-core machine (see :func:`estimate_seconds`).
MAX_TRACE_TERMS = 12_000


def estimate_seconds(terms: int) -> float:
    """Rough seconds from tracing to a numba kernel's first call for ``terms`` product terms:
    about 12 ms a term, measured with other work on the 2-core machine (the full geometric product
    of Cl(6), 4,096 terms, took 48 s; of Cl(7), 16,384 terms, 334 s: CSE and numba's compile of
    the straight-line code grow faster than the terms)."""
    return 0.012 * terms


class CompileTooLarge(ValueError, MemoryError):
    """A compile was refused before it ran: its program is larger than the stated bound."""


class KernelDomainError(ValueError):
    """A generated kernel met a value outside the domain of one of its steps (a zero denominator
    of an inverse, a negative argument of a square root)."""


class Gm(sp.Function):
    r""":math:`G_m(\lambda) = \frac{d^m}{d\lambda^m}\cosh\sqrt\lambda`, an entire function of
    :math:`\lambda` for every m (``Gm(m, lam)``).

    :math:`G_0 = C = \cosh\sqrt\lambda` (:math:`\cos\sqrt{-\lambda}` for :math:`\lambda < 0`),
    :math:`S = \sinh\sqrt\lambda/\sqrt\lambda = 2 G_1`, :math:`T = (C - S)/\lambda = 4 G_2`. Its
    series is :math:`\sum_j \frac{(j+m)!}{j!\,(2j+2m)!}\lambda^j`; from :math:`4\lambda C'' + 2C' = C`,
    :math:`G_{m+1} = (G_{m-1} - (4m-2) G_m)/(4\lambda)`. The derivative in :math:`\lambda` is
    :math:`G_{m+1}`, which is how generated backward passes stay exact.
    """

    nargs = 2

    @classmethod
    def eval(cls, m, lam):
        if m.is_Integer and m < 0:
            raise ValueError("Gm(m, lam) needs m >= 0")
        if lam.is_zero and m.is_Integer:
            return sp.factorial(m) / sp.factorial(2 * m)
        return None

    def fdiff(self, argindex=2):
        if argindex != 2:
            raise sp.ArgumentIndexError(self, argindex)
        m, lam = self.args
        return Gm(m + 1, lam)

    def _eval_rewrite_as_cosh(self, m, lam, **kwargs):
        if not m.is_Integer:
            return None
        z = sp.Dummy("lam")
        return sp.diff(sp.cosh(sp.sqrt(z)), z, int(m)).subs(z, lam)

    def series_value(self, terms: int = 40):
        m, lam = self.args
        m = int(m)
        return sum(sp.factorial(j + m) / (sp.factorial(j) * sp.factorial(2 * j + 2 * m)) * lam ** j
                   for j in range(terms))


@dataclass(frozen=True)
class Step:
    """One assignment ``symbol = expr``.

    kind ``"let"`` (polynomial in earlier symbols: lowering may substitute it), ``"recip"``
    (``1/expr``; the kernel checks ``expr != 0``), ``"sqrt"`` (``sqrt(expr)``, checks ``expr >= 0``),
    ``"abs"`` (``|expr|``) or ``"g"`` (``Gm(m, expr)``, with ``order`` m). ``what`` names the
    user's operation for error messages.
    """

    symbol: sp.Symbol
    expr: sp.Expr
    kind: str = "let"
    order: int = 0
    what: str = ""


@dataclass
class Graph:
    """A traced function: inputs, steps and outputs (see the module notes)."""

    metric: tuple
    inputs: tuple  # ((name, (Symbol, ...), (blade name, ...)), ...)
    steps: list = field(default_factory=list)
    outputs: tuple = ()  # expressions, one per output blade
    output_blades: tuple = ()
    source_name: str = "kernel"
    bounds: dict = field(default_factory=dict)  # let symbol -> bound on its expanded terms

    @property
    def n(self) -> int:
        return len(self.metric)

    def input_blades(self) -> dict:
        return {name: names for name, _, names in self.inputs}

    def barrier_symbols(self) -> set:
        return {s.symbol for s in self.steps if s.kind != "let"}


# ---------------------------------------------------------------------------- input patterns
_PATTERN_HELP = ('a grade (2), a list of grades ([0, 2]), "even", "odd", "full", "scalar", "vector", '
                 '"bivector" or a list of blade names (["e12", "e13"])')


def input_blades(metric, pattern, name: str = "x") -> tuple[int, ...]:
    """Shortlex positions of the blades an input pattern allows (see :func:`trace`)."""
    metric = _as_metric(metric)
    n = len(metric)
    grades = blades.blade_grades(n).tolist()
    names = blades.blade_names(n)
    words = {"scalar": [0], "vector": [1], "bivector": [2], "trivector": [3], "pseudoscalar": [n],
             "even": list(range(0, n + 1, 2)), "odd": list(range(1, n + 1, 2)), "full": list(range(n + 1))}
    if isinstance(pattern, bool):
        raise ValueError(f"input {name!r}: {pattern!r} is not a pattern; give {_PATTERN_HELP}")
    if isinstance(pattern, str):
        key = pattern.strip().lower()
        if key in words:
            return tuple(i for i, g in enumerate(grades) if g in words[key])
        if key in names or pattern in names:
            return (names.index(pattern),)
        raise ValueError(f"input {name!r}: unknown pattern {pattern!r}; give {_PATTERN_HELP}")
    if isinstance(pattern, int):
        pattern = [pattern]
    try:
        items = list(pattern)
    except TypeError:
        raise ValueError(f"input {name!r}: {pattern!r} is not a pattern; give {_PATTERN_HELP}") from None
    if not items:
        raise ValueError(f"input {name!r}: the pattern is empty; give {_PATTERN_HELP}")
    if all(isinstance(g, int) and not isinstance(g, bool) for g in items):
        bad = [g for g in items if not 0 <= g <= n]
        if bad:
            raise ValueError(f"input {name!r}: grades {bad} are outside 0..{n} for n = {n}")
        return tuple(i for i, g in enumerate(grades) if g in items)
    if all(isinstance(b, str) for b in items):
        out = sorted({blades.blade_index(n, b.strip()) for b in items})
        return tuple(out)
    raise ValueError(f"input {name!r}: a pattern lists grades or blade names, not both; got {items!r}")


def _symbol_name(arg: str, blade: str) -> str:
    return f"{arg}_{'s' if blade == '1' else blade.replace('(', '').replace(')', '_')}"


# ---------------------------------------------------------------------------- the tracer
class _Recorder:
    def __init__(self, metric):
        self.metric = metric
        self.steps: list[Step] = []
        self.counter = 0
        self.probe = Probe()
        self.bounds: dict = {}
        self.product_terms = 0
        self.max_terms = MAX_TRACE_TERMS
        self.exact = False
        self._in_inputs: dict = {}
        self._expanded_steps = 0

    def fresh(self, prefix="t"):
        self.counter += 1
        return sp.Symbol(f"_{prefix}{self.counter}")

    def let(self, expr):
        """A symbol for ``expr`` unless it is already atomic (a symbol, a number, -symbol), or 0
        when ``expr`` is identically zero in the inputs (decided by the probe, see
        :mod:`galinear.symbolic.polynomials`): later steps then see the exact zero pattern."""
        expr = sp.expand(expr) if expr.is_Add or expr.is_Mul else expr
        if expr.is_Atom or (expr.is_Mul and len(expr.args) == 2 and expr.args[0].is_Number and expr.args[1].is_Atom):
            return expr
        if self.is_zero(expr):
            return sp.S.Zero
        sym = self.fresh()
        self.probe.define(sym, expr)
        self.bounds[sym] = term_bound(expr, self.bounds)
        self.steps.append(Step(sym, expr))
        return sym

    def precharge(self, a, b) -> None:
        """Count a product's terms (nonzero coefficient pairs, an upper bound) before computing it."""
        self._count(sum(1 for c in a.coefficients if c != 0) * sum(1 for c in b.coefficients if c != 0))

    def charge(self, mv) -> None:
        """Count the terms a step produced (duals, norms, exp)."""
        self._count(sum(len(sp.Add.make_args(c)) for c in mv.coefficients if c != 0))

    def _count(self, terms: int) -> None:
        """Refuse the compile once the traced products pass ``max_terms`` terms: the count grows
        with the expression's length and is made before any expansion."""
        self.product_terms += terms
        if self.max_terms is not None and self.product_terms > self.max_terms:
            raise CompileTooLarge(
                f"this compile is refused before lowering: its traced products hold {self.product_terms:,} "
                f"terms so far, above max_terms={self.max_terms:,} (estimated compile time at least "
                f"{estimate_seconds(self.product_terms):.0f} s); pass max_terms=None (--max-terms 0) to compile it anyway, or "
                "evaluate the function numerically with galinear.MultiVector (e.g. inv() of a batch)")

    def is_zero(self, expr) -> bool:
        """Whether ``expr`` (in the staged symbols) is identically zero in the inputs and the
        non-polynomial steps' results: the probe's verdict, and with ``exact`` (how
        :func:`galinear.prove` traces) a "zero" confirmed by expanding in the inputs."""
        if not self.probe.is_zero(expr):
            return False  # nonzero at a point: certainly nonzero
        if not self.exact:
            return True
        for step in self.steps[self._expanded_steps:]:
            if step.kind == "let":
                self._in_inputs[step.symbol] = sp.expand(step.expr.xreplace(self._in_inputs))
        self._expanded_steps = len(self.steps)
        return sp.expand(sp.sympify(expr).xreplace(self._in_inputs)) == 0

    def barrier(self, kind, expr, what, order=0):
        sym = self.fresh({"recip": "r", "sqrt": "q", "abs": "a", "g": "g"}[kind])
        arg = self.let(expr)
        where = _user_location()
        self.steps.append(Step(sym, arg, kind, order, f"{what} {where}" if where else what))
        return sym



_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_location() -> str:
    """Where in the user's code the operation being traced was written: ``file:line (source)``,
    or the expression text and column for a function made by ``parse_expression``."""
    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not os.path.abspath(filename).startswith(_PACKAGE + os.sep):
            line = linecache.getline(filename, frame.f_lineno).strip()
            return f"at {os.path.basename(filename)}:{frame.f_lineno}" + (f" ({line})" if line else "")
        evaluator, node = frame.f_locals.get("self"), frame.f_locals.get("node")
        if type(evaluator).__name__ == "_Evaluator" and hasattr(node, "col_offset"):
            return f"in {evaluator.text!r} at column {node.col_offset + 1}"
        frame = frame.f_back
    return ""


def exact_number(value) -> sp.Rational:
    """A Python or numpy number as an exact rational: a float by the decimal of its shortest
    ``repr`` (``0.1`` is 1/10, and prints back as the same float); inf and nan are refused."""
    if isinstance(value, bool):
        raise TypeError("a bool is not a number of the algebra; use 0 or 1")
    if isinstance(value, int):
        return sp.Integer(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"the constant {number!r} is not finite; a kernel computes with finite numbers")
    return sp.Rational(repr(number))


class Traced:
    """A multivector inside :func:`trace`: the operators of :class:`galinear.symbolic.MultiVector`
    with each product's coefficients assigned to fresh symbols (the staged program).

    Numeric :class:`galinear.MultiVector` constants combine on either side: the numeric class
    returns ``NotImplemented`` for operands that set ``_galinear_defers``, so Python asks this
    class's reflected operator."""

    __array_priority__ = 1000
    _galinear_defers = True

    def __init__(self, mv: MultiVector, rec: _Recorder):
        self.mv = mv
        self._rec = rec

    # -- helpers
    @property
    def algebra_n(self) -> int:
        return self.mv.n

    def _wrap(self, mv: MultiVector, stage: bool = True, charged: bool = False) -> "Traced":
        if stage:
            if not charged:
                self._rec.charge(mv)
            mv = mv._new([self._rec.let(c) if c != 0 else c for c in mv.coefficients])
        return Traced(mv, self._rec)

    def _other(self, other) -> MultiVector:
        if isinstance(other, Traced):
            return other.mv
        if isinstance(other, MultiVector):
            return self.mv._coerce(other)
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return self.mv._coerce(exact_number(other))
        if isinstance(other, sp.Expr):
            if other.has(sp.zoo, sp.oo, sp.nan, -sp.oo):
                raise ValueError(f"the constant {other} is not finite; a kernel computes with finite numbers")
            return self.mv._coerce(other)
        values, algebra = getattr(other, "values", None), getattr(other, "algebra", None)
        if values is not None and algebra is not None:  # a numeric galinear.MultiVector constant
            if tuple(algebra.metric) != self.mv.metric:
                raise ValueError(f"a constant of metric {tuple(algebra.metric)} in a function traced over "
                                 f"metric {self.mv.metric}")
            flat = [float(v) for v in getattr(values, "tolist", lambda: values)()] if getattr(values, "ndim", 1) == 1 \
                else None
            if flat is None:
                raise ValueError("constants in a traced function must be single multivectors, not batches")
            return MultiVector(self.mv.metric, [exact_number(v) for v in flat])
        raise TypeError(f"cannot combine a traced multivector with {type(other).__name__}; use multivectors "
                        "and Python numbers")

    def _scalar(self, other):
        value = self._other(other)
        if any(c != 0 for c in value.coefficients[1:]):
            return None
        return value.coefficients[0]

    # -- linear structure
    def __add__(self, other):
        return self._wrap(self.mv + self._other(other), stage=False)

    __radd__ = __add__

    def __sub__(self, other):
        return self._wrap(self.mv - self._other(other), stage=False)

    def __rsub__(self, other):
        return self._wrap(self._other(other) - self.mv, stage=False)

    def __neg__(self):
        return self._wrap(-self.mv, stage=False)

    def __pos__(self):
        return self

    # -- products
    def _product(self, kind: str, other, reflected: bool = False) -> "Traced":
        """``self kind other`` (``other kind self`` when reflected), its size counted first."""
        a, b = self.mv, self._other(other)
        if reflected:
            a, b = b, a
        self._rec.precharge(a, b)
        return self._wrap(getattr(a, kind)(b), charged=True)

    def __mul__(self, other):
        return self._product("gp", other)

    def __rmul__(self, other):
        return self._product("gp", other, reflected=True)

    def __xor__(self, other):
        return self._product("op", other)

    def __rxor__(self, other):
        return self._product("op", other, reflected=True)

    def __lshift__(self, other):
        return self._product("lc", other)

    def __rlshift__(self, other):
        return self._product("lc", other, reflected=True)

    def __rshift__(self, other):
        return self._product("rc", other)

    def __rrshift__(self, other):
        return self._product("rc", other, reflected=True)

    def __or__(self, other):
        return self._product("inner", other)

    def __ror__(self, other):
        return self._product("inner", other, reflected=True)

    def __and__(self, other):
        return self._product("regressive", other)

    def __rand__(self, other):
        return self._product("regressive", other, reflected=True)

    def __matmul__(self, other):
        if isinstance(other, (int, float, sp.Expr)):
            raise TypeError(f"R @ x needs a multivector x, got {type(other).__name__}")
        x = Traced(self._other(other), self._rec)  # traced, symbolic or numeric
        return self * x * self.reverse()

    def __rmatmul__(self, other):
        R = Traced(self._other(other), self._rec)
        return R * self * R.reverse()

    def __pow__(self, exponent):
        if isinstance(exponent, bool) or not isinstance(exponent, int):
            raise ValueError(f"only integer powers are traced, got {exponent!r}")
        base = self.inv() if exponent < 0 else self
        out = self._wrap(self.mv._coerce(1), stage=False)
        for _ in range(abs(exponent)):
            out = out * base
        return out

    def gp(self, other):
        return self * other

    def op(self, other):
        return self ^ other

    def lc(self, other):
        return self << other

    def rc(self, other):
        return self >> other

    def inner(self, other):
        return self | other

    def regressive(self, other):
        return self & other

    def sandwich(self, x):
        return self @ x

    def scalar_product(self, other):
        return self._wrap(self.mv.gp(self._other(other)).grade_part(0))

    # -- division
    def __truediv__(self, other):
        divisor = self._other(other)  # a number, or a traced, symbolic or numeric multivector
        if any(c != 0 for c in divisor.coefficients[1:]):
            return self * Traced(divisor, self._rec).inv()
        value = divisor.coefficients[0]
        if value.is_Number:
            if value == 0:
                raise KernelDomainError("division by the constant 0 in the traced function")
            return self._wrap(self.mv * (1 / value), stage=False)
        recip = self._rec.barrier("recip", value, "division by a scalar")
        return self._wrap(self.mv * recip, stage=False)

    def __rtruediv__(self, other):
        return Traced(self._other(other), self._rec) * self.inv()

    def inv(self) -> "Traced":
        """Closed-form inverse; the kernel checks the denominator on every row."""
        scalar = self._scalar(self)
        if scalar is not None:
            if scalar.is_Number:
                if scalar == 0:
                    raise KernelDomainError("inv() of the constant 0 in the traced function")
                return self._wrap(self.mv._coerce(1 / scalar), stage=False)
            recip = self._rec.barrier("recip", scalar, "inv() of a scalar")
            return self._wrap(self.mv._coerce(recip), stage=False)
        versor = self._versor_inverse()
        if versor is not None:
            return versor
        if self.mv.n > 5:
            raise ValueError(f"inv() is traced for n <= 5 (closed forms) unless x ~x is a scalar (a versor); "
                             f"this algebra has n = {self.mv.n}")
        num = self._inverse_numerator()
        den = sp.expand(self.mv.scalar_product(num.mv))
        if den == 0 or self._rec.is_zero(den):
            raise KernelDomainError("inv(): the traced multivector is never invertible (its denominator "
                                    "<A N(A)>_0 is identically 0, e.g. a null vector)")
        recip = self._rec.barrier("recip", den, "inv() (the denominator <A N(A)>_0)")
        return self._wrap(num.mv * recip, stage=False)

    def _inverse_numerator(self) -> "Traced":
        """N(A) of the closed-form inverse (Hitzer and Sangwine 2017, n <= 5; the formulas of
        :meth:`galinear.symbolic.MultiVector.inverse_numerator`), as staged products: each one's
        size is counted before it is computed."""
        n = self.mv.n
        if n <= 2:
            return self.conjugate()
        t = self.conjugate() * self.involute() * self.reverse() if n != 4 else self.conjugate()
        if n == 3:
            return t
        flip = (3, 4) if n == 4 else (1, 4)
        return t * self._wrap((self * t).mv._negate_grades(flip), stage=False)

    def _versor_inverse(self):
        """:math:`\tilde x / (x \tilde x)` when :math:`x \tilde x` is identically a scalar (every
        versor: a product of vectors, a rotor, a motor), else None. Exact, and far shorter than
        the general closed form (inv(a * b) in Cl(4,1): 4 products instead of thousands)."""
        norm = self._wrap(self.mv.gp(self.mv.reverse()))
        if any(c != 0 for c in norm.mv.coefficients[1:]):
            return None
        den = norm.mv.coefficients[0]
        if den == 0:
            raise KernelDomainError("inv(): x ~x is identically 0 (e.g. a null vector): x has no inverse")
        if den.is_Number:
            return self._wrap(self.mv.reverse() * (1 / den), stage=False)
        recip = self._rec.barrier("recip", den, "inv() (the denominator x ~x)")
        return self._wrap(self.mv.reverse() * recip, stage=False)

    # -- unary
    def reverse(self):
        return self._wrap(self.mv.reverse(), stage=False)

    __invert__ = reverse

    def involute(self):
        return self._wrap(self.mv.involute(), stage=False)

    def conjugate(self):
        return self._wrap(self.mv.conjugate(), stage=False)

    def dual(self, kind: str = "auto"):
        return self._wrap(self.mv.dual(kind))

    def undual(self, kind: str = "auto"):
        return self._wrap(self.mv.undual(kind))

    def grade(self, *grades):
        if not grades:
            raise ValueError("grade(...) needs at least one grade, e.g. x.grade(2)")
        return self._wrap(self.mv(*grades), stage=False)

    __call__ = grade

    def even(self):
        return self.grade(*range(0, self.mv.n + 1, 2))

    def odd(self):
        return self.grade(*range(1, self.mv.n + 1, 2))

    def norm_squared(self):
        return self._wrap(self.mv.gp(self.mv.reverse()).grade_part(0))

    def norm(self):
        """:math:`\\sqrt{|\\langle x\\tilde x\\rangle_0|}` as a scalar multivector (the core's norm)."""
        s = self.norm_squared().mv.coefficients[0]
        a = self._rec.barrier("abs", s, "norm()")
        q = self._rec.barrier("sqrt", a, "norm()")
        return self._wrap(self.mv._coerce(q), stage=False)

    def normalized(self):
        return self / self.norm()

    def sqrt(self):
        """Square root of a scalar (a multivector whose only part is grade 0); guarded ``>= 0``."""
        scalar = self._scalar(self)
        if scalar is None:
            raise ValueError("sqrt() is compiled for scalars only: take the grade-0 part first (x(0), or grade(x, 0)) or use norm(x)")
        q = self._rec.barrier("sqrt", scalar, "sqrt()")
        return self._wrap(self.mv._coerce(q), stage=False)

    def exp(self):
        return _exp(self)

    def __repr__(self):
        return f"Traced({self.mv})"

    def __bool__(self):
        raise TypeError("a traced multivector has no truth value: the kernel is straight-line code, "
                        "so `if`/`while` on multivector values cannot be compiled")


def _exp(B: Traced) -> Traced:
    mv = B.mv
    rec = B._rec
    grades = blades.blade_grades(mv.n).tolist()
    if any(c != 0 for g, c in zip(grades, mv.coefficients) if g != 2):
        raise ValueError("exp() is compiled for bivectors only (closed forms of every signature); "
                         "this argument has parts of other grades")
    if mv.n > 5:
        raise ValueError(f"exp() is compiled for n <= 5 (closed forms of k = floor(n/2) <= 2); n = {mv.n}")
    W2 = mv.op(mv).applyfunc(lambda c: sp.expand(c) / 2)
    # simplicity is decided on the coefficients expanded in the inputs, as prove() decides it
    # (exp(a ^ b) is simple in every signature, though its staged W2 is not visibly 0)
    if mv.n <= 3 or all(rec.is_zero(c) for c in W2.coefficients):
        lam = sp.expand(mv.gp(mv).coefficients[0])
        c = rec.barrier("g", lam, "exp()", 0)
        s1 = rec.barrier("g", lam, "exp()", 1)
        return B._wrap(mv * (2 * s1) + c)
    sigma2 = sp.expand(W2.gp(W2).coefficients[0])
    if sigma2 != 0 and not rec.is_zero(sigma2):
        raise ValueError(
            "exp() of a general bivector in this algebra needs both invariants of the decomposition "
            "(sigma_2 = <W2 W2>_0 is not identically 0); compiled kernels cover simple bivectors (n <= 3, "
            "or an input pattern whose bivectors are simple, e.g. a pure boost ['e14', 'e24', 'e34']) and "
            "algebras where sigma_2 vanishes (3D PGA). Use galinear.Algebra(p, q, r).exp for the rest")
    W2s = B._wrap(W2).mv
    sigma1 = sp.expand(mv.gp(mv).coefficients[0])
    Y1 = B._wrap(mv.gp(W2s).grade_part(2)).mv
    c = rec.barrier("g", sigma1, "exp()", 0)
    s1 = rec.barrier("g", sigma1, "exp()", 1)
    t2 = rec.barrier("g", sigma1, "exp()", 2)
    out = (mv + W2s) * (2 * s1) + Y1 * (4 * t2) + c
    return B._wrap(out)


# ---------------------------------------------------------------------------- trace
def _parameters(func, inputs: dict) -> list[str]:
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return list(inputs)
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    extra = [p.name for p in params if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if extra:
        raise ValueError(f"the function takes *args/**kwargs ({', '.join(extra)}); give it one named "
                         "parameter per multivector input")
    missing = [n for n in names if n not in inputs]
    unknown = [n for n in inputs if n not in names]
    if missing or unknown:
        raise ValueError(f"inputs must name each parameter of the function once: parameters {names}, "
                         f"inputs {list(inputs)}" + (f"; missing {missing}" if missing else "")
                         + (f"; unknown {unknown}" if unknown else ""))
    return names


def trace(func, metric, inputs: dict, name: str = "kernel", max_terms: int | None = MAX_TRACE_TERMS,
          exact: bool = False) -> Graph:
    """Trace ``func`` over Cl(metric) with inputs given as ``{parameter: pattern}``; refuse with
    :class:`CompileTooLarge` once its products pass ``max_terms`` terms (None: no bound).
    ``exact``: a coefficient is dropped as zero only once its expansion in the inputs is 0 (for
    proofs); otherwise the probe's verdict decides (error probability below 1e-26).

    A pattern is a grade, a list of grades, ``"even"``, ``"odd"``, ``"full"`` or a list of blade
    names (see :func:`input_blades`). ``func`` returns a multivector (or a number).
    """
    metric = _as_metric(metric)
    n = len(metric)
    if n > MAX_TRACE_N:
        raise ValueError(f"functions are compiled for n <= {MAX_TRACE_N} (2**n coefficients); got n = {n}")
    if not isinstance(inputs, dict) or not inputs:
        raise ValueError("inputs must be a dict {parameter name: pattern}, e.g. {'M': 'even', 'x': 1}")
    names = _parameters(func, inputs)
    for arg in names:
        if not arg.isidentifier() or arg.startswith("_"):
            raise ValueError(f"input name {arg!r} must be an identifier that does not start with '_'")
    rec = _Recorder(metric)
    rec.max_terms = max_terms
    rec.exact = exact
    all_names = blades.blade_names(n)
    traced_args, graph_inputs = [], []
    for arg in names:
        positions = input_blades(metric, inputs[arg], arg)
        syms = tuple(sp.Symbol(_symbol_name(arg, all_names[i])) for i in positions)
        coefficients = [sp.S.Zero] * (1 << n)
        for i, s in zip(positions, syms):
            coefficients[i] = s
        traced_args.append(Traced(MultiVector(metric, coefficients), rec))
        graph_inputs.append((arg, syms, tuple(all_names[i] for i in positions)))
    result = func(*traced_args)
    if isinstance(result, MultiVector):
        result = Traced(result, rec)
    elif not isinstance(result, Traced):
        if isinstance(result, (int, float, sp.Expr)) and not isinstance(result, bool):
            result = Traced(MultiVector(metric)._coerce(result), rec)
        else:
            raise TypeError(f"the function returned {type(result).__name__}; return a multivector")
    graph = Graph(metric=metric, inputs=tuple(graph_inputs), steps=rec.steps, source_name=name,
                  bounds=rec.bounds)
    nonzero = [i for i, c in enumerate(result.mv.coefficients) if c != 0 and not rec.is_zero(c)]
    graph.outputs = tuple(result.mv.coefficients[i] for i in nonzero)
    graph.output_blades = tuple(all_names[i] for i in nonzero)
    return graph


def substitution_map(graph: Graph, keep_barriers: bool = True) -> dict:
    """Each ``let`` symbol -> its expression in input and barrier symbols (expanded)."""
    full = {}
    for step in graph.steps:
        expr = step.expr.xreplace(full)
        if step.kind == "let":
            full[step.symbol] = sp.expand(expr)
    return full



