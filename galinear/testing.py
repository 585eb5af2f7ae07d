r"""Assertion helpers for users and tests of galinear (numpy only; clifford where named).

Tolerances are *relative to a scale*: for a product :math:`a \circ b` the error of each row is
divided by :math:`\|a\|\,\|b\|` (coefficient 2-norms), for a unary map by :math:`\|x\|`. Defaults:
``1e-12`` for float64 and ``1e-5`` for float32 inputs (references are computed in float64).
"""
from __future__ import annotations

import numpy as np

__all__ = [
    "default_rtol",
    "clifford_reference",
    "assert_matches_clifford",
    "assert_unit_rotor",
    "assert_orthogonal",
    "assert_simple",
]

_RTOL = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-5}


def default_rtol(dtype) -> float:
    """Relative tolerance used by the helpers: 1e-12 (float64) or 1e-5 (float32)."""
    return _RTOL.get(np.dtype(dtype), 1e-12)


def _clifford_op(name: str):
    def rc(a, b):
        # right contraction from its definition: sum over grades r >= s of <a_r b_s>_{r-s}
        layout = a.layout
        total = 0 * a
        for r in range(layout.dims + 1):
            for s in range(r + 1):
                total = total + (a(r) * b(s))(r - s)
        return total

    table = {
        "gp": lambda a, b: a * b,
        "op": lambda a, b: a ^ b,
        "lc": lambda a, b: a << b,
        "rc": rc,
        "scalar_product": lambda a, b: (a * b)[()],
        "reverse": lambda a: ~a,
        "involute": lambda a: a.gradeInvol(),
        "conjugate": lambda a: a.conjugate(),
        "norm": lambda a: abs(a),
        "inverse": lambda a: a.inv(),
        "exp": lambda a: a.exp(),
    }
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"no clifford reference for {name!r}; choose one of {sorted(table)}") from None


def _table_product(table, a, b):
    """out[l] = sum a[k] T[k, l, m] b[m] over the stored entries of clifford's sparse table T."""
    k, l, m = (np.asarray(c, dtype=np.int64) for c in table.coords)
    terms = a[:, k] * np.asarray(table.data, dtype=np.float64) * b[:, m]
    out = np.zeros((a.shape[0], table.shape[1]))
    for row in range(a.shape[0]):
        out[row] = np.bincount(l, weights=terms[row], minlength=table.shape[1])
    return out


def _clifford_tables(alg, name, a, b=None):
    layout = alg.clifford_layout()
    if name in ("gp", "scalar_product"):
        out = _table_product(layout.gmt, a, b)
        return out[:, 0] if name == "scalar_product" else out
    if name == "op":
        return _table_product(layout.omt, a, b)
    if name == "lc":
        return _table_product(layout.lcmt, a, b)
    if name == "rc":  # sum over grades r >= s of <a_r b_s>_{r-s}, from the geometric product
        grades = np.asarray(layout._basis_blade_order.grades)
        out = np.zeros_like(a)
        for r in range(alg.n + 1):
            for s_ in range(r + 1):
                prod = _table_product(layout.gmt, a * (grades == r), b * (grades == s_))
                out += prod * (grades == r - s_)
        return out
    if name == "norm":  # sqrt(|<~a a>_0|) with clifford's reversion and product table
        reversed_a = np.array([(~layout.MultiVector(np.array(x))).value for x in a])
        return np.sqrt(np.abs(_table_product(layout.gmt, reversed_a, a)[:, 0]))
    raise ValueError(f"no table route for {name!r}")


def clifford_reference(alg, name: str, *args, route: str = "auto") -> np.ndarray:
    """Evaluate operation ``name`` with the ``clifford`` package, in float64.

    ``route="tables"`` evaluates the bilinear products from clifford's own sparse product
    tables (``layout.gmt``, ``layout.omt``, ``layout.lcmt``) with numpy, which avoids compiling
    clifford's per-algebra numba closures; ``route="operators"`` goes row by row through
    ``clifford.MultiVector`` operators. ``"auto"``: tables for products, operators otherwise.
    """
    arrays = [np.asarray(a, dtype=np.float64) for a in args]
    shape = np.broadcast_shapes(*(a.shape for a in arrays))
    flats = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1, alg.dim) for a in arrays]
    if route == "auto":
        route = "tables" if name in ("gp", "op", "lc", "rc", "scalar_product", "norm") else "operators"
    if route == "tables":
        out = _clifford_tables(alg, name, *flats)
    elif route == "operators":
        fn = _clifford_op(name)
        layout = alg.clifford_layout()
        rows = []
        for row in zip(*flats):
            value = fn(*(layout.MultiVector(np.array(x)) for x in row))
            rows.append(value.value if hasattr(value, "value") else float(value))
        out = np.array(rows, dtype=np.float64)
    else:
        raise ValueError(f"route must be 'auto', 'tables' or 'operators', got {route!r}")
    return out.reshape(shape[:-1] + out.shape[1:])


