r"""The shared walk over a lowered program's statements (sympy only, no target knowledge).

A target (one module under :mod:`galinear.compiler.targets`) prints a
:class:`~galinear.symbolic.lowering.Lowered` program with the pieces here:

- :class:`ExpressionPrinter` turns +, *, integer powers, symbols and numbers into text; the
  target says how a constant is written (``number``);
- :func:`statement_lines` walks the statements in order: the guard check of each guarded step
  (a reciprocal or a square root), then the step itself, each printed by the target's
  ``rules`` (an object with the methods ``guard``, ``let``, ``recip``, ``sqrt``, ``abs``,
  ``sign`` and ``g``, each returning lines);
- :func:`emit` checks what every target needs (an identifier for a name, G_m orders the kernels
  evaluate), renames the inputs into the private namespace (:func:`private_names`) and calls the
  target's ``print_program``; it returns :class:`Sources` (the text, and a header for C).

Constants are exact rationals in the program; each target prints them in its input dtype.
The exp closed forms call :math:`G_m(\lambda)` (:class:`galinear.symbolic.trace.Gm`), emitted as
helpers ``_gfun0`` .. ``_gfun3``: a 14-term series for :math:`|\lambda| < 1`, otherwise
cos/sin (or cosh/sinh) of :math:`\sqrt{|\lambda|}` and the recurrence
:math:`G_{m+1} = (G_{m-1} - (4m-2)G_m)/(4\lambda)`; :func:`horner` and :func:`array_g_lines`
print the parts every target shares.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace

import sympy as sp

from galinear.symbolic.lowering import MAX_G_ORDER, Lowered

__all__ = ["emit", "Sources", "ExpressionPrinter", "statement_lines", "series_coefficients", "SERIES_TERMS",
           "guard_messages", "private_names", "horner", "array_g_lines", "number_text", "constants_of",
           "typed_constant", "typed_constants", "constants_line", "g_orders", "guard_steps",
           "guard_condition", "STEP_KINDS"]

SERIES_TERMS = 14


def series_coefficients(m: int, terms: int = SERIES_TERMS) -> list:
    """Taylor coefficients of :math:`G_m` at 0: :math:`(j+m)!/(j!(2j+2m)!)`."""
    return [sp.factorial(j + m) / (sp.factorial(j) * sp.factorial(2 * j + 2 * m)) for j in range(terms)]


def number_text(value) -> str:
    """A constant as Python reads it back: the shortest repr of its float."""
    return repr(float(value))


# ---------------------------------------------------------------------------- expressions
class ExpressionPrinter:
    """Prints +, *, integer powers, symbols and numbers; ``number(c)`` gives a constant's token.

    The terms of a sum are printed in sympy's stored order, or with ``ordered`` in the order of
    sympy's printers (``as_ordered_terms``: the order the shipped kernels have always summed in)."""

    def __init__(self, number, ordered: bool = False):
        self.number = number
        self.ordered = ordered

    def __call__(self, expr) -> str:
        return self.p(sp.sympify(expr))

    def p(self, e) -> str:
        if e.is_Symbol:
            return str(e)
        if e.is_Number:
            return self.number(e)
        if e.is_Add:
            terms = e.as_ordered_terms() if self.ordered else list(e.args)
            out = self.term(terms[0], first=True)
            for t in terms[1:]:
                out += self.term(t, first=False)
            return f"({out})"
        if e.is_Mul:
            coeff, rest = e.as_coeff_Mul()
            body = self.product(rest)
            if coeff == 1:
                return body
            if coeff == -1:
                return f"(-{body})"
            return f"({self.number(coeff)} * {body})"
        if e.is_Pow:
            return self.power(e)
        raise ValueError(f"cannot print {type(e).__name__} ({e}) in a straight-line kernel")

    def term(self, t, first: bool) -> str:
        coeff, rest = t.as_coeff_Mul()
        if coeff < 0:
            inner = self.p(-t)
            return f"-{inner}" if first else f" - {inner}"
        inner = self.p(t)
        return inner if first else f" + {inner}"

    def product(self, e) -> str:
        factors = sp.Mul.make_args(e)
        return " * ".join(self.p(f) if not f.is_Add else self.p(f) for f in factors)

    def power(self, e) -> str:
        base, exp = e.as_base_exp()
        if exp.is_Integer and exp > 0:
            b = self.p(base)
            return "(" + " * ".join([b] * int(exp)) + ")"
        raise ValueError(f"cannot print the power {e} (only positive integer powers)")


