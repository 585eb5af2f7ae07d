r"""Assertion helpers for users and tests of galinear (numpy only; clifford where named; torch
inside the rotor-backend conformance helpers at the end).

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
    "rotor_cases",
    "reference_rotor_map",
    "central_difference_gradient",
    "assert_gradient_matches_fd",
    "check_rotor_backend",
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


# ---------------------------------------------------------------------------------------------
# Conformance of rotor backends: values and gradients of y = exp(B) x exp(C)~ on one case list.
# torch is imported inside the functions, so importing this module stays numpy-only.

def rotor_cases(n: int, pairs: int = 2, seed: int = 0) -> dict[str, np.ndarray]:
    r"""Named bivector batches (pairs, C(n, 2)) of Euclidean Cl(n) at the points where rotor maths breaks.

    ``random`` (N(0, 1)), ``small`` (N(0, 0.1)), ``zero``, ``tiny`` (|B| ~ 1e-12), ``large``
    (|B| ~ 1e3), and for n >= 4 ``equal_angles`` (every plane turned by 0.7 rad),
    ``nearly_equal`` (angles 0.7 and 0.7 + 1e-7) and ``nearly_simple`` (a second plane of
    1e-8); planes in random orthonormal frames.
    """
    from galinear.blades import bivector_pairs

    rng = np.random.default_rng(seed)
    m = n * (n - 1) // 2
    pairs_ij = bivector_pairs(n)

    def with_angles(angles):
        out = np.zeros((pairs, m))
        for p in range(pairs):
            Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
            A = np.zeros((n, n))
            for j, angle in enumerate(angles):
                A[2 * j, 2 * j + 1], A[2 * j + 1, 2 * j] = angle, -angle
            A = Q @ A @ Q.T
            out[p] = A[pairs_ij[:, 0], pairs_ij[:, 1]]
        return out

    cases = {
        "random": rng.standard_normal((pairs, m)),
        "small": 0.1 * rng.standard_normal((pairs, m)),
        "zero": np.zeros((pairs, m)),
        "tiny": 1e-12 * rng.standard_normal((pairs, m)),
        "large": 1e3 * rng.standard_normal((pairs, m)) / np.sqrt(max(m, 1)),
    }
    if n >= 4:
        k = n // 2
        cases["equal_angles"] = with_angles([0.7] * k)
        cases["nearly_equal"] = with_angles([0.7, 0.7 + 1e-7] + [0.3] * (k - 2))
        cases["nearly_simple"] = with_angles([1.1, 1e-8] + [0.0] * (k - 2))
    return cases


def reference_rotor_map(x, left_bivectors, right_bivectors=None) -> np.ndarray:
    r"""y = R x S~ with R = expm(L_B) 1 (L_B: the matrix of left multiplication by B, built from
    galinear.blades' Cayley tables; ``scipy.linalg.expm``), in float64 numpy.

    Independent of galinear's decomposition and rotor code: a dense reference for tests.
    x (T, P, 2**n), bivectors (P, C(n, 2)); arrays or tensors.
    """
    import scipy.linalg

    from galinear.blades import blade_grades, cayley_tables

    x = _as_float64(x)
    d = x.shape[-1]
    n = d.bit_length() - 1
    index, sign = (np.asarray(t) for t in cayley_tables((1,) * n))  # e_i e_j = sign[i, j] e_index[i, j]
    grades = blade_grades(n)
    reverse = np.where((grades * (grades - 1) // 2) % 2 == 1, -1.0, 1.0)
    columns = np.broadcast_to(np.arange(d), (d, d))

    def product_matrix(a, rows, signs):
        # for fixed j, i -> index[i, j] is a bijection: every (i, j) lands on its own entry
        out = np.zeros(a.shape[:-1] + (d, d))
        out[..., rows, columns] = a[..., :, None] * signs
        return out

    def rotor(bivector):
        full = np.zeros(bivector.shape[:-1] + (d,))
        full[..., 1 + n : 1 + n + bivector.shape[-1]] = bivector
        return scipy.linalg.expm(product_matrix(full, index, sign))[..., :, 0]

    R = rotor(_as_float64(left_bivectors))
    S = R if right_bivectors is None else rotor(_as_float64(right_bivectors))
    M = product_matrix(R, index, sign) @ product_matrix(S * reverse, index.T, sign.T)
    return np.einsum("pcd,tpd->tpc", M, x)


def _as_float64(a) -> np.ndarray:
    if hasattr(a, "detach"):
        a = a.detach().cpu().double().numpy()
    return np.asarray(a, dtype=np.float64)


def _central_difference(f, x, direction, step):
    values = [float(f(x + offset * step * direction)) for offset in (-2, -1, 1, 2)]
    return (values[0] - 8 * values[1] + 8 * values[2] - values[3]) / (12 * step)


def central_difference_gradient(f, x, step: float = 1e-4):
    r"""Gradient of the scalar function ``f`` at the float64 tensor ``x`` by fourth-order central
    differences, :math:`(f(x-2h) - 8f(x-h) + 8f(x+h) - f(x+2h)) / 12h` per coordinate
    (truncation error :math:`O(h^4)`, rounding :math:`O(\epsilon |f| / h)`)."""
    import torch

    if x.dtype != torch.float64:
        raise TypeError(f"central differences need float64 for a meaningful check, got {x.dtype}")
    x = x.detach()
    grad = torch.zeros_like(x).reshape(-1)
    with torch.no_grad():
        for i in range(grad.numel()):
            unit = torch.zeros_like(grad)
            unit[i] = 1.0
            grad[i] = _central_difference(f, x, unit.reshape(x.shape), step)
    return grad.reshape(x.shape)


def assert_gradient_matches_fd(f, x, rtol: float = 1e-7, step: float = 1e-4, directions: int | None = None,
                               seed: int = 0) -> float:
    """Assert autograd's gradient of the scalar ``f`` at float64 ``x`` equals central differences
    of ``f`` itself; returns the error.

    ``directions=None`` compares every coordinate (normwise error relative to max(|fd|, 1));
    an integer compares that many directional derivatives along random unit directions
    (cheaper for large inputs; error relative to max(|grad|, 1)).
    """
    import torch

    point = x.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(f(point), [point])
    if directions is None:
        fd = central_difference_gradient(f, x, step)
        error = float((grad - fd).norm() / max(float(fd.norm()), 1.0))
    else:
        if x.dtype != torch.float64:
            raise TypeError(f"central differences need float64 for a meaningful check, got {x.dtype}")
        generator = torch.Generator().manual_seed(seed)
        error = 0.0
        with torch.no_grad():
            for _ in range(directions):
                u = torch.randn(x.shape, generator=generator, dtype=torch.float64)
                u /= u.norm()
                fd = _central_difference(f, x.detach(), u, step)
                error = max(error, abs(float((grad * u).sum()) - fd) / max(float(grad.norm()), 1.0))
    if not error <= rtol:
        raise AssertionError(f"autograd differs from central differences: relative error {error:.3g} > {rtol:.3g}")
    return error


def check_rotor_backend(backend: str, dimensions=range(2, 9), dtypes=("float64", "float32"),
                        gradients: bool = True, tokens: int = 3, seed: int = 0) -> list[dict]:
    r"""Check a registered sandwich backend on :func:`rotor_cases`: one call for a new backend.

    For every n in ``dimensions`` and every case, the map :math:`x \mapsto e^{B} x e^{-C}` run
    through :func:`galinear.nn.dexp.exact_rotor_sandwich` with ``backend`` must equal
    :func:`reference_rotor_map` (error <= 1e-12 in float64, 1e-5 in float32, relative to
    :math:`|x|(1 + |B| + |C|)`: an angle is known to angle * eps only), and, in float64 with ``gradients``, autograd's gradients in B, C and x must equal
    central differences of that same forward (decomposition included) to 1e-7, relative to
    max(|fd|, 1). Returns one row per check; raises AssertionError naming the first failure.
    """
    import torch

    from galinear.nn import functional as F
    from galinear.nn.dexp import exact_rotor_sandwich

    tolerance = {"float64": 1e-12, "float32": 1e-5}
    rows = []
    for n in dimensions:
        for name, bivectors in rotor_cases(n, pairs=1, seed=seed + n).items():
            rng = np.random.default_rng(seed + 100 * n)
            for dtype_name in dtypes:
                dtype = getattr(torch, dtype_name)
                B = torch.tensor(bivectors, dtype=dtype)
                C = torch.tensor(np.roll(bivectors, 1, axis=-1) * 0.5, dtype=dtype)
                x = torch.tensor(rng.standard_normal((tokens, 1, 2**n)), dtype=dtype)
                weights = torch.tensor(rng.standard_normal((tokens, 1, 2**n)), dtype=dtype)

                def forward(x, B, C):
                    with torch.no_grad():
                        left = F.invariant_decomposition(B.detach(), method="exact")
                        right = F.invariant_decomposition(C.detach(), method="exact")
                    return exact_rotor_sandwich(x, B, C, (left.V, left.W), (right.V, right.W), backend=backend)

                y = forward(x, B, C)
                reference = reference_rotor_map(x, B, C)
                # an angle theta is known to theta * eps only: errors are relative to |x| (1 + |B| + |C|)
                size = 1.0 + float(np.linalg.norm(bivectors)) * 1.5
                value_error = float(np.linalg.norm(_as_float64(y) - reference) / np.linalg.norm(_as_float64(x))) / size
                row = {"backend": backend, "n": n, "case": name, "dtype": dtype_name, "value_error": value_error}
                if not value_error <= tolerance[dtype_name]:
                    raise AssertionError(f"backend {backend!r}, n={n}, case {name!r}, {dtype_name}: "
                                         f"value error {value_error:.3g} > {tolerance[dtype_name]:.3g}")
                if gradients and dtype == torch.float64:
                    def loss_of(which):
                        def f(value):
                            args = {"x": x, "B": B, "C": C}
                            args[which] = value
                            return (weights * forward(args["x"], args["B"], args["C"]) ** 2).sum()
                        return f

                    worst = 0.0
                    for which, point, directions in (("B", B, None), ("C", C, None), ("x", x, 4)):
                        try:
                            worst = max(worst, assert_gradient_matches_fd(loss_of(which), point,
                                                                          directions=directions))
                        except AssertionError as error:
                            raise AssertionError(f"backend {backend!r}, n={n}, case {name!r}, gradient in "
                                                 f"{which}: {error}") from None
                    row["gradient_error"] = worst
                rows.append(row)
    return rows
