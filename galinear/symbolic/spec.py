r"""Kernel specifications: which symbolic computation a generated kernel performs.

A :class:`KernelSpec` names an operation and an algebra; :meth:`KernelSpec.program` turns it
into a straight-line :class:`Program` (symbolic inputs, intermediate assignments, outputs)
computed with :mod:`galinear.symbolic.multivector`. The generator
(:mod:`galinear.symbolic.codegen`) prints programs; it knows nothing about the maths.

Operations
----------
``gp``, ``op``, ``lc``, ``rc``
    ``out = a * b`` (geometric, outer, left / right contraction); inputs a, b of width 2**n.
``sandwich``
    ``out = R x ~R`` for a simple rotor :math:`R = r_0 + \sum_{i<j} r_{ij} e_{ij}` (input r of
    width 1 + C(n,2), bivector part in bivector_pairs order) and x of width 2**n. Computed in
    two stages, :math:`t = R x` then :math:`t \tilde R`, which costs about
    :math:`2 (1 + \binom n2) 2^n` multiply-adds instead of expanding the quadratic form.
``sandwich2``
    ``out = R x ~S`` with two simple rotors r, s (the double-rotor map).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import MultiVector, _as_metric

__all__ = ["KernelSpec", "Program", "OPS", "shipped_specs"]

OPS = ("gp", "op", "lc", "rc", "sandwich", "sandwich2")

_DESCRIPTION = {
    "gp": "geometric product out = a b",
    "op": "outer product out = a ^ b",
    "lc": "left contraction out = a _| b",
    "rc": "right contraction out = a |_ b",
    "sandwich": "simple-rotor sandwich out = R x ~R, R = r[0] + sum r[1+p] e_pair(p)",
    "sandwich2": "double simple-rotor sandwich out = R x ~S",
}


@dataclass(frozen=True)
class Program:
    """A straight-line computation.

    Attributes
    ----------
    inputs : tuple of (name, tuple of Symbol)
        Each argument array and the symbols holding its row, in column order.
    stages : tuple of tuple of (Symbol, Expr)
        Intermediate assignments, in order (each stage may use earlier ones).
    outputs : tuple of Expr
        The row of the output array.
    """

    inputs: tuple
    stages: tuple = field(default=())
    outputs: tuple = field(default=())


@dataclass(frozen=True)
class KernelSpec:
    """An operation over an algebra, e.g. ``KernelSpec("gp", (1, 1, 1))``."""

    op: str
    metric: tuple

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown op {self.op!r}; supported: {', '.join(OPS)}")
        metric = _as_metric(self.metric)
        if not metric:
            raise ValueError("kernels need n >= 1 (Cl(0) is just the real numbers)")
        if len(metric) > 8:
            raise ValueError(
                f"straight-line kernels are offered for n <= 8 (n={len(metric)} would need "
                f"{4 ** len(metric):,} terms for gp); use the table-driven core kernels instead"
            )
        object.__setattr__(self, "metric", metric)

    @classmethod
    def euclidean(cls, op: str, n: int) -> "KernelSpec":
        return cls(op, (1,) * blades.check_dimension(n))

    @property
    def n(self) -> int:
        return len(self.metric)

    def signature(self) -> tuple[int, int, int]:
        """(p, q, r): counts of +1, -1 and 0 squares."""
        return (self.metric.count(1), self.metric.count(-1), self.metric.count(0))

    def describe(self) -> str:
        p, q, r = self.signature()
        return f"{_DESCRIPTION[self.op]} in Cl({p},{q},{r}), metric {self.metric}, shortlex blade order"

    # ------------------------------------------------------------------ programs
    def _full(self, name: str) -> tuple[tuple, MultiVector]:
        syms = tuple(sp.Symbol(f"{name}{i}") for i in range(1 << self.n))
        return syms, MultiVector(self.metric, syms)

    def _rotor(self, name: str) -> tuple[tuple, MultiVector]:
        n = self.n
        syms = tuple(sp.Symbol(f"{name}{i}") for i in range(1 + n * (n - 1) // 2))
        coefficients = [0] * (1 << n)
        coefficients[0] = syms[0]
        pos = blades.bitmask_to_shortlex(n)
        for p, (i, j) in enumerate(combinations(range(n), 2)):
            coefficients[int(pos[(1 << i) | (1 << j)])] = syms[1 + p]
        return syms, MultiVector(self.metric, coefficients)

    def program(self) -> Program:
        """The symbolic straight-line program of this spec."""
        if self.op in ("gp", "op", "lc", "rc"):
            a_syms, a = self._full("a")
            b_syms, b = self._full("b")
            result = getattr(a, self.op)(b)
            return Program(inputs=(("a", a_syms), ("b", b_syms)), outputs=result.coefficients)
        r_syms, rotor_r = self._rotor("r")
        x_syms, x = self._full("x")
        t_syms = tuple(sp.Symbol(f"t{i}") for i in range(1 << self.n))
        first = rotor_r.gp(x)
        stage = tuple((t, e) for t, e in zip(t_syms, first.coefficients))
        t = MultiVector(self.metric, t_syms)
        if self.op == "sandwich":
            result = t.gp(rotor_r.reverse())
            inputs = (("r", r_syms), ("x", x_syms))
        else:
            s_syms, rotor_s = self._rotor("s")
            result = t.gp(rotor_s.reverse())
            inputs = (("r", r_syms), ("s", s_syms), ("x", x_syms))
        return Program(inputs=inputs, stages=(stage,), outputs=result.coefficients)


def shipped_specs() -> list[KernelSpec]:
    """The specs whose numba kernels are committed in galinear/_generated (``galinear codegen --all``).

    Only what runs: ``Algebra.gp(method="auto")`` uses the gp kernels for n <= 6. Other ops and
    the torch target are generated on demand (``galinear codegen --op ... --out DIR``).
    """
    return [KernelSpec.euclidean("gp", n) for n in range(1, 7)]
