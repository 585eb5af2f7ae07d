r"""Source printers for lowered programs (sympy only; the text imports what its target needs).

One printer per target turns a :class:`~galinear.symbolic.lowering.Lowered` program into the
source of a module (or a C file and header):

``numba``
    ``kernel_serial`` and ``kernel_parallel`` (``prange`` over rows), both with ``cache=True``
    through ``galinear._numba.jit``. Arguments: the input arrays ``(N, k_i)``, the constants
    (an array of the input dtype, so float32 code stays float32), the output arrays and a
    ``uint8`` status per row (0, or 1 + the index of the guard that failed).
``numpy``
    ``kernel(*inputs)`` on arrays ``(..., k_i)``, vectorised over the leading axes; returns
    ``(outputs, status)``.
``torch``
    The same on tensors; plain torch operations, so autograd, ``torch.func`` and
    ``torch.compile`` see through it.
``c``
    C99: ``int NAME_f64(...)`` and ``int NAME_f32(...)`` over row-major arrays, returning the
    number of rows that failed a guard (the status array may be NULL); a header declares them.
``triton``
    A ``@triton.jit`` kernel over blocks of rows and a launcher ``kernel(*inputs)`` on tensors.

Constants are exact rationals in the program; each target prints them in its input dtype.
The exp closed forms call :math:`G_m(\lambda)` (:class:`galinear.symbolic.trace.Gm`), emitted as
helpers ``_gfun0`` .. ``_gfun3``: a 14-term series for :math:`|\lambda| < 1`, otherwise
cos/sin (or cosh/sinh) of :math:`\sqrt{|\lambda|}` and the recurrence
:math:`G_{m+1} = (G_{m-1} - (4m-2)G_m)/(4\lambda)`.
"""
from __future__ import annotations

import re
from dataclasses import replace

import sympy as sp

from galinear.symbolic.lowering import MAX_G_ORDER, Lowered

__all__ = ["TARGETS", "emit", "series_coefficients", "SERIES_TERMS"]

TARGETS = ("numba", "numpy", "torch", "c", "triton")
SERIES_TERMS = 14


def series_coefficients(m: int, terms: int = SERIES_TERMS) -> list:
    """Taylor coefficients of :math:`G_m` at 0: :math:`(j+m)!/(j!(2j+2m)!)`."""
    return [sp.factorial(j + m) / (sp.factorial(j) * sp.factorial(2 * j + 2 * m)) for j in range(terms)]


def _float(value) -> str:
    return repr(float(value))


# ---------------------------------------------------------------------------- expressions
class _Printer:
    """Prints +, *, integer powers, symbols and numbers; ``number(c)`` gives a constant's token."""

    def __init__(self, number):
        self.number = number

    def __call__(self, expr) -> str:
        return self.p(sp.sympify(expr))

    def p(self, e) -> str:
        if e.is_Symbol:
            return str(e)
        if e.is_Number:
            return self.number(e)
        if e.is_Add:
            terms = list(e.args)
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


def _numbers(program: Lowered) -> list:
    """Every non-integer constant and every integer other than +-1 (numba reads them typed)."""
    found = set()
    exprs = [s.expr for s in program.statements] + [sp.sympify(e) for _, es in program.outputs for e in es]
    for e in exprs:
        for atom in e.atoms(sp.Number):
            a = abs(atom)
            if a != 1 and a != 0:
                found.add(a)
    return sorted(found, key=lambda c: (float(c), str(c)))


def _typed_constant(c, idx: dict) -> str:
    """A constant read from the typed constants array (numba, triton)."""
    if c == 0:
        return "_zero"
    if abs(c) == 1:
        return "_one" if c > 0 else "(-_one)"
    return ("-" if c < 0 else "") + f"_k{idx[abs(c)]}"


def _g_orders(program: Lowered) -> list[int]:
    return sorted({s.order for s in program.statements if s.kind == "g"})


def _guards(program: Lowered) -> list:
    return [s for s in program.statements if s.kind in ("recip", "sqrt")]


