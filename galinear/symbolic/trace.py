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

import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import MultiVector, _as_metric
from galinear.symbolic.polynomials import Probe, term_bound
from galinear.symbolic.program import (
    MAX_TRACE_N,
    MAX_TRACE_TERMS,
    CompileTooLarge,
    Gm,
    Graph,
    KernelDomainError,
    Step,
    estimate_seconds,
    exact_number,
    input_blades,
)
from galinear.symbolic.traced import Traced, user_location

__all__ = ["Gm", "Traced", "Graph", "Step", "trace", "input_blades", "KernelDomainError", "CompileTooLarge",
           "MAX_TRACE_TERMS", "MAX_TRACE_N", "estimate_seconds", "exact_number", "substitution_map"]


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
        where = user_location()
        self.steps.append(Step(sym, arg, kind, order, f"{what} {where}" if where else what))
        return sym


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



