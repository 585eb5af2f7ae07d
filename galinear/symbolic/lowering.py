r"""Lowering a traced :class:`~galinear.symbolic.trace.Graph` to straight-line code (sympy only).

Several orders of evaluation are built and the one with fewer multiplications is kept:

``staged``
    One assignment per nonzero coefficient of every product, as the function is written
    (a sandwich :math:`M x \tilde M` costs two products).
``expanded``
    Every polynomial step substituted into the next non-polynomial one (or the outputs) and
    expanded; common subexpressions such as :math:`m_i m_j` are then shared between outputs
    (a sandwich becomes its quadratic form).
``collected``
    The expanded outputs grouped by the monomials of one input's coefficients, with the numeric
    content of each group's coefficient taken out (tried for each input): a sandwich
    :math:`R x \tilde R` costs the pairwise products of R's coefficients once, then one
    product per (output, coefficient of x) and one per distinct factor such as 2. Tried for
    each input and, with three inputs or more, for all inputs but one.
``rational``
    Every division written as one fraction per output and cancelled (:func:`_rational`), then
    collected like the above.

The expanded orders are built in sympy's sparse polynomial ring and only under a bound on their
size made without expanding (:func:`expanded_size_bound`). All go through ``sympy.cse``; dead assignments are dropped. :func:`backward` differentiates a
lowered program in reverse mode, statement by statement with ``sympy.diff``, and lowers the
adjoints again with CSE: the result is a program from (inputs, output gradient) to one gradient
per input.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import reduce

import sympy as sp

from galinear.symbolic.polynomials import BOUND_CAP, expand_program, term_bound
from galinear.symbolic.trace import Graph, Step

__all__ = ["Lowered", "lower", "backward", "straight_line", "count_operations", "expanded_size_bound", "MAX_G_ORDER",
           "EXPANSION_LIMIT", "EXPANSION_BOUND_LIMIT", "STRATEGIES"]

#: Highest derivative order of the exp closed forms that the kernels evaluate (G_0 .. G_3).
MAX_G_ORDER = 3
#: The expanded orders are tried only while the exact expansion holds fewer terms than this ...
EXPANSION_LIMIT = 40000
#: ... and while the bound on it (made without expanding) is below this.
EXPANSION_BOUND_LIMIT = 2_000_000
#: The orders of evaluation :func:`lower` builds.
STRATEGIES = ("auto", "staged", "expanded", "collected", "rational")


@dataclass
class Lowered:
    """Straight-line code: ``statements`` in order, then the output arrays.

    inputs : ((name, (Symbol, ...)), ...)
    statements : [Step, ...] (``let``, ``recip``, ``sqrt``, ``abs``, ``sign``, ``g``)
    outputs : ((name, (Expr, ...)), ...)
    """

    inputs: tuple
    statements: list
    outputs: tuple
    strategy: str = "staged"
    operations: dict = field(default_factory=dict)

    def guards(self) -> list[Step]:
        return [s for s in self.statements if s.kind in ("recip", "sqrt")]

    def constants(self) -> list:
        """Non-integer numbers in the code (rationals and floats), sorted by value."""
        found = set()
        for s in self.statements:
            found |= _constants(s.expr)
        for _, exprs in self.outputs:
            for e in exprs:
                found |= _constants(sp.sympify(e))
        return sorted(found, key=lambda c: (float(c), str(c)))


def _constants(expr) -> set:
    out = set()
    for atom in expr.atoms(sp.Number):
        if atom.is_Integer:
            continue
        out.add(abs(atom))
    for p in expr.atoms(sp.Pow):
        if p.exp.is_Rational and not p.exp.is_Integer:
            raise ValueError(f"fractional power {p} in the program: only integer powers are printed")
    return out


# ---------------------------------------------------------------------------- counting
def _count(expr, tally) -> None:
    if expr.is_Atom:
        return
    if expr.is_Add:
        tally["additions"] += len(expr.args) - 1
    elif expr.is_Mul:
        factors = [a for a in expr.args if a not in (sp.S.NegativeOne,)]
        tally["multiplications"] += max(len(factors) - 1, 0)
    elif expr.is_Pow:
        e = expr.exp
        if e.is_Integer and e > 0:
            tally["multiplications"] += int(e) - 1
        elif e.is_Integer and e < 0:
            tally["divisions"] += 1
            tally["multiplications"] += int(-e) - 1
        _count(expr.base, tally)
        return
    else:
        tally["functions"] += 1
    for a in expr.args:
        _count(a, tally)


def count_operations(statements, outputs) -> dict:
    """Multiplications, additions (subtractions included), divisions and function calls."""
    tally = {"multiplications": 0, "additions": 0, "divisions": 0, "functions": 0}
    for s in statements:
        if s.kind == "let":
            _count(s.expr, tally)
        elif s.kind == "recip":
            tally["divisions"] += 1
        else:
            tally["functions"] += 1
            tally["additions"] += s.kind == "sqrt"  # the numba branch off the domain: arg - arg
    for _, exprs in outputs:
        for e in exprs:
            _count(sp.sympify(e), tally)
    return tally


# ---------------------------------------------------------------------------- helpers
def _schedule(items: list[tuple], defined: set) -> list[tuple]:
    """Order (symbol, expr, step-or-None) so that each item follows what it uses, keeping the
    given order where possible."""
    pending = list(items)
    produced = {sym for sym, _, _ in items}
    out = []
    ready = set(defined)
    while pending:
        progressed = False
        rest = []
        for item in pending:
            sym, expr, _ = item
            needs = (expr.free_symbols & produced) - ready
            if needs:
                rest.append(item)
                continue
            out.append(item)
            ready.add(sym)
            progressed = True
        if not progressed:  # pragma: no cover - a cycle cannot come out of tracing
            raise RuntimeError("cyclic program")
        pending = rest
    return out


def _eliminate_dead(statements: list[Step], outputs) -> list[Step]:
    live = set()
    for _, exprs in outputs:
        for e in exprs:
            live |= sp.sympify(e).free_symbols
    kept = []
    for s in reversed(statements):
        if s.symbol in live:
            kept.append(s)
            live |= s.expr.free_symbols
    return list(reversed(kept))


def _cse(statements: list[Step], outputs, input_symbols: set, prefix: str):
    """CSE over the polynomial lets, the arguments of the other steps and the outputs."""
    exprs = [s.expr for s in statements] + [sp.sympify(e) for _, exprs in outputs for e in exprs]
    replacements, reduced = sp.cse(exprs, symbols=sp.numbered_symbols(prefix), order="none")
    k = len(statements)
    new_statements = [replace(s, expr=e) for s, e in zip(statements, reduced[:k])]
    rest = iter(reduced[k:])
    new_outputs = tuple((name, tuple(next(rest) for _ in exprs_)) for name, exprs_ in outputs)
    items = [(sym, expr, None) for sym, expr in replacements] + [(s.symbol, s.expr, s) for s in new_statements]
    ordered = _schedule(items, input_symbols)
    out = []
    for sym, expr, step in ordered:
        out.append(step if step is not None else Step(sym, expr))
    # a let whose value is a bare symbol is an alias: substitute it away
    alias = {}
    final = []
    for s in out:
        expr = s.expr.xreplace(alias)
        if s.kind == "let" and expr.is_Symbol:
            alias[s.symbol] = expr
            continue
        final.append(replace(s, expr=expr))
    new_outputs = tuple((name, tuple(sp.sympify(e).xreplace(alias) for e in exprs_))
                        for name, exprs_ in new_outputs)
    return _hoist_arguments(_eliminate_dead(final, new_outputs), prefix), new_outputs


def _hoist_arguments(statements: list[Step], prefix: str) -> list[Step]:
    """Every argument of a non-polynomial step that is not a symbol or a number becomes a ``let``
    of its own: printed once (a guard, a square root and its branches read it), and counted."""
    out = []
    for k, s in enumerate(statements):
        if s.kind != "let" and not s.expr.is_Atom:
            sym = sp.Symbol(f"{prefix}h{k}")
            out.append(Step(sym, s.expr))
            s = replace(s, expr=sym)
        out.append(s)
    return out


def _input_symbols(inputs) -> set:
    return {s for _, syms in inputs for s in syms}


def _check_orders(statements) -> None:
    for s in statements:
        if s.kind == "g" and s.order > MAX_G_ORDER:
            raise ValueError(f"the program needs G_{s.order} (a derivative of exp of order {s.order}); "
                             f"kernels evaluate G_0 .. G_{MAX_G_ORDER}")


def straight_line(inputs, assignments, outputs, prefix: str = "c") -> Lowered:
    """A :class:`Lowered` program from explicit ``assignments`` ((symbol, polynomial), in order) and
    output expressions, with common subexpressions shared by the same CSE as :func:`lower`: how
    the shipped kernels (:mod:`galinear.symbolic.codegen`) reach the printers of the compiler."""
    statements = [Step(sym, sp.sympify(expr)) for sym, expr in assignments]
    named = (("out", tuple(sp.sympify(e) for e in outputs)),)
    statements, named = _cse(statements, named, _input_symbols(inputs), prefix)
    return Lowered(tuple(inputs), statements, named, "staged", count_operations(statements, named))


# ---------------------------------------------------------------------------- forward
def _staged(graph: Graph):
    statements = list(graph.steps)
    outputs = (("out", tuple(graph.outputs)),)
    return statements, outputs


def _atoms(graph: Graph) -> list:
    """The symbols an expansion is written in: the inputs' and the non-polynomial steps' results."""
    return [sym for _, syms, _ in graph.inputs for sym in syms] + [s.symbol for s in graph.steps if s.kind != "let"]


def expanded_size_bound(graph: Graph) -> int:
    """Upper bound on the terms of the expanded outputs and step arguments (no expansion made)."""
    exprs = list(graph.outputs) + [s.expr for s in graph.steps if s.kind != "let"]
    return min(sum(term_bound(e, graph.bounds) for e in exprs), BOUND_CAP)


def _expansion(graph: Graph):
    """(ring, outputs, step arguments) expanded in :func:`_atoms`, or None above EXPANSION_LIMIT."""
    if expanded_size_bound(graph) > EXPANSION_BOUND_LIMIT:
        return None  # refused from the bound alone: nothing is expanded
    barriers = [s for s in graph.steps if s.kind != "let"]
    found = expand_program(graph.steps, _atoms(graph), list(graph.outputs) + [s.expr for s in barriers],
                           EXPANSION_LIMIT)
    if found is None:
        return None
    ring, _, values = found
    outs, args = values[:len(graph.outputs)], values[len(graph.outputs):]
    if sum(len(o) for o in outs) > EXPANSION_LIMIT:
        return None
    return ring, outs, list(zip(barriers, args))


def _expanded(graph: Graph):
    found = _expansion(graph)
    if found is None:
        return None
    _, outs, args = found
    statements = [replace(step, expr=arg.as_expr()) for step, arg in args]
    return statements, (("out", tuple(o.as_expr() for o in outs)),)


def _rational(graph: Graph):
    r"""Expanded, every division by an expression of the inputs written as one fraction per output
    and cancelled: :math:`N_i / D_i` with :math:`\gcd(N_i, D_i) = 1`, outputs with equal
    denominators sharing one reciprocal (the CGA chain's down-projection becomes
    :math:`(R x \tilde R + t |R|^2) / |R|^2`). Kept only when the new denominators vanish wherever
    an original one does (each original denominator's factors divide them), so every row the
    function as written cannot evaluate is still refused by a guard."""
    found = _expansion(graph)
    if found is None:
        return None
    ring, outs, args = found
    index = {sym: i for i, sym in enumerate(ring.symbols)}
    recips = [(step, arg) for step, arg in args if step.kind == "recip"]
    if not recips:
        return None
    recip_index = [index[step.symbol] for step, _ in recips]
    for step, arg in args:  # a denominator or another step's argument must not hold a reciprocal
        if any(m[i] for m in arg.monoms() for i in recip_index):
            return None
    statements = [replace(step, expr=arg.as_expr()) for step, arg in args if step.kind != "recip"]
    fractions = []
    for out in outs:
        powers = [max((m[i] for m in out.monoms()), default=0) for i in recip_index]
        numerator = ring(0)
        for monom, coeff in out.terms():
            term = ring({tuple(0 if i in recip_index else e for i, e in enumerate(monom)): coeff})
            for (_, den), i, top in zip(recips, recip_index, powers):
                if top - monom[i]:
                    term = term * den ** (top - monom[i])
            numerator += term
        denominator = ring(1)
        for (_, den), top in zip(recips, powers):
            if top:
                denominator = denominator * den ** top
        numerator, denominator = numerator.cancel(denominator)
        lead = denominator.LC
        fractions.append((numerator.quo_ground(lead), denominator.quo_ground(lead)))
    denominators = list(dict.fromkeys(d for _, d in fractions if not d.is_ground))
    product = reduce(lambda a, b: a * b, denominators, ring(1))
    for _, den in recips:  # every original denominator's factors are guarded by a new one
        rest = den
        while not rest.is_ground:
            common = rest.gcd(product)
            if common.is_ground:
                return None
            rest = rest.quo(common)
    symbols = {}
    for k, den in enumerate(denominators):
        sym = sp.Symbol(f"_v{k + 1}")
        what = next((step.what for step, d in recips if not d.gcd(den).is_ground), "a division")
        statements.append(Step(sym, den.as_expr(), "recip", 0, what))
        symbols[den] = sym
    new_outs = tuple(n.as_expr() * symbols[d] if not d.is_ground else n.as_expr() for n, d in fractions)
    return statements, (("out", new_outs),)


def _collected(built, by: tuple):
    r"""``built`` (expanded or rational outputs) with each output grouped by the monomials of the
    symbols ``by`` (one input, or all inputs but one): :math:`\sum_c c \sum_l x_l P_l` with the
    numeric content c of each coefficient taken out, so a sandwich costs its pairwise products
    once, one product per (output, monomial) and one per distinct factor. A trailing reciprocal
    factor of an output (the rational order) stays outside the grouping."""
    if built is None:
        return None
    statements, ((name, outs),) = built
    statements = list(statements)
    counter = [0]

    def let(expr):
        if expr.is_Atom or (expr.is_Mul and len(expr.args) == 2 and expr.args[0] == -1):
            return expr
        counter[0] += 1
        sym = sp.Symbol(f"_p{counter[0]}")
        statements.append(Step(sym, expr))
        return sym

    reciprocals = {s.symbol for s in statements if s.kind == "recip" and str(s.symbol).startswith("_v")}
    new_outs = []
    for e in outs:
        scale = sp.S.One
        if e.is_Mul and any(f in reciprocals for f in e.args):
            scale = sp.Mul(*[f for f in e.args if f in reciprocals])
            e = sp.Mul(*[f for f in e.args if f not in reciprocals])
        e = sp.expand(e)
        parts = sp.collect(e, list(by), evaluate=False)
        groups: dict = {}
        for monomial, coefficient in parts.items():
            content, primitive = sp.sympify(coefficient).as_content_primitive()
            if primitive.could_extract_minus_sign():
                content, primitive = -content, -primitive
            term = monomial * let(primitive) if monomial != 1 else primitive
            sign = -1 if content < 0 else 1
            groups.setdefault(abs(content), []).append(sign * term)
        total = sp.S.Zero
        for content, terms in sorted(groups.items(), key=lambda kv: (abs(kv[0]) != 1, str(kv[0]))):
            if abs(content) == 1:
                total += content * sp.Add(*terms)
            else:
                total += content * let(sp.Add(*terms))
        new_outs.append(total * scale if scale != 1 else total)
    return statements, ((name, tuple(new_outs)),)


def lower(graph: Graph, strategy: str = "auto") -> Lowered:
    """The straight-line program of ``graph``; ``strategy`` ``"staged"``, ``"expanded"``,
    ``"collected"``, ``"rational"`` or ``"auto"`` (fewer multiplications, then fewer additions;
    staged on a tie). The expanded orders are built only when the bound on their size
    (:func:`expanded_size_bound`, computed without expanding) is below EXPANSION_BOUND_LIMIT and
    the exact expansion stays below EXPANSION_LIMIT terms; the staged order grows linearly with
    the traced program."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {', '.join(map(repr, STRATEGIES))}, got {strategy!r}")
    inputs = tuple((name, syms) for name, syms, _ in graph.inputs)
    known = _input_symbols(inputs)
    candidates = []
    groupings = [syms for _, syms, _ in graph.inputs]
    if len(graph.inputs) > 2:  # all inputs but one: the coefficients are polynomials of that one
        groupings += [tuple(s for other, syms, _ in graph.inputs if other != name for s in syms)
                      for name, _, _ in graph.inputs]
    cache = {}

    def once(key, make):
        if key not in cache:
            cache[key] = make()
        return cache[key]

    builders = [("staged", lambda: _staged(graph)), ("expanded", lambda: once("e", lambda: _expanded(graph))),
                ("rational", lambda: once("r", lambda: _rational(graph)))]
    for syms in groupings:
        builders.append(("collected", lambda syms=syms: _collected(once("e", lambda: _expanded(graph)), syms)))
        builders.append(("rational", lambda syms=syms: _collected(once("r", lambda: _rational(graph)), syms)))
    for name, build in builders:
        if strategy not in ("auto", name):
            continue
        built = build()
        if built is None:
            continue
        statements, outputs = built
        statements = _eliminate_dead(statements, outputs)
        statements, outputs = _cse(statements, outputs, known, "_c")
        ops = count_operations(statements, outputs)
        candidates.append(Lowered(inputs, statements, outputs, name, ops))
    if not candidates:
        raise ValueError(f"the {strategy} program is too large to expand or has no division to cancel; use "
                         "strategy='staged' (or 'auto')")
    best = min(candidates, key=lambda c: (c.operations["multiplications"], c.operations["additions"]))
    _check_orders(best.statements)
    return best


