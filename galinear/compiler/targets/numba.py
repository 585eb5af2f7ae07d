"""The numba target: ``kernel_serial`` and ``kernel_parallel`` over rows, ``cache=True``.

Generated module: both functions take the input arrays ``(N, k_i)``, the constants (an array of
the input dtype, so float32 code stays float32), the output arrays and a ``uint8`` status per row
(0, or 1 + the index of the guard that failed), and return the sum of ``v - v`` over the outputs
(0 unless a value is inf or nan). Loaded through :func:`galinear._numba.load_generated`, called on
numpy arrays (``out=`` and ``parallel=``).
"""
from __future__ import annotations

import warnings

import numpy as np

from galinear._numba import readonly
from galinear.compiler.targets._runtime import ArrayLoaded
from galinear.symbolic.emit import (constants_line, g_orders, guard_condition, guard_messages, horner,
                                    statement_lines, typed_constants)

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "g_function_lines",
           "PARALLEL_ROWS", "PARALLEL_MULTIPLICATIONS"]

NAME = "numba"
FILE_SUFFIX = ".py"
AUTOGRAD = None

#: ``parallel="auto"`` runs the ``prange`` variant for batches of at least this many rows when each
#: row costs at least PARALLEL_MULTIPLICATIONS (shorter programs are bound by memory traffic). The
#: default is the serial variant: in the side-by-side benchmark the prange variant with 2 threads
#: was slower than 1 thread on a fresh output array (docs/performance.md).
PARALLEL_ROWS = 16384
PARALLEL_MULTIPLICATIONS = 24


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
        lines.append("        finite += _rowcheck")  # one reduction statement per row (prange)
        if guarded:
            lines.append("        status[row] = bad")
        lines.append("    return finite")
        lines += ["", ""]
    lines.append(constants_line(numbers))
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("")
    return "\n".join(lines)


class Loaded(ArrayLoaded):
    TARGET = NAME

    def __init__(self, sources, name, guards, widths, out_widths, multiplications=0):
        super().__init__(sources, name, guards, widths, out_widths, multiplications)
        self._constant_arrays = {}
        self._no_status = np.zeros(1, np.uint8)  # never written: a program without guards

    def constants(self, dtype):
        """The kernel's constants in ``dtype`` (read-only, made once per dtype)."""
        cached = self._constant_arrays.get(dtype)
        if cached is None:
            cached = self._constant_arrays[dtype] = readonly(np.asarray(self.module.CONSTANTS, dtype))
        return cached

    def use_parallel(self, rows: int, parallel) -> bool:
        if parallel not in (False, True, "auto"):
            raise ValueError(f"parallel must be False, True or 'auto', got {parallel!r}")
        if parallel == "auto":
            return rows >= PARALLEL_ROWS and self.multiplications >= PARALLEL_MULTIPLICATIONS
        return bool(parallel)

    def run_arrays(self, arrays, names, out, parallel):
        return self.run_rows(arrays, names, out, parallel)

    def run_flat(self, flat, names, outs, status, dtype, parallel):
        rows = flat[0].shape[0]
        fn = self.module.kernel_parallel if self.use_parallel(rows, parallel) else self.module.kernel_serial
        finite = fn(*[readonly(a) for a in flat], self.constants(dtype), *outs,
                    self._no_status if status is None else status)
        if finite != 0:  # nan and inf compare unequal to 0 as well
            self.check_finite(names, flat)
            if status is not None:
                self.raise_status(status)
            warnings.warn("the kernel produced inf or nan from finite inputs (overflow)", RuntimeWarning,
                          stacklevel=7)
