"""The frame the vectorised array targets share (numpy, torch, jax): one function ``kernel`` on
arrays ``(..., k_i)`` that returns ``(outputs, status)``; each target gives its library's names and
its rules for the statements."""
from __future__ import annotations

from galinear.symbolic.emit import (
    ExpressionPrinter,
    array_g_lines,
    g_orders,
    guard_condition,
    guard_messages,
    number_text,
    statement_lines,
)

__all__ = ["ArrayRules", "array_module"]


class ArrayRules:
    """Statements on whole arrays; ``names`` maps where, sqrt, abs, sign, exp, cos, sin to the
    library's spelling (a target subclasses this for what its library does differently)."""

    names: dict = {}

    @classmethod
    def guard(cls, step, arg, code):
        where = cls.names["where"]
        return [f"status = {where}((status == 0) & ({guard_condition(step, arg)}), _zero + {code}.0, status)"]

    @staticmethod
    def let(s, arg, step):
        return [f"{s} = {arg}"]

    @classmethod
    def abs(cls, s, arg, step):
        return [f"{s} = {cls.names['abs']}({arg})"]

    @classmethod
    def sign(cls, s, arg, step):
        return [f"{s} = {cls.names['sign']}({arg})"]

    @staticmethod
    def g(s, arg, step):  # on the argument's own shape: broadcast only at the outputs
        return [f"{s} = _gfun{step.order}({arg}{'' if step.expr.free_symbols else ' + _zero'})"]

    @classmethod
    def recip(cls, s, arg, step):
        """``1 / arg`` with inf where arg is 0, and a divisor that is never 0 (finite gradients)."""
        where = cls.names["where"]
        return [f"{s} = {where}({arg} == 0, _zero + float('inf'), 1.0 / {where}({arg} == 0, _zero + 1.0, {arg}))"]


def array_module(program, header: str, imports: list[str], rules, stack: str) -> str:
    """The module: imports, the G_m helpers, ``kernel(*inputs)`` and ``GUARDS``; ``stack`` is the
    call that joins one output's columns on the last axis, e.g. ``np.stack({}, axis=-1)``."""
    pr = ExpressionPrinter(lambda c: number_text(c) if not c.is_Integer else f"{int(c)}.0")
    ins = [n for n, _ in program.inputs]
    guarded = any(s.kind in ("recip", "sqrt") for s in program.statements)
    lines = [header, *imports, "", ""]
    for m in g_orders(program):
        lines += array_g_lines(m, rules.names) + ["", ""]
    lines.append(f"def kernel({', '.join(ins)}):")
    lines.append('    """Arrays (..., k) in, (outputs, status) out; status is None without guards."""')
    for n_, syms in program.inputs:
        for col, s in enumerate(syms):
            lines.append(f"    {s} = {n_}[..., {col}]")
    lines.append(f"    _zero = {' + '.join(f'{n}[..., 0] * 0.0' for n in ins)}")
    if guarded:
        lines.append("    status = _zero * 0.0")
    lines += [f"    {ln}" for ln in statement_lines(program, pr, rules)]
    results = []
    for n_, exprs in program.outputs:
        cols = [f"{pr(e)} + _zero" if e != 0 else "_zero" for e in exprs]
        lines.append(f"    {n_} = {stack.format('(' + ', '.join(cols) + ',)')}")
        results.append(n_)
    lines.append(f"    return ({', '.join(results)},), {'status' if guarded else 'None'}")
    lines.append("")
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("")
    return "\n".join(lines)
