r"""Products that cost what the grades of their operands need.

A *grade pattern* is an int whose bit g is set when grade g may be present (``0b10`` is a
vector, ``0b10101`` an even multivector of Cl(4)); ``None`` means "any grade". For a product of
two patterns only the terms :math:`e_A \circ e_B` with :math:`|A|` in the first pattern and
:math:`|B|` in the second are kept (the blade tables of :mod:`galinear.core.products`), so a
vector times a vector in Cl(10) runs :math:`n^2 = 100` terms instead of :math:`4^{10}`.

Each (metric, product kind, pattern of a, pattern of b) gets its own numba kernel, straight-line
code from the kept terms (one sum per output blade) printed by the printer of every generated numba
module (:func:`galinear.symbolic.numba_source.print_strided`, after the compiler's CSE,
:func:`galinear.symbolic.lowering.straight_line`) into a file under the numba cache folder, and
compiled on first call with ``cache=True``: nothing compiles at import. The file is the
generated module of the kernel's key (layout, metric, kind, patterns and the generator's version,
:func:`generator_version`), ``galinear_graded/graded_<digest>.py`` in the numba cache folder,
named and checked as every generated module is (:func:`galinear._numba.load_generated`: only from
a cache folder no other user can write, its first line naming the key and the SHA-256 of the rest,
compiled from the file's checked text, never from a ``.pyc``), so a process that finds it loads it
without building its source or importing sympy, and numba loads the machine code from its disk
cache. Only a missing kernel is printed, with sympy. Term lists longer than
:data:`STRAIGHT_LINE_MAX_TERMS` use the index-list kernel :func:`galinear.core.products.table_product`
on the kept terms instead (long straight-line code compiles slowly).

The sandwich :math:`R\, x\, \tilde R` gets a fused kernel: :math:`t = R x` and :math:`t \tilde R`
are computed in registers, and only the output blades whose polynomial in the coefficients of
R and x is not identically zero (found by expanding it with integer coefficients) are written.

:func:`product_packed` takes and returns *packed* arrays, the coefficients of the pattern's
blades only (:func:`blades_of`); :class:`~galinear.core.algebra.MultiVector` keeps tracked
results packed, so memory traffic follows the grades as the multiply-adds do.
"""
from __future__ import annotations

import hashlib
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np

from galinear import blades
from galinear._numba import readonly
from galinear.core import products

__all__ = [
    "ALL",
    "mask_of",
    "grades_of",
    "product_pattern",
    "product",
    "sandwich",
    "sandwich_pattern",
    "blades_of",
    "pack",
    "unpack",
    "product_packed",
    "STRAIGHT_LINE_MAX_TERMS",
    "GENERATOR_VERSION",
    "generator_version",
]

#: Largest number of kept terms written as straight-line code; longer lists use index lists.
STRAIGHT_LINE_MAX_TERMS = 2048
#: Part of every kernel's key, with the text of the generator's files (:func:`generator_version`):
#: raise it when the printed kernels change in a way those files do not show.
GENERATOR_VERSION = 2
#: The files whose text decides what a kernel's source is (relative to the galinear package).
_GENERATOR_FILES = ("core/graded.py", "symbolic/numba_source.py", "symbolic/emit.py", "symbolic/lowering.py")


def ALL(n: int) -> int:
    """The pattern with every grade 0..n."""
    return (1 << (n + 1)) - 1


def mask_of(grades) -> int:
    """Pattern of an iterable of grades: ``mask_of((0, 2)) == 0b101``."""
    out = 0
    for g in grades:
        out |= 1 << int(g)
    return out


def grades_of(pattern: int) -> tuple[int, ...]:
    """The grades of a pattern, ascending."""
    return tuple(g for g in range(pattern.bit_length()) if pattern >> g & 1)