def _describe_guard(step) -> str:
    if step.kind == "recip":
        return f"{step.what or 'a division'}: the denominator is 0"
    return f"{step.what or 'sqrt()'}: the argument is negative"


def guard_messages(program: Lowered) -> list[str]:
    """Message of each guard, in the order of the status codes (code = 1 + index)."""
    return [_describe_guard(s) for s in _guards(program)]


# ---------------------------------------------------------------------------- G_m helpers
def _g_scalar_lines(m: int, lang: str) -> list[str]:
    """Scalar code of G_m for numba and C (if/else)."""
    coeffs = [_float(c) for c in series_coefficients(m)]
    if lang == "numba":
        horner = coeffs[-1]
        for c in reversed(coeffs[:-1]):
            horner = f"{c} + lam * ({horner})"
        lines = ["@jit(inline='always', error_model='numpy')", f"def _gfun{m}(lam):", "    if abs(lam) < 1.0:",
                 f"        return {horner}", "    if lam > 0:", "        r = math.sqrt(lam)",
                 "        g0 = math.cosh(r)", "        g1 = math.sinh(r) / (2.0 * r)", "    else:",
                 "        r = math.sqrt(-lam)", "        g0 = math.cos(r)", "        g1 = math.sin(r) / (2.0 * r)"]
        prev, cur = "g0", "g1"
        if m == 0:
            lines.append("    return g0")
            return lines
        for k in range(1, m):
            lines.append(f"    g{k + 1} = (g{k - 1} - {4 * k - 2}.0 * g{k}) / (4.0 * lam)")
        lines.append(f"    return g{m}")
        return lines
    # C: one function per precision is not needed: the double version serves both
    horner = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        horner = f"{c} + lam * ({horner})"
    lines = [f"static double galinear_gfun{m}(double lam) {{", "    double r, g0, g1;",
             f"    if (fabs(lam) < 1.0) return {horner};",
             "    if (lam > 0) { r = sqrt(lam); g0 = cosh(r); g1 = sinh(r) / (2.0 * r); }",
             "    else { r = sqrt(-lam); g0 = cos(r); g1 = sin(r) / (2.0 * r); }"]
    if m == 0:
        lines.append("    (void)g1; return g0;")
    elif m == 1:
        lines.append("    (void)g0; return g1;")
    else:
        for k in range(1, m):
            lines.append(f"    double g{k + 1} = (g{k - 1} - {4 * k - 2}.0 * g{k}) / (4.0 * lam);")
        lines.append(f"    return g{m};")
    lines.append("}")
    return lines


def _g_array_lines(m: int, lang: str) -> list[str]:
    """Array code of G_m for numpy, torch and triton (both branches, then where)."""
    coeffs = [_float(c) for c in series_coefficients(m)]
    ns = {"numpy": dict(where="np.where", sqrt="np.sqrt", cos="np.cos", sin="np.sin", abs="np.abs",
                        exp="np.exp", deco=None),
          "torch": dict(where="torch.where", sqrt="torch.sqrt", cos="torch.cos", sin="torch.sin",
                        abs="torch.abs", exp="torch.exp", deco=None),
          "triton": dict(where="tl.where", sqrt="tl.sqrt", cos="tl.cos", sin="tl.sin", abs="tl.abs",
                         exp="tl.exp", deco="@triton.jit")}[lang]
    w, sq = ns["where"], ns["sqrt"]
    horner = coeffs[-1]
    for c in reversed(coeffs[:-1]):
        horner = f"{c} + ls * ({horner})"
    lines = [ns["deco"]] if ns["deco"] else []
    lines += [f"def _gfun{m}(lam):",
              f"    small = {ns['abs']}(lam) < 1.0",
              f"    ls = {w}(small, lam, lam * 0.0)",
              f"    lb = {w}(small, lam * 0.0 + 2.0, lam)",
              "    pos = lb > 0",
              f"    rp = {sq}({w}(pos, lb, lb * 0.0 + 1.0))",
              f"    rn = {sq}({w}(pos, lb * 0.0 + 1.0, -lb))",
              f"    ep = {ns['exp']}(rp)",
              f"    em = {ns['exp']}(-rp)",
              f"    g0 = {w}(pos, 0.5 * (ep + em), {ns['cos']}(rn))",
              f"    g1 = {w}(pos, 0.25 * (ep - em) / rp, 0.5 * {ns['sin']}(rn) / rn)"]
    for k in range(1, m):
        lines.append(f"    g{k + 1} = (g{k - 1} - {4 * k - 2}.0 * g{k}) / (4.0 * lb)")
    lines.append(f"    series = {horner}")
    lines.append(f"    return {w}(small, series, g{m})")
    return lines