def constants_of(program: Lowered) -> list:
    """Every non-integer constant and every integer other than +-1 (numba reads them typed)."""
    found = set()
    exprs = [s.expr for s in program.statements] + [sp.sympify(e) for _, es in program.outputs for e in es]
    for e in exprs:
        for atom in e.atoms(sp.Number):
            a = abs(atom)
            if a != 1 and a != 0:
                found.add(a)
    return sorted(found, key=lambda c: (float(c), str(c)))


def typed_constant(c, idx: dict) -> str:
    """A constant read from the typed constants array (numba, triton)."""
    if c == 0:
        return "_zero"
    if abs(c) == 1:
        return "_one" if c > 0 else "(-_one)"
    return ("-" if c < 0 else "") + f"_k{idx[abs(c)]}"


def typed_constants(program: Lowered):
    """``(numbers, printer)`` for a target that reads constants from a typed array (numba, triton):
    ``consts[0]`` is 1, ``consts[1 + i]`` is ``numbers[i]``; the printer names them ``_k<i>``."""
    numbers = constants_of(program)
    idx = {c: i for i, c in enumerate(numbers)}
    return numbers, ExpressionPrinter(lambda c: typed_constant(c, idx))


def constants_line(numbers) -> str:
    """The ``CONSTANTS`` tuple of a module that reads typed constants (1.0 first)."""
    return f"CONSTANTS = ({', '.join(['1.0'] + [number_text(c) for c in numbers])},)"


def g_orders(program: Lowered) -> list[int]:
    return sorted({s.order for s in program.statements if s.kind == "g"})


def guard_steps(program: Lowered) -> list:
    return [s for s in program.statements if s.kind in ("recip", "sqrt")]


def _describe_guard(step) -> str:
    if step.kind == "recip":
        return f"{step.what or 'a division'}: the denominator is 0"
    return f"{step.what or 'sqrt()'}: the argument is negative"


def guard_messages(program: Lowered) -> list[str]:
    """Message of each guard, in the order of the status codes (code = 1 + index)."""
    return [_describe_guard(s) for s in guard_steps(program)]


# ---------------------------------------------------------------------------- G_m helpers
def horner(m: int, variable: str) -> str:
    """The 14-term series of G_m in ``variable``, as nested products (Horner's scheme)."""
    coeffs = [number_text(c) for c in series_coefficients(m)]
    text = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        text = f"{c} + {variable} * ({text})"
    return text


#: What :func:`array_g_lines` needs of an array library: its functions' spellings.
ARRAY_FUNCTIONS = ("where", "sqrt", "cos", "sin", "abs", "exp")


def array_g_lines(m: int, names: dict, decorator: str | None = None) -> list[str]:
    """Array code of G_m (both branches evaluated, then ``where``) for a target whose library
    spells the functions of :data:`ARRAY_FUNCTIONS` as ``names`` gives them."""
    w, sq = names["where"], names["sqrt"]
    lines = [decorator] if decorator else []
    lines += [f"def _gfun{m}(lam):",
              f"    small = {names['abs']}(lam) < 1.0",
              f"    ls = {w}(small, lam, lam * 0.0)",
              f"    lb = {w}(small, lam * 0.0 + 2.0, lam)",
              "    pos = lb > 0",
              f"    rp = {sq}({w}(pos, lb, lb * 0.0 + 1.0))",
              f"    rn = {sq}({w}(pos, lb * 0.0 + 1.0, -lb))",
              f"    ep = {names['exp']}(rp)",
              f"    em = {names['exp']}(-rp)",
              f"    g0 = {w}(pos, 0.5 * (ep + em), {names['cos']}(rn))",
              f"    g1 = {w}(pos, 0.25 * (ep - em) / rp, 0.5 * {names['sin']}(rn) / rn)"]
    for k in range(1, m):
        lines.append(f"    g{k + 1} = (g{k - 1} - {4 * k - 2}.0 * g{k}) / (4.0 * lb)")
    lines.append(f"    series = {horner(m, 'ls')}")
    lines.append(f"    return {w}(small, series, g{m})")
    return lines


