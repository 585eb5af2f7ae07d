r"""Facts about traced programs without expanding them, and bounded exact expansion (sympy only).

A traced program (:mod:`galinear.symbolic.trace`) names every product coefficient by a fresh
symbol, so a coefficient that is identically zero (the grade-3 part of a versor sandwich, the
4-vector part of ``a ^ b`` squared) is not visibly zero. Expanding everything in the inputs
decides it exactly, but the expansion of a long program can grow without bound. This module
gives three tools:

:class:`Probe`
    Every symbol's value at fixed pseudo-random points modulo the prime :math:`p = 2^{61}-1`,
    updated step by step in time linear in the program's length. A polynomial that is nonzero
    at a point is nonzero; one that vanishes at all :data:`POINTS` points is zero except with
    probability at most :math:`(d/p)^{\text{POINTS}}` for degree d (Schwartz and Zippel): below
    :math:`10^{-26}` for every degree under :math:`10^5`. Symbols of non-polynomial steps (an
    inverse, a square root, an exponential) get values of their own, so "zero" always means
    "zero whatever those steps give", the rule the exact expansion follows too.
:func:`term_bound`
    An upper bound on the number of monomials of a staged expression's expansion, from bounds
    of its symbols, without expanding: the estimate a compile is bounded by.
:func:`expand_program`
    The exact expansion in sympy's sparse polynomial ring (much faster than ``sympy.expand`` on
    expressions), stopped with ``None`` as soon as any value would pass a term limit.
"""
from __future__ import annotations

import math
import random
from functools import reduce

import sympy as sp

__all__ = ["Probe", "PRIME", "POINTS", "term_bound", "expand_program", "BOUND_CAP"]

PRIME = 2**61 - 1
POINTS = 2
#: Term bounds saturate here (a bound only decides "too large").
BOUND_CAP = 10**15


class Probe:
    """Values of symbols at :data:`POINTS` fixed points modulo :data:`PRIME` (see module notes)."""

    def __init__(self, seed: int = 0x6A11EA5):
        self._rng = random.Random(seed)
        self.values: dict = {}

    def assign(self, symbol) -> None:
        """A fresh value for an input or for the result of a non-polynomial step."""
        self.values[symbol] = tuple(self._rng.randrange(1, PRIME) for _ in range(POINTS))

    def define(self, symbol, expr) -> tuple:
        """``symbol = expr`` (polynomial in known symbols); returns the value."""
        value = self.evaluate(expr)
        self.values[symbol] = value
        return value

    def is_zero(self, expr) -> bool:
        return not any(self.evaluate(expr))

    def evaluate(self, expr) -> tuple:
        expr = sp.sympify(expr)
        if expr.is_Symbol:
            if expr not in self.values:
                self.assign(expr)
            return self.values[expr]
        if expr.is_Integer:
            return (int(expr) % PRIME,) * POINTS
        if expr.is_Rational:
            value = expr.p * pow(expr.q, -1, PRIME) % PRIME
            return (value,) * POINTS
        if expr.is_Add:
            parts = [self.evaluate(a) for a in expr.args]
            return tuple(sum(column) % PRIME for column in zip(*parts))
        if expr.is_Mul:
            parts = [self.evaluate(a) for a in expr.args]
            return tuple(reduce(lambda u, v: u * v % PRIME, column) for column in zip(*parts))
        if expr.is_Pow and expr.exp.is_Integer:
            base, k = self.evaluate(expr.base), int(expr.exp)
            if k < 0:
                if not all(base):
                    return tuple(pow(b, -k, PRIME) for b in base)  # never 0 by the rules above: a guard
                return tuple(pow(pow(b, -1, PRIME), -k, PRIME) for b in base)
            return tuple(pow(b, k, PRIME) for b in base)
        # any other function of known symbols: a value of its own, fixed per expression
        if expr not in self.values:
            self.assign(expr)
        return self.values[expr]


def term_bound(expr, bounds: dict) -> int:
    """Upper bound on the monomials of ``expr`` expanded, from ``bounds`` of its symbols (1 for a
    symbol not listed: an input or a non-polynomial step's result)."""
    expr = sp.sympify(expr)
    if expr.is_Symbol:
        return bounds.get(expr, 1)
    if expr.is_Number:
        return 1
    if expr.is_Add:
        return min(sum(term_bound(a, bounds) for a in expr.args), BOUND_CAP)
    if expr.is_Mul:
        return min(math.prod(term_bound(a, bounds) for a in expr.args), BOUND_CAP)
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        base = term_bound(expr.base, bounds)
        return BOUND_CAP if base > 1 and int(expr.exp) * math.log(base) > math.log(BOUND_CAP) else base ** int(expr.exp)
    return 1


class _TooLarge(Exception):
    pass


def expand_program(steps, atoms, extra=(), limit: int = 40000):
    """The expansion of every ``let`` step (and of ``extra`` expressions) in ``atoms`` (the
    inputs' symbols and the non-polynomial steps' symbols), in sympy's sparse polynomial ring.

    Returns ``(ring, values, extra_values)`` (``values``: symbol -> ring element of each let and
    atom), or None as soon as one value would hold more than ``limit`` terms."""
    atoms = list(dict.fromkeys(atoms))
    ring, *gens = sp.ring(atoms, sp.QQ) if atoms else (sp.ring([sp.Dummy("z")], sp.QQ)[0],)
    values = dict(zip(atoms, gens))

    def ev(e):
        if e.is_Symbol:
            return values[e]
        if e.is_Number:
            return ring(e)
        if e.is_Add:
            return reduce(lambda a, b: a + b, (ev(a) for a in e.args))
        if e.is_Mul:
            out = ring(1)
            for factor in e.args:
                value = ev(factor)
                if len(out) * len(value) > limit and len(out) > 1 and len(value) > 1:
                    raise _TooLarge
                out = out * value
            return out
        if e.is_Pow and e.exp.is_Integer and e.exp > 0:
            base = ev(e.base)
            if len(base) > 1 and len(base) ** min(int(e.exp), 8) > limit:
                raise _TooLarge
            return base ** int(e.exp)
        raise ValueError(f"not a polynomial in the program's symbols: {e}")

    try:
        for step in steps:
            if step.kind == "let":
                value = ev(sp.sympify(step.expr))
                if len(value) > limit:
                    return None
                values[step.symbol] = value
        extra_values = []
        for e in extra:
            value = ev(sp.sympify(e))
            if len(value) > limit:
                return None
            extra_values.append(value)
    except _TooLarge:
        return None
    return ring, values, extra_values