# ---------------------------------------------------------------------------- statements
def _scalar_statement(step, pr, lang: str, status: str) -> list[str]:
    """Lines of one statement in scalar code (numba rows, C rows)."""
    s, arg = str(step.symbol), pr(step.expr)
    decl = "real " if lang == "c" else ""
    end = ";" if lang == "c" else ""
    if step.kind == "let":
        return [f"{decl}{s} = {arg}{end}"]
    if step.kind == "recip":
        one = "(real)1" if lang == "c" else "_one"
        return [f"{decl}{s} = {one} / {arg}{end}"]
    if step.kind == "sqrt":
        fn = "sqrt" if lang == "c" else "math.sqrt"
        cast = "(real)" if lang == "c" else ""
        zero = "(real)0" if lang == "c" else "_zero"
        return [f"{decl}{s} = {cast}{fn}({arg} > {zero} ? {arg} : {zero}){end}" if lang == "c"
                else f"{s} = math.sqrt({arg}) if {arg} > _zero else {arg} - {arg}"]  # nan stays nan
    if step.kind == "abs":
        return [f"{decl}{s} = (real)fabs({arg}){end}" if lang == "c" else f"{s} = abs({arg})"]
    if step.kind == "sign":
        if lang == "c":
            return [f"{decl}{s} = (real)(({arg} > 0) - ({arg} < 0)){end}"]
        return [f"{s} = _one if {arg} > _zero else (-_one if {arg} < _zero else _zero)"]
    if step.kind == "g":
        if lang == "c":
            return [f"{decl}{s} = (real)galinear_gfun{step.order}((double)({arg})){end}"]
        return [f"{s} = _gfun{step.order}({arg})"]
    raise ValueError(f"unknown step kind {step.kind!r}")


def _guard_check(step, index: int, pr, lang: str) -> str:
    arg = pr(step.expr)
    cond = f"{arg} == 0" if step.kind == "recip" else f"{arg} < 0"
    if lang == "c":
        return f"if ({cond}) {{ bad = {index + 1}; }}"
    return f"if {cond}: bad = {index + 1}"