# ---------------------------------------------------------------------------- backward
def backward(forward: Lowered, grad_name: str = "grad") -> Lowered:
    """Reverse-mode derivative of ``forward``: inputs ``(*inputs, grad)``, outputs the gradient
    of ``sum(grad * out)`` with respect to each input, lowered with CSE."""
    (out_name, out_exprs), = forward.outputs
    g_syms = tuple(sp.Symbol(f"{grad_name}_{i}") for i in range(len(out_exprs)))
    inputs = forward.inputs + ((grad_name, g_syms),)
    adjoint: dict = {}

    def add(sym, value):
        if value != 0:
            adjoint[sym] = adjoint.get(sym, sp.S.Zero) + value

    for g, e in zip(g_syms, out_exprs):
        e = sp.sympify(e)
        for v in e.free_symbols:
            add(v, g * sp.diff(e, v))
    extra: list[Step] = []
    adjoint_steps: list[Step] = []
    counter = [0]

    def fresh(prefix):
        counter[0] += 1
        return sp.Symbol(f"_{prefix}{counter[0]}")

    for s in reversed(forward.statements):
        bar = adjoint.pop(s.symbol, None)
        if bar is None:
            continue
        bsym = fresh("b")
        adjoint_steps.append(Step(bsym, bar))
        if s.kind == "let":
            for v in s.expr.free_symbols:
                add(v, bsym * sp.diff(s.expr, v))
        elif s.kind == "recip":
            add_args = s.expr.free_symbols
            for v in add_args:
                add(v, -bsym * s.symbol * s.symbol * sp.diff(s.expr, v))
        elif s.kind == "sqrt":
            r = fresh("r")
            extra.append(Step(r, s.symbol, "recip", 0, "the derivative of sqrt() (infinite at 0)"))
            adjoint_steps.append(extra[-1])
            for v in s.expr.free_symbols:
                add(v, bsym * r * sp.diff(s.expr, v) / 2)
        elif s.kind == "abs":
            sg = fresh("s")
            adjoint_steps.append(Step(sg, s.expr, "sign", 0, s.what))
            for v in s.expr.free_symbols:
                add(v, bsym * sg * sp.diff(s.expr, v))
        elif s.kind == "g":
            d = fresh("g")
            adjoint_steps.append(Step(d, s.expr, "g", s.order + 1, s.what))
            for v in s.expr.free_symbols:
                add(v, bsym * d * sp.diff(s.expr, v))
        elif s.kind == "sign":
            continue  # piecewise constant
        else:  # pragma: no cover
            raise ValueError(f"no derivative rule for a {s.kind!r} step")
    grads = []
    for name, syms in forward.inputs:
        grads.append((f"{grad_name}_{name}", tuple(adjoint.get(v, sp.S.Zero) for v in syms)))
    statements = list(forward.statements) + adjoint_steps
    outputs = tuple(grads)
    statements = _eliminate_dead(statements, outputs)
    statements, outputs = _cse(statements, outputs, _input_symbols(inputs), "_d")
    _check_orders(statements)
    ops = count_operations(statements, outputs)
    return Lowered(inputs, statements, outputs, forward.strategy, ops)
