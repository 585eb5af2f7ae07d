r"""Products that cost what the grades of their operands need.

A *grade pattern* is an int whose bit g is set when grade g may be present (``0b10`` is a
vector, ``0b10101`` an even multivector of Cl(4)); ``None`` means "any grade". For a product of
two patterns only the terms :math:`e_A \circ e_B` with :math:`|A|` in the first pattern and
:math:`|B|` in the second are kept (the blade tables of :mod:`galinear.core.products`), so a
vector times a vector in Cl(10) runs :math:`n^2 = 100` terms instead of :math:`4^{10}`.

Each (metric, product kind, pattern of a, pattern of b) gets its own numba kernel, written as
straight-line code from the kept terms (one line per output blade) into a file under the numba
cache folder and compiled on first call with ``cache=True``: nothing compiles at import, and a
second process loads the machine code from disk. Term lists longer than :data:`STRAIGHT_LINE_MAX_TERMS`
use the index-list kernel :func:`galinear.core.products.table_product` on the kept terms
instead (long straight-line code compiles slowly).

The sandwich :math:`R\, x\, \tilde R` gets a fused kernel: :math:`t = R x` and :math:`t \tilde R`
are computed in registers, and only the output blades whose polynomial in the coefficients of
R and x is not identically zero (found by expanding it with integer coefficients) are written.
"""
from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from collections import defaultdict
from functools import lru_cache
from pathlib import Path

import numpy as np

from galinear import blades
from galinear.core import products

__all__ = [
    "ALL",
    "mask_of",
    "grades_of",
    "product_pattern",
    "product",
    "sandwich",
    "sandwich_pattern",
    "STRAIGHT_LINE_MAX_TERMS",
]

#: Largest number of kept terms written as straight-line code; longer lists use index lists.
STRAIGHT_LINE_MAX_TERMS = 2048


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
    return ti[keep], tj[keep], tk[keep], ts[keep].astype(np.int64)


def _cache_folder() -> Path:
    folder = Path(os.environ["NUMBA_CACHE_DIR"]) / "galinear_graded"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _signed_sum(terms) -> str:
    """``a1*b2 - a2*b1`` from [(sign, text), ...] with integer signs."""
    out = ""
    for sign, text in terms:
        coefficient = abs(int(sign))
        body = text if coefficient == 1 else f"{coefficient}*{text}"
        if not out:
            out = body if sign > 0 else f"-{body}"
        else:
            out += f" + {body}" if sign > 0 else f" - {body}"
    return out


def _module_source(loads_a, loads_b, lines, tail="") -> str:
    load = [f"        a{i} = a[ra, {i}]" for i in loads_a] + [f"        b{j} = b[rb, {j}]" for j in loads_b]
    probe = " + ".join([f"a{i}" for i in loads_a] + [f"b{j}" for j in loads_b]) or "0.0"
    body = "\n".join(load + [f"        probe += ({probe}) * 0.0"] + lines)
    return (
        "# Written by galinear.core.graded from the blade tables; regenerated when missing.\n"
        "import numpy as np\n\nfrom galinear._numba import jit\n\n\n"
        "@jit\n"
        "def kernel(a, b, out, sa, sb):  # pragma: no cover - compiled\n"
        "    probe = 0.0\n"
        "    for r in range(out.shape[0]):\n"
        "        ra = r * sa\n"
        "        rb = r * sb\n"
        f"{body}\n{tail}"
        "    return np.isfinite(probe)\n"
    )


def _load(source: str):
    """Import the kernel of ``source`` from a file named by its hash (written once)."""
    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = _cache_folder() / f"graded_{digest}.py"
    if not path.exists() or path.read_text() != source:
        from galinear._io import atomic_write_text

        atomic_write_text(str(path), source)
    name = f"galinear_graded_{digest}"
    if name not in sys.modules:  # numba's disk cache finds the module again by this name
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name].kernel


@lru_cache(maxsize=1024)
def _product_kernel(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    ti, tj, tk, ts = _kept_terms(metric, kind, pa, pb)
    if ti.size > STRAIGHT_LINE_MAX_TERMS:
        return None
    by_output = defaultdict(list)
    for i, j, k, s in zip(ti.tolist(), tj.tolist(), tk.tolist(), ts.tolist()):
        by_output[k].append((s, f"a{i}*b{j}"))
    lines = [f"        out[r, {k}] = {_signed_sum(terms)}" for k, terms in sorted(by_output.items())]
    return _load(_module_source(sorted(set(ti.tolist())), sorted(set(tj.tolist())), lines))


def _rows(a: np.ndarray, b: np.ndarray, dim: int):
    """a, b as (rows, dim) arrays with row strides 0 or 1 when one side is a single multivector;
    else both broadcast and materialised. Returns (a2, b2, sa, sb, batch shape)."""
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-1])
    rows = int(np.prod(shape, dtype=np.int64))
    pieces = []
    for x in (a, b):
        if x.shape[:-1] == shape:
            pieces += [np.ascontiguousarray(x).reshape(rows, dim), 1]
        elif x.size == dim:
            pieces += [np.ascontiguousarray(x).reshape(1, dim), 0]
        else:
            pieces += [np.ascontiguousarray(np.broadcast_to(x, shape + (dim,))).reshape(rows, dim), 1]
    return (*pieces, shape)


def _check(finite: bool, a, b) -> None:
    if not finite:
        from galinear.core.algebra import _check_finite

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
    a2, sa, b2, sb, shape = _rows(a, b, alg.dim)
    out = np.zeros((a2.shape[0] if sa else b2.shape[0], alg.dim), dtype=dtype)
    if out.shape[0] and out_pattern:
        kernel = _product_kernel(alg.metric, kind, pa, pb)
        if kernel is not None:
            _check(kernel(a2, b2, out, sa, sb), a2, b2)
        else:
            ti, tj, tk, ts = _kept_terms(alg.metric, kind, pa, pb)
            a2 = np.ascontiguousarray(np.broadcast_to(a2, out.shape))
            b2 = np.ascontiguousarray(np.broadcast_to(b2, out.shape))
            ts = ts.astype(dtype)
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


@lru_cache(maxsize=256)
def _sandwich_kernel(metric: tuple[int, ...], pr: int, px: int):
    first, second = _sandwich_terms(metric, pr, px)
    used_m = sorted({m for terms in second.values() for _, m, _ in terms})
    if sum(len(first[m]) for m in used_m) + sum(len(t) for t in second.values()) > STRAIGHT_LINE_MAX_TERMS:
        return None
    lines = [f"        t{m} = {_signed_sum([(s, f'a{i}*b{j}') for s, i, j in first[m]])}" for m in used_m]
    lines += [f"        out[r, {k}] = {_signed_sum([(s, f't{m}*a{l}') for s, m, l in terms])}"
              for k, terms in sorted(second.items())]
    loads_a = sorted({i for m in used_m for _, i, _ in first[m]} | {l for t in second.values() for _, _, l in t})
    loads_b = sorted({j for m in used_m for _, _, j in first[m]})
    return _load(_module_source(loads_a, loads_b, lines))


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
    a2, sa, b2, sb, shape = _rows(R.astype(dtype, copy=False), x.astype(dtype, copy=False), alg.dim)
    out = np.zeros((a2.shape[0] if sa else b2.shape[0], alg.dim), dtype=dtype)
    if out.shape[0]:
        _check(kernel(a2, b2, out, sa, sb), a2, b2)
    return out.reshape(shape + (alg.dim,)), sandwich_pattern(n, alg.metric, pr, px)
