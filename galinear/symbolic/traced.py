r"""What the user's function sees while it is traced: :class:`Traced` multivectors (sympy only).

Every operator of :class:`galinear.symbolic.MultiVector` on symbolic coefficients, each product's
coefficients staged by the recorder of :func:`galinear.symbolic.trace.trace`; the steps that are
not polynomial (``inv()``, division, ``sqrt``, ``norm``, ``exp``) become guarded steps that name
where in the user's code they were written (:func:`user_location`).
"""
from __future__ import annotations

import linecache
import os
import sys

import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import MultiVector
from galinear.symbolic.program import KernelDomainError, exact_number

__all__ = ["Traced", "user_location"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def user_location() -> str:
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


class Traced:
    """A multivector inside :func:`trace`: the operators of :class:`galinear.symbolic.MultiVector`
    with each product's coefficients assigned to fresh symbols (the staged program).

    Numeric :class:`galinear.MultiVector` constants combine on either side: the numeric class
    returns ``NotImplemented`` for operands that set ``_galinear_defers``, so Python asks this
    class's reflected operator."""

    __array_priority__ = 1000
    _galinear_defers = True

    def __init__(self, mv: MultiVector, rec):  # rec: the recorder of galinear.symbolic.trace.trace
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
