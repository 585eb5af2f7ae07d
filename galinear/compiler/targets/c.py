"""The C target: C99 ``int NAME_f64(...)`` and ``int NAME_f32(...)`` plus a header.

Both functions take row-major arrays ``(nrows, width)`` and a status array (may be NULL) and
return the number of rows that failed a guard. The source is compiled with the system ``cc``
(or ``$CC``) into a shared library in galinear's private cache and called through ctypes.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess

import numpy as np

from galinear._numba import file_stem, generated_folder
from galinear.compiler.targets._runtime import ArrayLoaded
from galinear.symbolic.emit import (
    ExpressionPrinter,
    Sources,
    g_orders,
    guard_condition,
    horner,
    number_text,
    statement_lines,
)

__all__ = ["NAME", "FILE_SUFFIX", "AUTOGRAD", "print_program", "Loaded", "Rules", "g_function_lines"]

NAME = "c"
FILE_SUFFIX = ".c"
AUTOGRAD = None


class Rules:
    """One row's statements in C: declarations of ``real`` (double or float, by the function)."""

    @staticmethod
    def guard(step, arg, code):
        return [f"if ({guard_condition(step, arg)}) {{ bad = {code}; }}"]

    @staticmethod
    def let(s, arg, step):
        return [f"real {s} = {arg};"]

    @staticmethod
    def recip(s, arg, step):
        return [f"real {s} = (real)1 / {arg};"]

    @staticmethod
    def sqrt(s, arg, step):
        return [f"real {s} = (real)sqrt({arg} > (real)0 ? {arg} : (real)0);"]

    @staticmethod
    def abs(s, arg, step):
        return [f"real {s} = (real)fabs({arg});"]

    @staticmethod
    def sign(s, arg, step):
        return [f"real {s} = (real)(({arg} > 0) - ({arg} < 0));"]

    @staticmethod
    def g(s, arg, step):
        return [f"real {s} = (real)galinear_gfun{step.order}((double)({arg}));"]


def g_function_lines(m: int) -> list[str]:
    """C code of G_m in double precision (it serves both precisions)."""
    lines = [f"static double galinear_gfun{m}(double lam) {{", "    double r, g0, g1;",
             f"    if (fabs(lam) < 1.0) return {horner(m, 'lam')};",
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


def print_program(program, name: str, header: str) -> Sources:
    pr = ExpressionPrinter(lambda c: f"(real){number_text(c)}")
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
         "#endif", ""]
    src = [comment, "#include <math.h>", f'#include "{name}.h"', ""]
    for m in g_orders(program):
        src += g_function_lines(m) + [""]
    widths = {n: len(s) for n, s in program.inputs}
    owidths = {n: len(e) for n, e in program.outputs}
    body = statement_lines(program, pr, Rules)
    for real, suffix in (("double", "f64"), ("float", "f32")):
        src.append(f"#define real {real}")
        src.append(f"int {name}_{suffix}({params(real)}) {{")
        src.append("    int failures = 0;")
        src.append("    for (long long row = 0; row < nrows; ++row) {")
        src.append("        int bad = 0;")
        for n_, syms in program.inputs:
            for col, s in enumerate(syms):
                src.append(f"        const real {s} = {n_}[row * {widths[n_]} + {col}];")
        src += [f"        {ln}" for ln in body]
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
    return Sources("\n".join(src), "\n".join(h))


def compile_library(source: str, header: str, name: str) -> ctypes.CDLL:
    """The shared library of ``source``, built once with the system C compiler into the folder of
    the generated files of kind ``compiled`` (``c_<digest>``, named by the SHA-256 of the source and
    the header as every generated file is: :func:`galinear._numba.file_stem`)."""
    folder = generated_folder("compiled") / file_stem("c", header + "\n" + source)
    lib = folder / f"lib{name}.so"
    if not lib.exists():
        compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
        if not compiler:
            raise RuntimeError("the C target needs a C compiler: install one (apt install gcc) or set CC")
        from galinear._io import atomic_write_text

        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        atomic_write_text(str(folder / f"{name}.c"), source)
        atomic_write_text(str(folder / f"{name}.h"), header)
        tmp = folder / f".lib{name}.{os.getpid()}.so"
        result = subprocess.run([compiler, "-O2", "-std=c99", "-shared", "-fPIC", "-o", str(tmp),
                                 str(folder / f"{name}.c"), "-lm"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{compiler} could not compile the generated C kernel:\n{result.stderr}")
        os.replace(tmp, lib)
    return ctypes.CDLL(str(lib))


class Loaded(ArrayLoaded):
    TARGET = NAME
    PYTHON_MODULE = False

    def __init__(self, sources, name, guards, widths, out_widths, multiplications=0):
        super().__init__(sources, name, guards, widths, out_widths, multiplications)
        lib = compile_library(sources.text, sources.header, name)
        self.functions = {}
        for dtype, suffix, ctype in ((np.float64, "f64", ctypes.c_double), (np.float32, "f32", ctypes.c_float)):
            fn = getattr(lib, f"{name}_{suffix}")
            ptr = ctypes.POINTER(ctype)
            fn.argtypes = ([ptr] * (len(widths) + len(out_widths)) + [ctypes.c_longlong,
                                                                       ctypes.POINTER(ctypes.c_uint8)])
            fn.restype = ctypes.c_int
            self.functions[np.dtype(dtype)] = (fn, ptr)

    def run_arrays(self, arrays, names, out, parallel):
        return self.run_rows(arrays, names, out, parallel)

    def run_flat(self, flat, names, outs, status, dtype, parallel):
        self.check_finite(names, flat)
        fn, ptr = self.functions[np.dtype(dtype)]
        fn(*[a.ctypes.data_as(ptr) for a in flat], *[o.ctypes.data_as(ptr) for o in outs], flat[0].shape[0],
           None if status is None else status.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)))
