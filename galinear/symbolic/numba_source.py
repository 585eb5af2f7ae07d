r"""Numba source text: the one printer of every generated numba module (sympy only; no numba import).

Three places generate numba code, so its printer sits in the lowest layer: the compiler's numba
target (:mod:`galinear.compiler.targets.numba`, which loads and calls what :func:`print_program`
prints), the shipped kernels of galinear/_generated (:mod:`galinear.symbolic.codegen`, through
:func:`print_blocked`) and the per-pattern kernels of :mod:`galinear.core.graded` (through
:func:`print_strided`). The three layouts print the statements with :class:`Rules` through
:func:`galinear.symbolic.emit.statement_lines`, from a program whose common subexpressions were
shared by :mod:`galinear.symbolic.lowering`. Where the printed modules are kept and how they are
checked is :mod:`galinear._numba`'s (:func:`galinear._numba.load_generated`).

``print_program``
    ``kernel_serial`` and ``kernel_parallel`` over rows (``prange``), ``cache=True``: the input
    arrays ``(N, k_i)``, the constants (an array of the input dtype, so float32 code stays float32),
    the output arrays and a ``uint8`` status per row; returns the sum of ``v - v`` over the outputs
    and of the rows' status codes (0 unless a value is inf or nan or a guard failed). Beside them
    ``kernel_unchecked(*inputs, *outputs)`` (:func:`unchecked_lines`), ``CONSTANTS`` and ``GUARDS``.
``print_blocked``
    One ``kernel(*inputs, out)`` over blocks of :data:`ROWS_PER_BLOCK` rows, each block transposed
    into (width, rows) buffers so that the straight-line body runs over contiguous rows (LLVM
    vectorises it across the batch); returns True when every input entry is finite.
``print_strided``
    One ``kernel(a, b, out, sa, sb)`` over rows: row r of ``out`` from row ``r * sa`` of ``a`` and
    ``r * sb`` of ``b`` (a stride of 0 broadcasts one row), reading and writing only the columns it is
    given (the per-pattern kernels of :mod:`galinear.core.graded`); returns True when every entry it
    read is finite.
"""
from __future__ import annotations

from galinear.symbolic.emit import (
    ExpressionPrinter,
    constants_line,
    g_orders,
    guard_condition,
    guard_messages,
    horner,
    statement_lines,
    typed_constants,
)

__all__ = ["Rules", "g_function_lines", "print_program", "print_blocked", "print_strided", "used_inputs",
           "ROWS_PER_BLOCK", "BODY_START", "BODY_END"]

#: Rows per block of :func:`print_blocked`.
ROWS_PER_BLOCK = 64
BODY_START = "# --- straight-line body ---"
BODY_END = "# --- end of body ---"


class Rules:
    """One row's statements in numba: scalars, the typed constants ``_one`` and ``_zero``."""

    @staticmethod
    def guard(step, arg, code):
        return [f"if {guard_condition(step, arg)}: bad = {code}"]

    @staticmethod
    def let(s, arg, step):
        return [f"{s} = {arg}"]

    @staticmethod
    def recip(s, arg, step):
        return [f"{s} = _one / {arg}"]

    @staticmethod
    def sqrt(s, arg, step):
        return [f"{s} = math.sqrt({arg}) if {arg} > _zero else {arg} - {arg}"]  # nan stays nan

    @staticmethod
    def abs(s, arg, step):
        return [f"{s} = abs({arg})"]

    @staticmethod
    def sign(s, arg, step):
        return [f"{s} = _one if {arg} > _zero else (-_one if {arg} < _zero else _zero)"]

    @staticmethod
    def g(s, arg, step):
        return [f"{s} = _gfun{step.order}({arg})"]


def g_function_lines(m: int) -> list[str]:
    """Scalar numba code of G_m (the series below 1, else cos/sin or cosh/sinh and the recurrence)."""
    lines = ["@jit(inline='always', error_model='numpy')", f"def _gfun{m}(lam):", "    if abs(lam) < 1.0:",
             f"        return {horner(m, 'lam')}", "    if lam > 0:", "        r = math.sqrt(lam)",
             "        g0 = math.cosh(r)", "        g1 = math.sinh(r) / (2.0 * r)", "    else:",
             "        r = math.sqrt(-lam)", "        g0 = math.cos(r)", "        g1 = math.sin(r) / (2.0 * r)"]
    if m == 0:
        lines.append("    return g0")
        return lines
    for k in range(1, m):
        lines.append(f"    g{k + 1} = (g{k - 1} - {4 * k - 2}.0 * g{k}) / (4.0 * lam)")
    lines.append(f"    return g{m}")
    return lines


