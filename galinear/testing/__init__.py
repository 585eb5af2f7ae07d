r"""Assertion helpers and references for users and tests of galinear (numpy only; clifford and
scipy where named; torch inside the rotor-backend conformance helpers at the end).

Tolerances are *relative to a scale*: for a product :math:`a \circ b` the error of each row is
divided by :math:`\|a\|\,\|b\|` (coefficient 2-norms), for a unary map by :math:`\|x\|`. One
table, :data:`TOLERANCES`, holds them: ``1e-12`` for float64 and ``1e-5`` for float32 inputs for
one product or map (references are computed in float64), ``1e-10`` and ``1e-4`` for inverses and
chains of products.

Float64 references (the geometric product, the reverse, rotor maps) live in
:mod:`galinear.testing.references` and are re-exported here; tiny language models for the
compression tests in :mod:`galinear.testing.models` and :mod:`galinear.testing.compression` (torch
and transformers, not imported here); pickles that run code and truncated files for the loader tests in
:mod:`galinear.testing.payloads`.
"""
from __future__ import annotations

import numpy as np

from galinear.testing import references as _references
from galinear.testing.compiled import assert_kernel_gradient, kernel_gradient_error, special_points
from galinear.testing.references import (
    as_float64,
    random_factor_case,
    reference_factor_map,
    reference_gp,
    reference_reverse,
    reference_rotor_map,
    reference_sandwich,
    relative_error,
    rotor_from_rows,
    transposed_map_factors,
)

__all__ = [
    "TOLERANCES",
    "default_rtol",
    "assert_close",
    "norm_product",
    "random_multivector",
    "clifford_reference",
    "assert_matches_clifford",
    "assert_unit_rotor",
    "assert_orthogonal",
    "assert_simple",
    "rotor_cases",
    "rotor_network",
    "central_difference_gradient",
    "assert_gradient_matches_fd",
    "check_rotor_backend",
    "assert_kernel_gradient",
    "kernel_gradient_error",
    "special_points",
    *_references.__all__,
]

#: Relative tolerances by dtype name: ``"product"`` for one product or map of O(1) inputs,
#: ``"chain"`` for inverses and chains of products (the rounding of each step adds up).
TOLERANCES = {
    "float64": {"product": 1e-12, "chain": 1e-10},
    "float32": {"product": 1e-5, "chain": 1e-4},
}


def default_rtol(dtype, kind: str = "product") -> float:
    """The relative tolerance of :data:`TOLERANCES` for a numpy or torch dtype (or its name);
    the float64 one for any other dtype. ``kind``: ``"product"`` or ``"chain"``."""
    name = str(dtype).removeprefix("torch.") if type(dtype).__module__ == "torch" else np.dtype(dtype).name
    table = TOLERANCES.get(name, TOLERANCES["float64"])
    try:
        return table[kind]
    except KeyError:
        raise ValueError(f"kind must be one of {sorted(table)}, got {kind!r}") from None


def assert_close(actual, expected, scale=None, rtol=None) -> None:
    """Assert the largest error of each row (last axis) is at most ``rtol * scale``.

    ``scale``: one number or one a row (e.g. :func:`norm_product` of the operands); default
    max(1, max |expected|). ``rtol``: default :func:`default_rtol` of ``actual``'s dtype.
    Both sides are compared in float64.
    """
    if rtol is None:
        rtol = default_rtol(actual.dtype if hasattr(actual, "dtype") else np.float64)
    got, want = as_float64(actual), as_float64(expected)
    if got.shape != want.shape:
        raise AssertionError(f"shapes differ: {got.shape} and {want.shape}")
    if scale is None:
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
    error = np.abs(got - want).reshape(-1, want.shape[-1] if want.ndim else 1).max(axis=-1, initial=0.0)
    bound = rtol * np.maximum(as_float64(scale).reshape(-1), np.finfo(np.float64).tiny)
    if not np.all(error <= bound):
        worst = int(np.argmax(error / bound))
        raise AssertionError(f"row {worst} differs by {float(error[worst]):.3g} > rtol {rtol:.3g} x scale "
                             f"{float(bound[worst if bound.size > 1 else 0] / rtol):.3g}")


def norm_product(*operands) -> np.ndarray:
    """The product of the operands' coefficient 2-norms, row by row (arrays or MultiVectors)."""
    out = np.float64(1.0)
    for operand in operands:
        out = out * np.linalg.norm(as_float64(getattr(operand, "values", operand)), axis=-1)
    return out


def random_multivector(rng, alg, shape=(4,), dtype=np.float64):
    """A :class:`galinear.MultiVector` of ``alg`` with N(0, 1) coefficients, batch shape ``shape``."""
    from galinear.core.algebra import MultiVector

    return MultiVector(alg, rng.standard_normal(tuple(shape) + (alg.dim,)).astype(dtype))


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

def rotor_network(shape, dtype, backend: str = "auto", seed: int = 0):
    """A :class:`~galinear.nn.RotorNetwork` for tests of its paths and gradients: ``shape`` = (in,
    out, hidden, chunk_size) (None: the defaults); its alphas and branch weights drawn from
    U(0.5, 1.5) and its PReLU slope 0.3, away from their initial values so that every one of their
    gradients carries weight."""
    import torch

    from galinear.nn import RotorNetwork

    torch.manual_seed(seed)
    a, b, hidden, chunk = shape
    net = RotorNetwork(a, b, hidden=hidden, chunk_size=chunk, backend=backend, dtype=dtype)
    with torch.no_grad():
        for gadget in net._gadgets():
            gadget.alpha.uniform_(0.5, 1.5)
        net.branch_weights.uniform_(0.5, 1.5)
        net.activation.weight.fill_(0.3)
    return net


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
                value_error = float(np.linalg.norm(as_float64(y) - reference) / np.linalg.norm(as_float64(x))) / size
                row = {"backend": backend, "n": n, "case": name, "dtype": dtype_name, "value_error": value_error}
                if not value_error <= default_rtol(dtype_name):
                    raise AssertionError(f"backend {backend!r}, n={n}, case {name!r}, {dtype_name}: "
                                         f"value error {value_error:.3g} > {default_rtol(dtype_name):.3g}")
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
