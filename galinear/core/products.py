r"""Numba kernels for the bilinear products of Cl(p, q, r) (numpy + numba only).

Every bilinear product of basis blades is a signed blade,
:math:`e_A \circ e_B = \sigma(A, B)\, e_{A \oplus B}` or zero, so a product of two multivectors
is a list of *triples* :math:`(i, j, k, s)`: ``out[k] += s * a[i] * b[j]``. The outer product and
the contractions keep the triples of the geometric product whose grades satisfy (Dorst, Fontijne
and Mann 2007; grades r of a, s of b, g of the result)

* outer product  :math:`g = r + s`;
* left contraction  :math:`g = s - r`;
* right contraction :math:`g = r - s`;
* scalar product :math:`g = 0`.

Two kernels:

``table_product``
    For n <= 10, from the Cayley tables of :mod:`galinear.blades`. Rows are processed in chunks
    that are transposed so that the batch is the innermost (vectorised) axis: one triple updates
    a whole chunk of rows at once.
``bitmask_product``
    For any n (used for n > 10): blades as bitmasks, the sign computed on the fly from the
    reorder sign (popcounts) and the metric.

Nothing compiles at import; each kernel compiles on first call (float32 and float64 only) and is
cached on disk by numba.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from galinear import blades
from galinear._numba import jit, prange, readonly

__all__ = [
    "KINDS",
    "TABLE_MAX_N",
    "product_triples",
    "table_product",
    "table_product_parallel",
    "PARALLEL_MIN_WORK",
    "bitmask_product",
    "chunk_rows",
    "CHUNK_ROWS",
    "METHODS",
    "AUTO_GENERATED_MAX_N",
    "multiply",
    "REFUSED_PRODUCT_SECONDS",
    "ALLOW_SLOW_VARIABLE",
    "slow_work_allowed",
]

#: Products understood by the kernels, with their code for :func:`bitmask_product`.
KINDS = {"gp": 0, "op": 1, "lc": 2, "rc": 3}

#: Largest n for which the dense-table kernel is used (galinear.blades offers tables up to 10).
TABLE_MAX_N = 10


def _grade_ok(kind: str, ga, gb, gk):
    if kind == "gp":
        return np.ones_like(gk, dtype=bool)
    if kind == "op":
        return gk == ga + gb
    if kind == "lc":
        return gk == gb - ga
    if kind == "rc":
        return gk == ga - gb
    raise ValueError(f"unknown product {kind!r}; expected one of {sorted(KINDS)}")


@lru_cache(maxsize=128)
def _triples(metric: tuple[int, ...], kind: str, dtype_name: str):
    index, sign = blades.cayley_tables(metric)
    grades = blades.blade_grades(len(metric))
    dim = grades.size
    ii, jj = np.meshgrid(np.arange(dim), np.arange(dim), indexing="ij")
    kk = index
    keep = (sign != 0) & _grade_ok(kind, grades[ii], grades[jj], grades[kk])
    out = (
        np.ascontiguousarray(ii[keep], dtype=np.int32),
        np.ascontiguousarray(jj[keep], dtype=np.int32),
        np.ascontiguousarray(kk[keep], dtype=np.int32),
        np.ascontiguousarray(sign[keep], dtype=np.dtype(dtype_name)),
    )
    for arr in out:
        arr.setflags(write=False)
    return out


def product_triples(metric, kind: str = "gp", dtype=np.float64):
    """The non-zero terms ``(i, j, k, s)`` of a product in shortlex order (n <= 10).

    ``out[k] += s * a[i] * b[j]`` summed over the returned arrays gives the product ``kind``
    (``"gp"``, ``"op"``, ``"lc"`` or ``"rc"``). Cached per (metric, kind, dtype); read-only.
    """
    metric = tuple(int(m) for m in metric)
    if kind not in KINDS:
        raise ValueError(f"unknown product {kind!r}; expected one of {sorted(KINDS)}")
    return _triples(metric, kind, np.dtype(dtype).name)


#: Rows per transposed chunk of :func:`table_product` (64: the best of 16..128 measured for n = 3..8).
CHUNK_ROWS = 64


def chunk_rows() -> int:
    """Rows per transposed chunk of :func:`table_product`: :data:`CHUNK_ROWS`, for every algebra."""
    return CHUNK_ROWS


#: Work (rows x terms) from which the multi-threaded kernel is used.
PARALLEL_MIN_WORK = 1 << 24


@jit
def _table_chunk(a, b, out, ti, tj, tk, ts, start, chunk):  # pragma: no cover - compiled
    rows, dim = a.shape
    stop = min(start + chunk, rows)
    m = stop - start
    at = np.empty((dim, chunk), dtype=a.dtype)
    bt = np.empty((dim, chunk), dtype=a.dtype)
    ot = np.zeros((dim, chunk), dtype=a.dtype)
    probe = a.dtype.type(0.0)
    for r in range(m):
        for i in range(dim):
            x = a[start + r, i]
            y = b[start + r, i]
            at[i, r] = x
            bt[i, r] = y
            probe += x * 0.0 + y * 0.0
    for r in range(m, chunk):  # pad the last chunk
        for i in range(dim):
            at[i, r] = 0.0
            bt[i, r] = 0.0
    for t in range(ti.shape[0]):
        i = ti[t]
        j = tj[t]
        k = tk[t]
        s = ts[t]
        for r in range(chunk):
            ot[k, r] += s * at[i, r] * bt[j, r]
    for r in range(m):
        for k in range(dim):
            out[start + r, k] = ot[k, r]
    return np.isfinite(probe)


@jit
def table_product(a, b, out, ti, tj, tk, ts, chunk):  # pragma: no cover - compiled
    """``out[r, tk[t]] += ts[t] * a[r, ti[t]] * b[r, tj[t]]`` for every row r and term t.

    a, b, out: C-contiguous (rows, dim) of one float dtype; ``out`` is overwritten. Rows are
    handled ``chunk`` at a time, transposed so that one term updates the whole chunk (the
    vectorised inner loop). Returns True when every input entry is finite (checked on the fly).
    """
    rows = a.shape[0]
    finite = True
    for start in range(0, rows, chunk):
        if not _table_chunk(a, b, out, ti, tj, tk, ts, start, chunk):
            finite = False
    return finite


@jit(parallel=True)
def table_product_parallel(a, b, out, ti, tj, tk, ts, chunk):  # pragma: no cover - compiled
    """Multi-threaded :func:`table_product` (chunks spread over numba's threads)."""
    rows = a.shape[0]
    nchunks = (rows + chunk - 1) // chunk
    finite = np.ones(nchunks, dtype=np.bool_)
    for c in prange(nchunks):
        finite[c] = _table_chunk(a, b, out, ti, tj, tk, ts, c * chunk, chunk)
    return finite.all()


@jit(inline="always")
def reorder_sign(x, y):  # pragma: no cover - compiled
    """+1 or -1: the sign of sorting the indices of blade x followed by blade y (bitmasks)."""
    x >>= 1
    swaps = 0
    while x:
        z = x & y
        while z:  # popcount
            z &= z - 1
            swaps += 1
        x >>= 1
    return 1 - 2 * (swaps & 1)


@jit(inline="always")
def _popcount(x):  # pragma: no cover - compiled
    count = 0
    while x:
        x &= x - 1
        count += 1
    return count


@jit(parallel=True)
def bitmask_product(a, b, out, metric, kind):  # pragma: no cover - compiled
    """Product of rows of a and b, all in *bitmask* order (entry m holds blade bitmask m).

    ``metric``: int64 array of squares of the basis vectors; ``kind``: code from :data:`KINDS`.
    Zero entries of a and b are skipped. ``out`` is overwritten. Returns True when every input
    entry is finite.
    """
    rows, dim = a.shape
    finite = np.ones(rows, dtype=np.bool_)
    for r in prange(rows):
        probe = a.dtype.type(0.0)
        for k in range(dim):
            out[r, k] = 0.0
            probe += a[r, k] * 0.0 + b[r, k] * 0.0
        finite[r] = np.isfinite(probe)
        for i in range(dim):
            x = a[r, i]
            if x == 0.0:
                continue
            gi = _popcount(i)
            for j in range(dim):
                y = b[r, j]
                if y == 0.0:
                    continue
                k = i ^ j
                if kind != 0:
                    gj = _popcount(j)
                    gk = _popcount(k)
                    if kind == 1 and gk != gi + gj:
                        continue
                    if kind == 2 and gk != gj - gi:
                        continue
                    if kind == 3 and gk != gi - gj:
                        continue
                s = reorder_sign(i, j)
                common = i & j
                idx = 0
                while common:
                    if common & 1:
                        s *= metric[idx]
                    common >>= 1
                    idx += 1
                if s != 0:
                    out[r, k] += s * x * y
    return finite.all()


# ---------------------------------------------------------------------------- dispatch
#: Kernel choices of :func:`multiply` (and of ``Algebra.gp(method=...)``).
METHODS = ("auto", "table", "generated")

#: "auto" uses a generated kernel (when one exists) for n up to this value: they are faster than
#: the table kernel (benchmarks/results/bench_products.md), but the n = 6 one takes more than a
#: minute to compile for about 1 µs saved a product (docs/core.md, "method='auto'").
AUTO_GENERATED_MAX_N = 5

#: Terms per second and thread of the bitmask kernel (n > 10), measured at n = 11..13 on one
#: core; used to estimate a product's time before it starts.
BITMASK_TERMS_PER_SECOND = 7e7
#: A product estimated to run longer than this warns first.
SLOW_PRODUCT_SECONDS = 10.0
#: A product estimated to run longer than this is refused (TooLargeError) unless the environment
#: variable named by :data:`ALLOW_SLOW_VARIABLE` is set to 1.
REFUSED_PRODUCT_SECONDS = 60.0
#: ``GALINEAR_ALLOW_SLOW=1`` lets products and maps estimated above REFUSED_PRODUCT_SECONDS run.
ALLOW_SLOW_VARIABLE = "GALINEAR_ALLOW_SLOW"


def slow_work_allowed() -> bool:
    """True when the user opted into long products (``GALINEAR_ALLOW_SLOW=1``)."""
    import os

    return os.environ.get(ALLOW_SLOW_VARIABLE, "").strip().lower() in ("1", "true", "yes")


def multiply(metric: tuple, kind: str, a2: np.ndarray, b2: np.ndarray, method: str = "auto",
             owner: str = "the algebra") -> np.ndarray:
    """The product ``kind`` of the rows of a2 and b2 (rows, 2**n), same float dtype, shortlex order.

    ``method``: ``"table"`` (Cayley-table kernel for n <= 10, bitmask kernel above),
    ``"generated"`` (the straight-line kernel of :mod:`galinear._generated`, ValueError if there
    is none), ``"auto"`` (generated for n <= :data:`AUTO_GENERATED_MAX_N`, else table). A
    ValueError names the input that holds NaN or infinity.
    """
    n = len(metric)
    # one array kind per kernel signature: read-only C-contiguous inputs, a fresh writable output
    # (the bitmask kernel below gets fresh writable copies, always)
    a2 = readonly(np.ascontiguousarray(a2))
    b2 = readonly(np.ascontiguousarray(b2))
    out = np.empty_like(a2)
    kernel = None
    if method != "table":
        kernel = _generated_kernel(kind, metric)
        if kernel is None and method == "generated":
            raise ValueError(
                f"no generated kernel for {kind!r} in {owner}; generate it with "
                f"`galinear codegen` or use method='table'"
            )
        if method == "auto" and n > AUTO_GENERATED_MAX_N:
            kernel = None
    if a2.shape[0] == 0:
        return out
    if kernel is not None:
        finite = kernel(a2, b2, out)  # False when an input holds NaN or infinity
    elif n <= TABLE_MAX_N:
        ti, tj, tk, ts = product_triples(metric, kind, a2.dtype)
        table = table_product
        if a2.shape[0] * ti.shape[0] >= PARALLEL_MIN_WORK and _threads() > 1:
            table = table_product_parallel
        finite = table(a2, b2, out, ti, tj, tk, ts, CHUNK_ROWS)
    else:
        perm = blades.shortlex_bitmasks(n)
        a_bits = np.empty_like(a2)
        b_bits = np.empty_like(b2)
        a_bits[:, perm] = a2
        b_bits[:, perm] = b2
        _warn_if_slow(kind, owner, a_bits, b_bits)
        out_bits = np.empty_like(a2)
        finite = bitmask_product(a_bits, b_bits, out_bits, np.array(metric, dtype=np.int64), KINDS[kind])
        out = np.ascontiguousarray(out_bits[:, perm])
    if not finite:
        for name, arr in (("a", a2), ("b", b2)):
            if not np.isfinite(arr).all():
                raise ValueError(f"{name} contains NaN or infinity; every coefficient must be finite")
    return out


def _warn_if_slow(kind: str, owner: str, a_bits: np.ndarray, b_bits: np.ndarray) -> None:
    """Before a bitmask product: warn when it is estimated to run longer than
    :data:`SLOW_PRODUCT_SECONDS`, and refuse it with TooLargeError (before any work) above
    :data:`REFUSED_PRODUCT_SECONDS` unless ``GALINEAR_ALLOW_SLOW=1``."""
    import warnings

    # the kernel skips zero coefficients: a row costs nnz(a_row) * nnz(b_row) terms
    terms = float(np.dot(np.count_nonzero(a_bits, axis=1).astype(np.float64),
                         np.count_nonzero(b_bits, axis=1).astype(np.float64)))
    seconds = terms / (BITMASK_TERMS_PER_SECOND * max(1, min(_threads(), a_bits.shape[0])))
    if seconds <= SLOW_PRODUCT_SECONDS:
        return
    n = a_bits.shape[1].bit_length() - 1
    what = (f"{kind} of {a_bits.shape[0]} multivector pair(s) in {owner} ({a_bits.shape[1]} coefficients each) "
            f"costs {terms:.3g} terms: about {seconds:.0f} s on {_threads()} thread(s)")
    fix = (f"dense multivectors of Cl({n}) are expensive (4**n terms); keep the inputs sparse (e.g. vectors, "
           "bivectors) or use a smaller algebra")
    if seconds > REFUSED_PRODUCT_SECONDS and not slow_work_allowed():
        from galinear._limits import TooLargeError

        raise TooLargeError(f"{what}, more than the {REFUSED_PRODUCT_SECONDS:.0f} s galinear runs without being "
                            f"asked; {fix}, or set {ALLOW_SLOW_VARIABLE}=1 in the environment to run it anyway")
    warnings.warn(f"{what}. {fix[0].upper()}{fix[1:]}", stacklevel=5)


def _threads() -> int:
    import numba

    return numba.get_num_threads()


def _generated_kernel(kind: str, metric):
    try:
        from galinear._generated import find_kernel
    except ImportError:  # the generated package is optional
        return None
    try:
        return find_kernel(kind, metric)
    except (ValueError, TypeError):
        return None