def assert_matches_clifford(alg, name: str, *args, rtol=None, route: str = "auto", **kwargs) -> None:
    """Assert ``getattr(alg, name)(*args, **kwargs)`` equals clifford's result, row by row.

    Errors are measured relative to the product of the input norms (see the module notes);
    inputs are cast to float64 for the reference; ``route`` as in :func:`clifford_reference`.
    """
    ours = getattr(alg, name)(*args, **kwargs)
    ref = clifford_reference(alg, name, *args, route=route)
    dtype = np.result_type(*(np.asarray(a).dtype for a in args))
    rtol = default_rtol(dtype) if rtol is None else rtol
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))[:-1]
    scale = np.ones(shape)
    for a in args:
        scale = scale * np.linalg.norm(np.asarray(a, dtype=np.float64), axis=-1)
    if name == "inverse":
        scale = 1 / np.maximum(scale, np.finfo(np.float64).tiny)
    elif name == "exp":
        scale = np.ones(shape)
    scale = np.maximum(scale, np.finfo(np.float64).tiny)
    diff = np.abs(np.asarray(ours, dtype=np.float64) - ref)
    if diff.ndim > len(shape):
        diff = diff.max(axis=-1)
    rel = diff / scale
    worst = float(np.max(rel)) if rel.size else 0.0
    if not worst <= rtol:
        raise AssertionError(
            f"{name} in {alg!r} differs from clifford: worst relative error {worst:.3g} > {rtol:.3g} "
            f"(dtype {dtype})"
        )


def assert_unit_rotor(alg, R, atol=None) -> None:
    r"""Assert R is even and :math:`R \tilde R = 1` (within ``atol``; default 1e3 * eps * n)."""
    R = np.asarray(R)
    atol = 1e3 * np.finfo(R.dtype).eps * max(alg.n, 1) if atol is None else atol
    odd = np.abs(R[..., alg.grades % 2 == 1]).max(initial=0.0)
    RR = alg.gp(R, alg.reverse(R))
    RR[..., 0] -= 1
    err = np.abs(RR).max(initial=0.0)
    if not (odd <= atol and err <= atol):
        raise AssertionError(f"not a unit rotor: odd part {odd:.3g}, |R ~R - 1| = {err:.3g} (atol {atol:.3g})")


def assert_orthogonal(M, atol=None) -> None:
    """Assert the square matrices M (..., d, d) satisfy M M^T = I (default atol 1e3 * eps * sqrt(d))."""
    M = np.asarray(M)
    d = M.shape[-1]
    atol = 1e3 * np.finfo(M.dtype).eps * np.sqrt(d) if atol is None else atol
    err = np.abs(M @ np.swapaxes(M, -1, -2) - np.eye(d)).max(initial=0.0)
    if not err <= atol:
        raise AssertionError(f"matrix not orthogonal: |M M^T - I| = {err:.3g} > {atol:.3g}")


def assert_simple(alg, b, rtol=None, scale=None) -> None:
    r"""Assert each bivector b (full multivectors) is simple: :math:`|b \wedge b| \le` rtol :math:`s^2`.

    :math:`s = \max(|b|, \text{scale})`; pass the size of the bivector that b was split from as
    ``scale`` so that parts at rounding level are judged against it.
    """
    b = np.asarray(b)
    rtol = 1e3 * np.finfo(b.dtype).eps if rtol is None else rtol
    bb = np.linalg.norm(alg.op(b, b), axis=-1)
    size = np.linalg.norm(b, axis=-1)
    if scale is not None:
        size = np.maximum(size, scale)
    bound = rtol * np.maximum(size**2, np.finfo(b.dtype).tiny)
    if not np.all(bb <= bound):
        raise AssertionError(f"bivector not simple: |b ^ b| / s^2 up to {float(np.max(bb / bound * rtol)):.3g} > {rtol:.3g}")
