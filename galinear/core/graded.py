r"""Products that cost what the grades of their operands need.

A *grade pattern* is an int whose bit g is set when grade g may be present (``0b10`` is a
vector, ``0b10101`` an even multivector of Cl(4)); ``None`` means "any grade". For a product of
two patterns only the terms :math:`e_A \circ e_B` with :math:`|A|` in the first pattern and
:math:`|B|` in the second are kept (the blade tables of :mod:`galinear.core.products`), so a
vector times a vector in Cl(10) runs :math:`n^2 = 100` terms instead of :math:`4^{10}`.

Each (metric, product kind, pattern of a, pattern of b) gets its own numba kernel, written as
straight-line code from the kept terms (one line per output blade) into a file under the numba
cache folder and compiled on first call with ``cache=True``: nothing compiles at import, and a
second process loads the machine code from disk (only from a cache folder no other user can write;
the module is compiled from the generated source, never from its file's ``.pyc``:
:mod:`galinear._numba`). Term lists longer than :data:`STRAIGHT_LINE_MAX_TERMS`
use the index-list kernel :func:`galinear.core.products.table_product` on the kept terms
instead (long straight-line code compiles slowly).

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


def _cache_folder() -> Path:
    """``galinear_graded`` in the numba cache folder when only this user can write it, else a
    private temporary folder (:func:`galinear._numba.generated_folder`)."""
    from galinear._numba import generated_folder

    return generated_folder()


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


def _module_source(loads_a, loads_b, lines, tail="", at_a=None, at_b=None) -> str:
    """Kernel source; ``at_a`` / ``at_b`` map a blade index to its column (packed operands)."""
    at_a = at_a or {}
    at_b = at_b or {}
    load = ([f"        a{i} = a[ra, {at_a.get(i, i)}]" for i in loads_a]
            + [f"        b{j} = b[rb, {at_b.get(j, j)}]" for j in loads_b])
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
    from galinear._numba import load_generated

    digest = hashlib.sha256(source.encode()).hexdigest()[:20]
    path = _cache_folder() / f"graded_{digest}.py"
    # compiled from ``source`` itself after the file's SHA-256 is checked; no .pyc read or written
    return load_generated(f"galinear_graded_{digest}", path, source).kernel


def _product_sums(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    """(blades of a read, blades of b read, {output blade: its signed sum as code}), or None when
    the kept terms are too many for straight-line code."""
    ti, tj, tk, ts = _kept_terms(metric, kind, pa, pb)
    if ti.size > STRAIGHT_LINE_MAX_TERMS:
        return None
    by_output = defaultdict(list)
    for i, j, k, s in zip(ti.tolist(), tj.tolist(), tk.tolist(), ts.tolist()):
        by_output[k].append((s, f"a{i}*b{j}"))
    sums = {k: _signed_sum(terms) for k, terms in sorted(by_output.items())}
    return sorted(set(ti.tolist())), sorted(set(tj.tolist())), sums


@lru_cache(maxsize=1024)
def _product_kernel(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    parts = _product_sums(metric, kind, pa, pb)
    if parts is None:
        return None
    loads_a, loads_b, sums = parts
    return _load(_module_source(loads_a, loads_b, [f"        out[r, {k}] = {v}" for k, v in sums.items()]))


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
    """One line per packed output column: its sum, or 0.0 for a blade with no term (the output
    array is not zeroed first)."""
    return [f"        out[r, {c}] = {sums[k] if k in sums else '0.0'}"
            for k, c in _columns(n, out_pattern).items()]


@lru_cache(maxsize=1024)
def _packed_product_kernel(metric: tuple[int, ...], kind: str, pa: int, pb: int):
    n = len(metric)
    parts = _product_sums(metric, kind, pa, pb)
    if parts is None:
        return None
    loads_a, loads_b, sums = parts
    lines = _packed_writes(n, product_pattern(n, kind, pa, pb), sums)
    return _load(_module_source(loads_a, loads_b, lines, at_a=_columns(n, pa), at_b=_columns(n, pb)))


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
    used_m = sorted({m for terms in second.values() for _, m, _ in terms})
    if sum(len(first[m]) for m in used_m) + sum(len(t) for t in second.values()) > STRAIGHT_LINE_MAX_TERMS:
        return None
    lines = [f"        t{m} = {_signed_sum([(s, f'a{i}*b{j}') for s, i, j in first[m]])}" for m in used_m]
    sums = {k: _signed_sum([(s, f"t{m}*a{l}") for s, m, l in terms]) for k, terms in second.items()}
    lines += _packed_writes(n, sandwich_pattern(n, metric, pr, px), sums)
    loads_a = sorted({i for m in used_m for _, i, _ in first[m]} | {l for t in second.values() for _, _, l in t})
    loads_b = sorted({j for m in used_m for _, _, j in first[m]})
    return _load(_module_source(loads_a, loads_b, lines, at_a=_columns(n, pr), at_b=_columns(n, px)))
