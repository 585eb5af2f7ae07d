r"""A traced program's parts, its limits and its errors (sympy only).

:class:`Step` and :class:`Graph` are what :func:`galinear.symbolic.trace.trace` records and
:mod:`galinear.symbolic.lowering` lowers; :class:`Gm` is the function of the exp closed forms;
:func:`input_blades` reads an input pattern; :data:`MAX_TRACE_N` and :data:`MAX_TRACE_TERMS` bound
what is traced (:class:`CompileTooLarge` past them), and :class:`KernelDomainError` is what a
kernel raises on a row outside the domain of a step. :func:`exact_number` makes the rationals
every constant of a traced function enters as.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import _as_metric

__all__ = ["Gm", "Graph", "Step", "input_blades", "KernelDomainError", "CompileTooLarge", "MAX_TRACE_TERMS",
           "MAX_TRACE_N", "estimate_seconds", "exact_number"]

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