# ---------------------------------------------------------------------------- the walk
#: The statement kinds of a lowered program; a target's rules print each of them.
STEP_KINDS = ("let", "recip", "sqrt", "abs", "sign", "g")


def statement_lines(program: Lowered, printer, rules) -> list[str]:
    """Every statement of ``program`` in order, each preceded by its guard check when it has one
    (the status code of a guard is 1 + its index in :func:`guard_steps`)."""
    codes = {id(s): i + 1 for i, s in enumerate(guard_steps(program))}
    lines = []
    for step in program.statements:
        if step.kind not in STEP_KINDS:
            raise ValueError(f"unknown step kind {step.kind!r}")
        arg = printer(step.expr)
        if id(step) in codes:
            lines += rules.guard(step, arg, codes[id(step)])
        lines += getattr(rules, step.kind)(str(step.symbol), arg, step)
    return lines


def guard_condition(step, arg: str) -> str:
    """The condition under which a guarded step fails: a zero denominator, a negative root."""
    return f"{arg} == 0" if step.kind == "recip" else f"{arg} < 0"

# ---------------------------------------------------------------------------- names
#: Every identifier of a printed program that is not the printer's own starts with "_" and a
#: letter (temporaries ``_t1``, CSE symbols ``_c0``, ...). The user's input names (which never
#: start with "_") appear only in the header: inputs are printed as ``_in{i}``, their
#: coefficients as ``_x{i}_{j}`` and the outputs as ``_out{i}``, so no input name, however it
#: is spelled (``out``, ``np``, ``x_e1`` beside ``x``), can meet a generated one.
_PRIVATE = re.compile(r"_(in|x|out)\d")


def private_names(program: Lowered) -> Lowered:
    """``program`` with the inputs, their coefficients and the outputs renamed into the private
    namespace above (the order of inputs and outputs is unchanged)."""
    rename = {}
    inputs = []
    for i, (_, syms) in enumerate(program.inputs):
        new = tuple(sp.Symbol(f"_x{i}_{j}") for j in range(len(syms)))
        rename.update(zip(syms, new))
        inputs.append((f"_in{i}", new))
    for step in program.statements:
        if not str(step.symbol).startswith("_") or _PRIVATE.match(str(step.symbol)):
            raise ValueError(f"generated symbol {step.symbol} is outside the private namespace")
    statements = [replace(s, expr=sp.sympify(s.expr).xreplace(rename)) for s in program.statements]
    outputs = tuple((f"_out{i}", tuple(sp.sympify(e).xreplace(rename) for e in exprs))
                    for i, (_, exprs) in enumerate(program.outputs))
    return replace(program, inputs=tuple(inputs), statements=statements, outputs=outputs)


# ---------------------------------------------------------------------------- entry point
@dataclass(frozen=True)
class Sources:
    """What a target prints: the source text, and for C the header declaring its functions."""

    text: str
    header: str | None = None


def emit(program: Lowered, target, name: str = "kernel", header: str = "") -> Sources:
    """Sources of ``program`` for ``target``, a target module (:mod:`galinear.compiler.targets`:
    its ``NAME`` and ``print_program(program, name, header)``)."""
    if any(s.kind == "g" and s.order > MAX_G_ORDER for s in program.statements):
        raise ValueError(f"the kernels evaluate G_0 .. G_{MAX_G_ORDER}")
    if not name.isidentifier():
        raise ValueError(f"kernel name {name!r} must be an identifier")
    header = header or f'"""Generated by galinear.compile ({target.NAME}). Do not edit by hand."""\n'
    printed = target.print_program(private_names(program), name, header)
    return printed if isinstance(printed, Sources) else Sources(printed)