# ---------------------------------------------------------------------------- numba
def _numba(program: Lowered, name: str, header: str) -> str:
    numbers = _numbers(program)
    idx = {c: i for i, c in enumerate(numbers)}
    pr = _Printer(lambda c: _typed_constant(c, idx))
    ins = [n for n, _ in program.inputs]
    outs = [n for n, _ in program.outputs]
    guards = _guards(program)
    gindex = {id(s): i for i, s in enumerate(guards)}
    lines = [header, "import math", "", "import numpy as np", "", "from galinear._numba import jit, prange", "", ""]
    for m in _g_orders(program):
        lines += _g_scalar_lines(m, "numba") + ["", ""]
    for variant, loop, opts in (("serial", "range", "error_model='numpy'"),
                                ("parallel", "prange", "parallel=True, error_model='numpy'")):
        lines.append(f"@jit({opts})")
        lines.append(f"def kernel_{variant}({', '.join(ins)}, consts, {', '.join(outs)}, status):")
        lines.append(f"    nrows = {outs[0]}.shape[0]")
        lines.append(f"    _one = consts[0]")
        lines.append(f"    _zero = consts[0] - consts[0]")
        for c, i in idx.items():
            lines.append(f"    _k{i} = consts[{i + 1}]")
        lines.append("    finite = _zero")
        lines.append(f"    for row in {loop}(nrows):")
        if guards:
            lines.append("        bad = 0")
        for n_, syms in program.inputs:
            for col, s in enumerate(syms):
                lines.append(f"        {s} = {n_}[row, {col}]")
        for step in program.statements:
            if id(step) in gindex:
                lines.append(f"        {_guard_check(step, gindex[id(step)], pr, 'numba')}")
            for ln in _scalar_statement(step, pr, "numba", "status"):
                lines.append(f"        {ln}")
        lines.append("        _rowcheck = _zero")
        for n_, exprs in program.outputs:
            for col, e in enumerate(exprs):
                lines.append(f"        _v = {pr(e) if e != 0 else '_zero'}")
                lines.append(f"        {n_}[row, {col}] = _v")
                lines.append("        _rowcheck = _rowcheck + (_v - _v)")
        lines.append("        finite += _rowcheck")  # one reduction statement per row (prange)
        if guards:
            lines.append("        status[row] = bad")
        lines.append("    return finite")
        lines += ["", ""]
    lines.append(f"CONSTANTS = ({', '.join(['1.0'] + [_float(c) for c in numbers])},)")
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- numpy / torch
def _array(program: Lowered, name: str, header: str, lang: str) -> str:
    pr = _Printer(lambda c: _float(c) if not c.is_Integer else f"{int(c)}.0")
    ins = [n for n, _ in program.inputs]
    guards = _guards(program)
    gindex = {id(s): i for i, s in enumerate(guards)}
    if lang == "numpy":
        lines = [header, "import numpy as np", "", ""]
        where, sqrt, absf, sign, zeros = "np.where", "np.sqrt", "np.abs", "np.sign", "np.zeros_like"
    else:
        lines = [header, "import torch", "", ""]
        where, sqrt, absf, sign, zeros = "torch.where", "torch.sqrt", "torch.abs", "torch.sign", "torch.zeros_like"
    for m in _g_orders(program):
        lines += _g_array_lines(m, lang) + ["", ""]
    lines.append(f"def kernel({', '.join(ins)}):")
    lines.append('    """Arrays (..., k) in, (outputs, status) out; status is None without guards."""')
    ref = ins[0]
    for n_, syms in program.inputs:
        for col, s in enumerate(syms):
            lines.append(f"    {s} = {n_}[..., {col}]")
    lines.append(f"    _zero = {' + '.join(f'{n}[..., 0] * 0.0' for n in ins)}")
    if guards:
        lines.append("    status = _zero * 0.0")
    for step in program.statements:
        s, arg = str(step.symbol), pr(step.expr)
        if id(step) in gindex:
            code = gindex[id(step)] + 1
            cond = f"({arg} == 0)" if step.kind == "recip" else f"({arg} < 0)"
            lines.append(f"    status = {where}((status == 0) & {cond}, _zero + {code}.0, status)")
        if step.kind == "let":
            lines.append(f"    {s} = {arg}")
        elif step.kind == "recip":
            safe = f"{where}({arg} == 0, _zero + 1.0, {arg})" if lang == "torch" else arg
            if lang == "torch":
                lines.append(f"    {s} = {where}({arg} == 0, _zero + float('inf'), 1.0 / {safe})")
            else:
                lines.append(f"    with np.errstate(divide='ignore', invalid='ignore'):")
                lines.append(f"        {s} = 1.0 / {arg}")
        elif step.kind == "sqrt":
            if lang == "torch":
                lines.append(f"    {s} = {sqrt}(torch.clamp({arg}, min=0.0))")
            else:
                lines.append(f"    {s} = {sqrt}(np.maximum({arg}, 0.0))")
        elif step.kind == "abs":
            lines.append(f"    {s} = {absf}({arg})")
        elif step.kind == "sign":
            lines.append(f"    {s} = {sign}({arg})")
        elif step.kind == "g":  # on the argument's own shape: broadcast only at the outputs
            lines.append(f"    {s} = _gfun{step.order}({arg}{'' if step.expr.free_symbols else ' + _zero'})")
    results = []
    for n_, exprs in program.outputs:
        cols = [f"{pr(e)} + _zero" if e != 0 else "_zero" for e in exprs]
        if lang == "numpy":
            lines.append(f"    {n_} = np.stack(({', '.join(cols)},), axis=-1)")
        else:
            lines.append(f"    {n_} = torch.stack(({', '.join(cols)},), dim=-1)")
        results.append(n_)
    lines.append(f"    return ({', '.join(results)},), {'status' if guards else 'None'}")
    lines.append("")
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- C
def _c(program: Lowered, name: str, header: str) -> tuple[str, str]:
    pr = _Printer(lambda c: f"(real){_float(c)}")
    guards = _guards(program)
    gindex = {id(s): i for i, s in enumerate(guards)}
    ins = [n for n, _ in program.inputs]
    outs = [n for n, _ in program.outputs]
    comment = "/* " + header.strip().strip('"').replace("*/", "* /") + " */"

    def params(real):
        return ", ".join([f"const {real} *{n}" for n in ins] + [f"{real} *{n}" for n in outs]
                         + ["long long nrows", "unsigned char *status"])

    h = [comment, f"#ifndef GALINEAR_{name.upper()}_H", f"#define GALINEAR_{name.upper()}_H", "",
         "/* Row-major arrays (nrows, width); status may be NULL. Returns the number of rows",
         "   that failed a guard (0 when every row is in the domain). */",
         f"int {name}_f64({params('double')});", f"int {name}_f32({params('float')});", "",
         f"#endif", ""]
    src = [comment, "#include <math.h>", f'#include "{name}.h"', ""]
    for m in _g_orders(program):
        src += _g_scalar_lines(m, "c") + [""]
    widths = {n: len(s) for n, s in program.inputs}
    owidths = {n: len(e) for n, e in program.outputs}
    for real, suffix in (("double", "f64"), ("float", "f32")):
        src.append(f"#define real {real}")
        src.append(f"int {name}_{suffix}({params(real)}) {{")
        src.append("    int failures = 0;")
        src.append("    for (long long row = 0; row < nrows; ++row) {")
        src.append("        int bad = 0;")
        for n_, syms in program.inputs:
            for col, s in enumerate(syms):
                src.append(f"        const real {s} = {n_}[row * {widths[n_]} + {col}];")
        for step in program.statements:
            if id(step) in gindex:
                src.append(f"        {_guard_check(step, gindex[id(step)], pr, 'c')}")
            for ln in _scalar_statement(step, pr, "c", "status"):
                src.append(f"        {ln}")
        for n_, exprs in program.outputs:
            for col, e in enumerate(exprs):
                src.append(f"        {n_}[row * {owidths[n_]} + {col}] = {pr(e) if e != 0 else '(real)0'};")
        src.append("        if (status) status[row] = (unsigned char)bad;")
        src.append("        failures += bad != 0;")
        src.append("    }")
        src.append("    return failures;")
        src.append("}")
        src.append("#undef real")
        src.append("")
    return "\n".join(src), "\n".join(h)