@lru_cache(maxsize=4096)
def product_pattern(n: int, kind: str, pa: int, pb: int) -> int:
    """Grades a product of grade patterns can have (the grade rules of each product)."""
    out = 0
    for r in grades_of(pa):
        for s in grades_of(pb):
            if kind == "gp":
                out |= mask_of(range(abs(r - s), min(r + s, 2 * n - r - s) + 1, 2))
            elif kind == "op" and r + s <= n:
                out |= 1 << (r + s)
            elif kind == "lc" and s >= r:
                out |= 1 << (s - r)
            elif kind == "rc" and r >= s:
                out |= 1 << (r - s)
    return out


@lru_cache(maxsize=1024)
def _kept_terms(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    """(i, j, k, sign) int arrays of the product's terms with grade(i) in pa and grade(j) in pb."""
    ti, tj, tk, ts = products.product_triples(metric, kind, np.float64)
    grades = blades.blade_grades(len(metric))
    keep = ((pa >> grades[ti]) & 1).astype(bool) & ((pb >> grades[tj]) & 1).astype(bool)
    out = ti[keep], tj[keep], tk[keep], ts[keep].astype(np.int64)
    for arr in out:
        arr.setflags(write=False)  # cached: shared by every caller, and read-only as kernel input
    return out


@lru_cache(maxsize=1)
def generator_version() -> str:
    """SHA-256 of :data:`GENERATOR_VERSION` and the text of the files that print the kernels: a new
    generator never loads a kernel an older one wrote (read once per process; no sympy)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256(f"graded kernels {GENERATOR_VERSION}".encode())
    for name in _GENERATOR_FILES:
        try:
            digest.update((root / name).read_bytes())
        except OSError:  # no source files (a frozen install): the version number alone
            digest.update(name.encode())
    return digest.hexdigest()


def _load(key: tuple, build):
    """The kernel of ``key`` (layout, metric, kind, patterns): the generated module of that key
    (:func:`galinear._numba.load_generated`, kind ``graded``) from the cache folder when it is
    there and checks, else ``build(key text)``'s source written there and loaded."""
    from galinear._numba import load_generated

    text = repr(key + (generator_version(),))
    return load_generated("graded", text, lambda: build(text)).kernel


def _print(key_text: str, lets, outputs, at_a=None, at_b=None) -> str:
    """Kernel source through the shared pipeline (imports sympy: only when a kernel is missing).

    ``lets``: [(m, [(sign, i, j), ...])] for ``t_m = sum sign * a_i * b_j``; ``outputs``:
    [(column, [(sign, ("a" | "t", index), l_or_j), ...])]: a sum of ``a_i * b_j`` or ``t_m * a_l``
    terms (an empty list writes 0.0). ``at_a`` / ``at_b`` map a blade index to its column."""
    import sympy as sp

    from galinear.symbolic.emit import ExpressionPrinter
    from galinear.symbolic.lowering import straight_line
    from galinear.symbolic.numba_source import print_strided

    symbols = {}

    def sym(prefix, index):
        key = (prefix, index)
        if key not in symbols:
            symbols[key] = sp.Symbol(f"{prefix}{index}")
        return symbols[key]

    def total(terms):
        return sp.Add(*[sign * sym(*left) * sym(*right) for sign, left, right in terms])

    assignments = [(sym("t", m), total([(s, ("a", i), ("b", j)) for s, i, j in terms])) for m, terms in lets]
    exprs = [total(terms) for _, terms in outputs]
    loads = {name: sorted(i for p, i in symbols if p == name) for name in ("a", "b")}
    inputs = tuple((name, tuple(sym(name, i) for i in loads[name])) for name in ("a", "b"))
    at_a, at_b = at_a or {}, at_b or {}
    columns = {"a": [at_a.get(i, i) for i in loads["a"]], "b": [at_b.get(j, j) for j in loads["b"]],
               "out": [column for column, _ in outputs]}
    program = straight_line(inputs, assignments, exprs)
    header = ("# Written by galinear.core.graded from the blade tables (galinear.symbolic.numba_source);\n"
              f"# key: {key_text}\n")
    return print_strided(program, header, ExpressionPrinter(lambda c: str(int(c)), ordered=True), columns)


def _product_terms(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    """{output blade: [(sign, ("a", i), ("b", j)), ...]}, or None when the kept terms are too many
    for straight-line code."""
    ti, tj, tk, ts = _kept_terms(metric, kind, pa, pb)
    if ti.size > STRAIGHT_LINE_MAX_TERMS:
        return None
    by_output = defaultdict(list)
    for i, j, k, s in zip(ti.tolist(), tj.tolist(), tk.tolist(), ts.tolist()):
        by_output[k].append((s, ("a", i), ("b", j)))
    return dict(sorted(by_output.items()))


@lru_cache(maxsize=1024)
def _product_kernel(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    if _kept_terms(metric, kind, pa, pb)[0].size > STRAIGHT_LINE_MAX_TERMS:
        return None
    return _load(("dense", metric, kind, pa, pb),
                 lambda key: _print(key, [], list(_product_terms(metric, kind, pa, pb).items())))


def _rows(a: np.ndarray, b: np.ndarray):
    """a, b as read-only C-contiguous (rows, columns) arrays with row strides 0 or 1 when one side
    is a single multivector; else both broadcast and materialised. Returns (a2, sa, b2, sb, batch
    shape). Always read-only, so that a kernel compiles once per dtype
    (:func:`galinear._numba.readonly`)."""
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    rows = int(np.prod(shape, dtype=np.int64))
    pieces = []
    for x in (a, b):
        dim = x.shape[-1]
        if x.shape[:-1] == shape:
            pieces += [readonly(np.ascontiguousarray(x).reshape(rows, dim)), 1]
        elif x.size == dim:
            pieces += [readonly(np.ascontiguousarray(x).reshape(1, dim)), 0]
        else:
            full = np.ascontiguousarray(np.broadcast_to(x, shape + (dim,)))
            pieces += [readonly(full.reshape(rows, dim)), 1]
    return (*pieces, shape)


def _check(finite: bool, a, b) -> None:
    if not finite:
        from galinear.core.checks import _check_finite

        _check_finite(a, "a")
        _check_finite(b, "b")


def product(alg, kind: str, a: np.ndarray, pa: int | None, b: np.ndarray, pb: int | None):
    """``kind`` product of arrays a, b (..., 2**n) whose grades lie in the patterns pa, pb.

    Returns ``(values, pattern)``. Coefficients of a and b outside their patterns are ignored
    (they must be zero for the result to be the full product). Falls back to the dense kernels
    of ``alg`` when both patterns are full or n > 10.
    """
    n = alg.n
    full = ALL(n)
    pa = full if pa is None else pa & full
    pb = full if pb is None else pb & full
    out_pattern = product_pattern(n, kind, pa, pb)
    if (pa == full and pb == full) or n > products.TABLE_MAX_N:
        return getattr(alg, kind)(a, b), out_pattern
    dtype = np.result_type(a.dtype, b.dtype)
    a = a.astype(dtype, copy=False)
    b = b.astype(dtype, copy=False)
    a2, sa, b2, sb, shape = _rows(a, b)
    out = np.zeros((a2.shape[0] if sa else b2.shape[0], alg.dim), dtype=dtype)
    if out.shape[0] and out_pattern:
        kernel = _product_kernel(alg.metric, kind, pa, pb)
        if kernel is not None:
            _check(kernel(a2, b2, out, sa, sb), a2, b2)
        else:
            ti, tj, tk, ts = _kept_terms(alg.metric, kind, pa, pb)
            a2 = readonly(np.ascontiguousarray(np.broadcast_to(a2, out.shape)))
            b2 = readonly(np.ascontiguousarray(np.broadcast_to(b2, out.shape)))
            ts = readonly(ts.astype(dtype))
            _check(products.table_product(a2, b2, out, ti, tj, tk, ts, products.chunk_rows()), a2, b2)
    return out.reshape(shape + (alg.dim,)), out_pattern


@lru_cache(maxsize=256)
def _sandwich_terms(metric: tuple[int, ...], pr: int, px: int):
    """Terms of t = R x and of out = t ~R, and the outputs whose polynomial is not identically zero."""
    ti, tj, tk, ts = _kept_terms(metric, "gp", pr, px)
    t_pattern = product_pattern(len(metric), "gp", pr, px)
    ui, uj, uk, us = _kept_terms(metric, "gp", t_pattern, pr)
    grades = blades.blade_grades(len(metric))
    rev = np.where((grades * (grades - 1) // 2) % 2 == 0, 1, -1)
    first = defaultdict(list)  # t_m -> [(sign, i, j)]
    for i, j, m, s in zip(ti.tolist(), tj.tolist(), tk.tolist(), ts.tolist()):
        first[m].append((s, i, j))
    second = defaultdict(list)  # out_k -> [(sign, m, l)] with the reverse sign of R_l folded in
    for m, l, k, s in zip(ui.tolist(), uj.tolist(), uk.tolist(), us.tolist()):
        if m in first:
            second[k].append((s * int(rev[l]), m, l))
    alive = []
    for k, terms in sorted(second.items()):
        poly = defaultdict(int)  # (j, i, l) with i <= l -> integer coefficient
        for s2, m, l in terms:
            for s1, i, j in first[m]:
                poly[(j, min(i, l), max(i, l))] += s1 * s2
        if any(poly.values()):
            alive.append(k)
    return first, {k: second[k] for k in alive}


def sandwich_pattern(n: int, metric: tuple[int, ...], pr: int, px: int) -> int:
    """Grades of :math:`R x \\tilde R` that are not identically zero for patterns pr, px."""
    if n > products.TABLE_MAX_N:
        return ALL(n)
    _, second = _sandwich_terms(metric, pr, px)
    return mask_of(int(blades.blade_grades(n)[k]) for k in second)


def _sandwich_too_long(first, second) -> bool:
    used_m = {m for terms in second.values() for _, m, _ in terms}
    return sum(len(first[m]) for m in used_m) + sum(len(t) for t in second.values()) > STRAIGHT_LINE_MAX_TERMS


def _sandwich_lets(first, second):
    """[(m, [(sign, i, j)])] for the t_m the outputs read, and {k: [(sign, ("t", m), ("a", l))]}."""
    used_m = sorted({m for terms in second.values() for _, m, _ in terms})
    sums = {k: [(s, ("t", m), ("a", l)) for s, m, l in terms] for k, terms in sorted(second.items())}
    return [(m, first[m]) for m in used_m], sums


@lru_cache(maxsize=256)
def _sandwich_kernel(metric: tuple[int, ...], pr: int, px: int):
    first, second = _sandwich_terms(metric, pr, px)
    if _sandwich_too_long(first, second):
        return None

    def build(key):
        lets, sums = _sandwich_lets(first, second)
        return _print(key, lets, list(sums.items()))

    return _load(("dense sandwich", metric, pr, px), build)


def sandwich(alg, R: np.ndarray, pr: int | None, x: np.ndarray, px: int | None):
    r""":math:`R\, x\, \tilde R` for arrays with grade patterns; returns ``(values, pattern)``."""
    n = alg.n
    full = ALL(n)
    pr = full if pr is None else pr & full
    px = full if px is None else px & full
    kernel = None if n > products.TABLE_MAX_N or (pr == full and px == full) else _sandwich_kernel(alg.metric, pr, px)
    if kernel is None:
        t, tp = product(alg, "gp", R, pr, x, px)
        return product(alg, "gp", t, tp, alg.reverse(R), pr)
    dtype = np.result_type(R.dtype, x.dtype)
    a2, sa, b2, sb, shape = _rows(R.astype(dtype, copy=False), x.astype(dtype, copy=False))
    out = np.zeros((a2.shape[0] if sa else b2.shape[0], alg.dim), dtype=dtype)
    if out.shape[0]:
        _check(kernel(a2, b2, out, sa, sb), a2, b2)
    return out.reshape(shape + (alg.dim,)), sandwich_pattern(n, alg.metric, pr, px)


# ---------------------------------------------------------------------- packed operands
# A packed multivector holds only the coefficients of the blades of its grade pattern, in blade
# order: an (..., 4) array for a PGA vector instead of (..., 16). Products of packed operands read
# and write those columns only, so memory traffic follows the grades as the multiply-adds do.


@lru_cache(maxsize=1024)
def blades_of(n: int, pattern: int) -> np.ndarray:
    """Indices of the blades whose grade is in ``pattern``, ascending (the packed columns)."""
    out = np.flatnonzero((pattern >> blades.blade_grades(n)) & 1)
    out.setflags(write=False)
    return out


def pack(n: int, values: np.ndarray, pattern: int) -> np.ndarray:
    """The packed columns of dense ``values`` (..., 2**n) for ``pattern``."""
    return np.ascontiguousarray(values[..., blades_of(n, pattern)])


def unpack(n: int, packed: np.ndarray, pattern: int) -> np.ndarray:
    """Dense (..., 2**n) coefficients of a packed array (zero outside ``pattern``)."""
    out = np.zeros(packed.shape[:-1] + (1 << n,), dtype=packed.dtype)
    out[..., blades_of(n, pattern)] = packed
    return out


def _columns(n: int, pattern: int) -> dict:
    return {int(k): c for c, k in enumerate(blades_of(n, pattern).tolist())}


def _packed_writes(n: int, out_pattern: int, sums: dict) -> list:
    """One output per packed column: its sum, or 0.0 for a blade with no term (the output array is
    not zeroed first)."""
    return [(c, sums.get(k, [])) for k, c in _columns(n, out_pattern).items()]


@lru_cache(maxsize=1024)
def _packed_product_kernel(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    n = len(metric)
    if _kept_terms(metric, kind, pa, pb)[0].size > STRAIGHT_LINE_MAX_TERMS:
        return None

    def build(key):
        outputs = _packed_writes(n, product_pattern(n, kind, pa, pb), _product_terms(metric, kind, pa, pb))
        return _print(key, [], outputs, _columns(n, pa), _columns(n, pb))

    return _load(("packed", metric, kind, pa, pb), build)


def _run_packed(kernel, a, b, columns: int):
    dtype = np.result_type(a.dtype, b.dtype)
    a2, sa, b2, sb, shape = _rows(a.astype(dtype, copy=False), b.astype(dtype, copy=False))
    out = np.empty((a2.shape[0] if sa else b2.shape[0], columns), dtype=dtype)
    if out.shape[0] and columns:
        _check(kernel(a2, b2, out, sa, sb), a2, b2)
    return out.reshape(shape + (columns,))


def product_packed(alg, kind: str, a: np.ndarray, pa: int, b: np.ndarray, pb: int):
    """``kind`` product of packed arrays (columns :func:`blades_of` of pa and pb).

    Returns ``(packed values, pattern)``, or None where no straight-line kernel is made (more
    than :data:`STRAIGHT_LINE_MAX_TERMS` terms, or n above the blade tables' limit): the caller
    then takes the dense path.
    """
    if alg.n > products.TABLE_MAX_N:
        return None
    kernel = _packed_product_kernel(alg.metric, kind, pa, pb)
    if kernel is None:
        return None
    pattern = product_pattern(alg.n, kind, pa, pb)
    return _run_packed(kernel, a, b, len(blades_of(alg.n, pattern))), pattern


@lru_cache(maxsize=256)
def _packed_sandwich_kernel(metric: tuple[int, ...], pr: int, px: int):
    n = len(metric)
    first, second = _sandwich_terms(metric, pr, px)
    if _sandwich_too_long(first, second):
        return None

    def build(key):
        lets, sums = _sandwich_lets(first, second)
        outputs = _packed_writes(n, sandwich_pattern(n, metric, pr, px), sums)
        return _print(key, lets, outputs, _columns(n, pr), _columns(n, px))

    return _load(("packed sandwich", metric, pr, px), build)