def print_program(program, name: str, header: str) -> str:
    numbers, pr = typed_constants(program)
    ins = [n for n, _ in program.inputs]
    outs = [n for n, _ in program.outputs]
    guarded = any(s.kind in ("recip", "sqrt") for s in program.statements)
    body = statement_lines(program, pr, Rules)
    lines = [header, "import math", "", "import numpy as np", "", "from galinear._numba import jit, prange", "", ""]
    for m in g_orders(program):
        lines += g_function_lines(m) + ["", ""]
    for variant, loop, opts in (("serial", "range", "error_model='numpy'"),
                                ("parallel", "prange", "parallel=True, error_model='numpy'")):
        lines.append(f"@jit({opts})")
        lines.append(f"def kernel_{variant}({', '.join(ins)}, consts, {', '.join(outs)}, status):")
        lines.append(f"    nrows = {outs[0]}.shape[0]")
        lines.append("    _one = consts[0]")
        lines.append("    _zero = consts[0] - consts[0]")
        for i in range(len(numbers)):
            lines.append(f"    _k{i} = consts[{i + 1}]")
        lines.append("    finite = _zero")
        lines.append(f"    for row in {loop}(nrows):")
        if guarded:
            lines.append("        bad = 0")
        for n_, syms in program.inputs:
            for col, s in enumerate(syms):
                lines.append(f"        {s} = {n_}[row, {col}]")
        lines += [f"        {ln}" for ln in body]
        lines.append("        _rowcheck = _zero")
        for n_, exprs in program.outputs:
            for col, e in enumerate(exprs):
                lines.append(f"        _v = {pr(e) if e != 0 else '_zero'}")
                lines.append(f"        {n_}[row, {col}] = _v")
                lines.append("        _rowcheck = _rowcheck + (_v - _v)")
        # one reduction statement per row (prange); a failed guard makes it nonzero too
        lines.append("        finite += _rowcheck + bad" if guarded else "        finite += _rowcheck")
        if guarded:
            lines.append("        status[row] = bad")
        lines.append("    return finite")
        lines += ["", ""]
    lines += unchecked_lines(ins, outs, len(numbers) + 1, guarded)
    lines.append(constants_line(numbers))
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("")
    return "\n".join(lines)


def unchecked_lines(ins, outs, count: int, guarded: bool) -> list[str]:
    """``kernel_unchecked(*inputs, *outputs)``: the serial loop with the constants made in the
    inputs' dtype and no other step; callable from the user's own numba code (``Kernel.unchecked``).
    A failed guard raises ValueError; inputs and outputs are not checked."""
    first = ins[0]
    lines = ["@jit(error_model='numpy')", f"def kernel_unchecked({', '.join(ins + outs)}):",
             f"    consts = np.empty({count}, {first}.dtype)",
             f"    for i in range({count}):",
             "        consts[i] = CONSTANTS[i]",
             f"    status = np.zeros({outs[0]}.shape[0] if {int(guarded)} else 1, np.uint8)",
             f"    kernel_serial({', '.join(ins)}, consts, {', '.join(outs)}, status)"]
    if guarded:
        lines += ["    for row in range(status.shape[0]):",
                  "        if status[row] != 0:",
                  "            raise ValueError('a step of the kernel left its domain (a division by 0 or the square "
                  "root of a negative number); the checked call names the step and the rows')"]
    return lines + ["", ""]




def used_inputs(program) -> set:
    """The input symbols a program reads."""
    used = set()
    for step in program.statements:
        used |= step.expr.free_symbols
    for _, exprs in program.outputs:
        for e in exprs:
            used |= e.free_symbols
    return used