# ---------------------------------------------------------------------------- triton
def _triton(program: Lowered, name: str, header: str) -> str:
    numbers = _numbers(program)
    idx = {c: i for i, c in enumerate(numbers)}
    pr = _Printer(lambda c: _typed_constant(c, idx))
    ins = [n for n, _ in program.inputs]
    outs = [n for n, _ in program.outputs]
    widths = {n: len(s) for n, s in program.inputs}
    owidths = {n: len(e) for n, e in program.outputs}
    guards = _guards(program)
    gindex = {id(s): i for i, s in enumerate(guards)}
    lines = [header, "import torch", "import triton", "import triton.language as tl", "", ""]
    for m in _g_orders(program):
        lines += _g_array_lines(m, "triton") + ["", ""]
    lines.append("@triton.jit")
    ptrs = [f"{n}_ptr" for n in ins] + ["consts_ptr"] + [f"{n}_ptr" for n in outs] + ["status_ptr"]
    lines.append(f"def _kernel({', '.join(ptrs)}, nrows, BLOCK: tl.constexpr):")
    lines.append("    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)")
    lines.append("    mask = rows < nrows")
    lines.append("    _one = tl.load(consts_ptr)")
    lines.append("    _zero = _one - _one")
    for c, i in idx.items():
        lines.append(f"    _k{i} = tl.load(consts_ptr + {i + 1})")
    for n_, syms in program.inputs:
        for col, s in enumerate(syms):
            lines.append(f"    {s} = tl.load({n_}_ptr + rows * {widths[n_]} + {col}, mask=mask, other=0.0)")
    lines.append("    bad = rows * 0")
    for step in program.statements:
        s, arg = str(step.symbol), pr(step.expr)
        if id(step) in gindex:
            code = gindex[id(step)] + 1
            cond = f"({arg} == 0)" if step.kind == "recip" else f"({arg} < 0)"
            lines.append(f"    bad = tl.where((bad == 0) & {cond} & mask, {code}, bad)")
        if step.kind == "let":
            lines.append(f"    {s} = {arg}")
        elif step.kind == "recip":
            lines.append(f"    {s} = _one / {arg}")
        elif step.kind == "sqrt":
            lines.append(f"    {s} = tl.sqrt(tl.maximum({arg}, _zero))")
        elif step.kind == "abs":
            lines.append(f"    {s} = tl.abs({arg})")
        elif step.kind == "sign":
            lines.append(f"    {s} = tl.where({arg} > 0, _one, tl.where({arg} < 0, -_one, _zero))")
        elif step.kind == "g":
            lines.append(f"    {s} = _gfun{step.order}({arg} + _zero)")
    for n_, exprs in program.outputs:
        for col, e in enumerate(exprs):
            lines.append(f"    tl.store({n_}_ptr + rows * {owidths[n_]} + {col}, "
                         f"{pr(e) if e != 0 else '_zero'} + _zero, mask=mask)")
    lines.append("    tl.store(status_ptr + rows, bad.to(tl.uint8), mask=mask)")
    lines += ["", ""]
    lines.append(f"CONSTANTS = ({', '.join(['1.0'] + [_float(c) for c in numbers])},)")
    lines.append(f"WIDTHS = {tuple(widths[n] for n in ins)!r}")
    lines.append(f"OUT_WIDTHS = {tuple(owidths[n] for n in outs)!r}")
    lines.append(f"GUARDS = {tuple(guard_messages(program))!r}")
    lines.append("BLOCK = 256")
    lines.append("")
    lines.append("")
    lines.append(f"def kernel({', '.join(ins)}):")
    lines.append('    """Contiguous tensors (N, k) on one device in, (outputs, status) out."""')
    lines.append(f"    ref = {ins[0]}")
    lines.append("    nrows = ref.shape[0]")
    lines.append("    consts = torch.tensor(CONSTANTS, dtype=ref.dtype, device=ref.device)")
    lines.append("    outs = tuple(torch.empty((nrows, w), dtype=ref.dtype, device=ref.device) for w in OUT_WIDTHS)")
    lines.append("    status = torch.zeros(nrows, dtype=torch.uint8, device=ref.device)")
    lines.append("    grid = (triton.cdiv(max(nrows, 1), BLOCK),)")
    lines.append(f"    _kernel[grid]({', '.join(ins)}, consts, *outs, status, nrows, BLOCK=BLOCK)")
    lines.append("    return outs, status")
    lines.append("")
    return "\n".join(lines)


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
def emit(program: Lowered, target: str, name: str = "kernel", header: str = ""):
    """Source of ``program`` for ``target``: a str, or ``(c_source, c_header)`` for ``"c"``."""
    if target not in TARGETS:
        raise ValueError(f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if any(s.kind == "g" and s.order > MAX_G_ORDER for s in program.statements):
        raise ValueError(f"the kernels evaluate G_0 .. G_{MAX_G_ORDER}")
    if not name.isidentifier():
        raise ValueError(f"kernel name {name!r} must be an identifier")
    header = header or f'"""Generated by galinear.compile ({target}). Do not edit by hand."""\n'
    program = private_names(program)
    if target == "numba":
        return _numba(program, name, header)
    if target in ("numpy", "torch"):
        return _array(program, name, header, target)
    if target == "c":
        return _c(program, name, header)
    return _triton(program, name, header)