def print_blocked(program, header: str, summary: str, printer: ExpressionPrinter) -> str:
    """``kernel(*inputs, out)`` over blocks of rows (the layout of the shipped kernels, documented in
    :mod:`galinear._generated`) for a program of ``let`` statements and one output array."""
    used = used_inputs(program)
    args = [name for name, _ in program.inputs]
    widths = {name: len(syms) for name, syms in program.inputs}
    (_, outputs), = program.outputs
    width_out = len(outputs)
    block = ROWS_PER_BLOCK
    lines = [header, "import numpy as np", "", "from galinear._numba import jit", "", "",
             "@jit", f"def kernel({', '.join(args)}, out):", f'    """{summary}; see galinear._generated for the signature."""']
    checks = [f"{name}.shape[1] != {widths[name]}" for name in args] + [f"out.shape[1] != {width_out}"]
    lines.append(f"    if {' or '.join(checks)}:")
    lines.append("        raise ValueError(\"wrong row widths: expected "
                 + ", ".join(f"{n}: {widths[n]}" for n in args) + f", out: {width_out}\")")
    lines.append(f"    if {' or '.join(f'{name}.shape[0] != out.shape[0]' for name in args)}:")
    lines.append("        raise ValueError(\"all arguments need the same batch size (axis 0)\")")
    lines.append("    nrows = out.shape[0]")
    for name in args:
        lines.append(f"    {name}_t = np.empty(({widths[name]}, {block}), dtype={name}.dtype)")
    lines.append(f"    out_t = np.empty(({width_out}, {block}), dtype=out.dtype)")
    lines.append("    probe = out.dtype.type(0.0)  # stays 0 unless an input entry is inf or nan")
    lines.append(f"    for start in range(0, nrows, {block}):")
    lines.append(f"        count = min({block}, nrows - start)")
    lines.append("        for row in range(count):")
    for name in args:
        lines.append(f"            for col in range({widths[name]}):")
        lines.append(f"                value = {name}[start + row, col]")
        lines.append(f"                {name}_t[col, row] = value")
        lines.append("                probe += value - value")
    lines.append("        for row in range(count):")
    lines.append(f"            {BODY_START}")
    for name, syms in program.inputs:
        lines += [f"            {sym} = {name}_t[{col}, row]" for col, sym in enumerate(syms) if sym in used]
    lines += [f"            {ln}" for ln in statement_lines(program, printer, Rules)]
    for col, e in enumerate(outputs):
        lines.append(f"            out_t[{col}, row] = {printer(e) if e != 0 else 0}")
    lines.append(f"            {BODY_END}")
    lines.append("        for row in range(count):")
    lines.append(f"            for col in range({width_out}):")
    lines.append("                out[start + row, col] = out_t[col, row]")
    lines.append("    return probe == 0")
    lines.append("")
    return "\n".join(lines)


def print_strided(program, header: str, printer: ExpressionPrinter, columns: dict | None = None) -> str:
    """``kernel(a, b, out, sa, sb)`` for a program of ``let`` statements over two inputs and one
    output array (the layout of :mod:`galinear.core.graded`).

    ``columns`` maps an input's name to the column of each of its symbols, and the output's name to
    the column of each output expression (default: their positions). Only the input symbols the
    program reads are loaded; every output expression is written, a zero one as ``0.0``, so the
    caller lists only the columns it wants written."""
    columns = columns or {}
    if len(program.inputs) != 2 or len(program.outputs) != 1:
        raise ValueError("print_strided takes a program of two inputs and one output array")
    if any(step.kind != "let" for step in program.statements):
        raise ValueError("print_strided prints let statements only (no guarded steps)")
    used = used_inputs(program)
    names = [name for name, _ in program.inputs]
    lines = [header, "import numpy as np", "", "from galinear._numba import jit", "", "", "@jit",
             f"def kernel({', '.join(names)}, out, {', '.join(f's{n}' for n in names)}):  # pragma: no cover - compiled",
             "    probe = 0.0", "    for r in range(out.shape[0]):"]
    lines += [f"        r{name} = r * s{name}" for name in names]
    loaded = []
    for name, syms in program.inputs:
        for sym, col in zip(syms, columns.get(name, range(len(syms)))):
            if sym in used:
                lines.append(f"        {sym} = {name}[r{name}, {col}]")
                loaded.append(str(sym))
    lines.append(f"        probe += ({' + '.join(loaded) or '0.0'}) * 0.0")
    lines += [f"        {ln}" for ln in statement_lines(program, printer, Rules)]
    (out_name, exprs), = program.outputs
    for e, col in zip(exprs, columns.get(out_name, range(len(exprs)))):
        lines.append(f"        out[r, {col}] = {printer(e) if e != 0 else '0.0'}")
    lines.append("    return np.isfinite(probe)")
    lines.append("")
    return "\n".join(lines)
