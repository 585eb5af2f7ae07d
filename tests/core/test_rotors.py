"""Rotor maths: exp, invariant decomposition (exact and power), log, rotation and sandwich matrices.

References: scipy.linalg.expm of the skew matrix (vector action, n <= 12), clifford's Taylor-series
exp (n <= 6), dense matrices. Tolerances: float64 1e-10 to 1e-12 as stated per test, float32 1e-4.
"""
import functools

import numpy as np
import pytest

from galinear import Algebra
from galinear.core import rotors
from galinear.testing import assert_matches_clifford, assert_orthogonal, assert_simple, assert_unit_rotor

scipy_linalg = pytest.importorskip("scipy.linalg", reason="scipy's expm is the reference (test extra)")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@functools.lru_cache(maxsize=None)
def _algebra(n):
    """One Algebra per n for the property tests (building it is a sizeable part of a cheap example)."""
    return Algebra(n)


def _close(actual, desired, atol):
    """|actual - desired| <= atol elementwise, with atol broadcast (e.g. a per-row scale)."""
    err = np.abs(np.asarray(actual) - np.asarray(desired))
    bound = np.broadcast_to(atol, np.broadcast_shapes(err.shape, np.shape(atol)))
    ok = err <= bound
    assert np.all(ok), f"max error {float(np.max(err)):.3g}, worst excess ratio {float(np.max(err / np.maximum(bound, 1e-300))):.3g}"


def _expm2(n, b):
    A = rotors.skew_matrix(n, np.asarray(b, dtype=np.float64))
    return np.array([scipy_linalg.expm(2 * a) for a in A.reshape(-1, n, n)]).reshape(A.shape)


def _bivector_with_angles(alg, angles, rng):
    """A bivector with the given plane angles on random orthogonal planes."""
    n = alg.n
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    b = np.zeros(alg.num_bivectors)
    for j, theta in enumerate(angles):
        b += theta * rotors.wedge(n, Q[:, 2 * j], Q[:, 2 * j + 1])
    return alg.bivector(b)


# ---------------------------------------------------------------------------- exp
@pytest.mark.parametrize("n", range(2, 7))
def test_exp_matches_clifford_series(n, rng):
    alg = Algebra(n)
    b = rng.standard_normal((2, alg.num_bivectors))
    b /= np.linalg.norm(b, axis=-1, keepdims=True)  # |B| = 1
    # clifford truncates its series (15 terms, dropping terms below its epsilon 1e-12): ~1e-10
    assert_matches_clifford(alg, "exp", alg.bivector(b), rtol=1e-9)


# float32 compiles every product kernel again in single precision (each n <= 6 has a straight-line
# kernel of its own): `make test` runs float32 at n = 3, 7 and 12, one n per kernel family
# (generated, table, bitmask), and the other n in `make test-slow`.
_EXP_SLOW = {(n, np.float32) for n in (2, 4, 5, 9)}
_EXP_CASES = [pytest.param(n, dtype, marks=pytest.mark.slow if (n, dtype) in _EXP_SLOW else ())
              for dtype in (np.float64, np.float32) for n in (2, 3, 4, 5, 7, 9, 12)]


@pytest.mark.parametrize("n, dtype", _EXP_CASES)
def test_exp_vector_action_matches_expm(n, dtype, rng):
    alg = Algebra(n)
    rows = 3 if n < 12 else 1
    b = rng.standard_normal((rows, alg.num_bivectors)).astype(dtype)
    R = alg.exp(alg.bivector(b))
    assert R.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-4
    assert_unit_rotor(alg, R, atol=tol * 10)
    M = alg.rotation_matrix(R)
    np.testing.assert_allclose(M, _expm2(n, b), rtol=0, atol=tol * n)


@pytest.mark.nojit
@pytest.mark.parametrize("n", [3, 4])
def test_exp_small_nojit(n, rng):
    alg = Algebra(n)
    b = rng.standard_normal((2, alg.num_bivectors))
    R = alg.exp(alg.bivector(b))
    np.testing.assert_allclose(alg.rotation_matrix(R), _expm2(n, b), atol=1e-12)
    S = alg.sandwich_matrix(R, alg.exp(alg.bivector(b[::-1])))
    assert_orthogonal(S)
    x = rng.standard_normal(alg.dim)
    np.testing.assert_allclose(S[0] @ x, alg.gp(alg.gp(R[0], x), alg.reverse(alg.exp(alg.bivector(b[1])))), atol=1e-12)


def test_exp_simple_closed_form(rng):
    alg = Algebra(5)
    u, w = rng.standard_normal((2, 5))
    B = alg.op(alg.vector(u), alg.vector(w))
    theta = alg.norm(B)
    expected = alg.scalar(np.cos(theta)) + np.sin(theta) / theta * B
    np.testing.assert_allclose(alg.exp(B, method="simple"), expected, atol=1e-14)
    np.testing.assert_allclose(alg.exp(B), expected, atol=1e-13)
    np.testing.assert_array_equal(alg.exp(np.zeros(32), method="simple"), alg.scalar(1.0))
    with pytest.raises(ValueError, match="simple"):
        alg.exp(alg.blade("e12") + alg.blade("e34"), method="simple")


# ---------------------------------------------------------------------------- decomposition properties
@given(
    n=st.integers(2, 7),
    seed=st.integers(0, 2**32 - 1),
    log_scale=st.floats(-6, 6),
    method=st.sampled_from(["exact", "power"]),
)
def test_decomposition_properties(n, seed, log_scale, method):
    # Every check runs on all parts (or all pairs of parts) in one batched call: the same
    # properties as one call per part, at a fraction of the cost per example.
    rng = np.random.default_rng(seed)
    alg = _algebra(n)
    b = rng.standard_normal((2, alg.num_bivectors)) * 10.0**log_scale
    B = alg.bivector(b)
    options = {"max_iter": 2000, "tol": 1e-12} if method == "power" else {}
    dec = alg.decompose(B, method=method, **options)
    scale = np.linalg.norm(b, axis=-1)[:, None]  # (2, 1)
    parts = dec.parts()  # (2, k, dim)
    k = n // 2
    assert parts.shape == (2, k, alg.dim)
    # parts (+ the reported residual) sum to B exactly up to rounding
    _close(parts.sum(axis=-2) + alg.bivector(dec.residual), B, 1e-12 * scale)
    converged = method == "exact" or bool(np.all(dec.converged))
    if converged:
        _close(parts.sum(axis=-2), B, 1e-8 * scale)
    _close(dec.angles, np.linalg.norm(dec.bivectors, axis=-1), 1e-12 * scale)
    assert_simple(alg, parts, rtol=1e-11, scale=scale)
    square = alg.gp(parts, parts)  # a simple bivector squares to -|b|^2
    _close(square[..., 1:], 0, 1e-12 * scale[..., None] ** 2)
    _close(square[..., 0], -dec.angles**2, 1e-12 * scale**2)
    if converged and k > 1:
        first, second = np.triu_indices(k, 1)  # every pair of parts
        pi, pj = parts[:, first], parts[:, second]
        product = alg.gp(pi, pj)
        _close(product - alg.gp(pj, pi), 0, 1e-8 * scale[..., None] ** 2)  # they commute
        # orthogonal planes: the product is the pure 4-vector pi ^ pj
        _close(product, alg.op(pi, pj), 1e-8 * scale[..., None] ** 2)
    R = alg.exp(B)
    assert_unit_rotor(alg, R, atol=1e-11)
    if converged:
        factors = alg.exp(parts, method="simple")  # (2, k, dim)
        R_parts = factors[:, 0]
        for j in range(1, k):
            R_parts = alg.gp(R_parts, factors[:, j])
        np.testing.assert_allclose(R_parts, R, atol=1e-7)


@given(n=st.integers(1, 6), seed=st.integers(0, 2**32 - 1), double=st.booleans())
def test_sandwich_matrix_properties(n, seed, double):
    rng = np.random.default_rng(seed)
    alg = _algebra(n)
    rotors_ = alg.exp(alg.bivector(rng.standard_normal((2 if double else 1, alg.num_bivectors))))  # one call
    R, S = rotors_[0], (rotors_[1] if double else None)
    M = alg.sandwich_matrix(R, S)
    assert_orthogonal(M, atol=1e-12)
    g = alg.grades
    if double:
        parity = (g[:, None] - g[None, :]) % 2 != 0
        np.testing.assert_allclose(M[parity], 0, atol=1e-13)
    else:
        np.testing.assert_allclose(M[g[:, None] != g[None, :]], 0, atol=1e-13)
        np.testing.assert_allclose(M[1 : n + 1, 1 : n + 1], alg.rotation_matrix(R), atol=1e-13)
    x = rng.standard_normal(alg.dim)
    right = alg.reverse(R if S is None else S)
    np.testing.assert_allclose(M @ x, alg.gp(alg.gp(R, x), right), atol=1e-12)


# ---------------------------------------------------------------------------- power method
@pytest.mark.parametrize("n", [4, 5, 6, 8])
def test_power_matches_exact_at_convergence(n, rng):
    alg = Algebra(n)
    angles = np.array([2.0, 1.3, 0.7, 0.3])[: n // 2]
    B = _bivector_with_angles(alg, angles, rng)
    exact = alg.decompose(B)
    power = alg.decompose(B, method="power", tol=1e-12, max_iter=10_000)
    assert power.converged.all()
    np.testing.assert_allclose(exact.angles, angles, atol=1e-12)
    order = np.argsort(-power.angles)
    np.testing.assert_allclose(power.angles[order], angles, atol=1e-9)
    np.testing.assert_allclose(power.bivectors[order], exact.bivectors, atol=1e-9)
    np.testing.assert_allclose(power.residual, 0, atol=1e-13)
    # warm start: from the returned vectors, the next call stops after very few steps
    again = alg.decompose(B, method="power", start=power.start, tol=1e-10)
    assert again.iterations.max() <= 2
    np.testing.assert_allclose(again.bivectors, power.bivectors, atol=1e-9)


def test_power_stop_test_is_per_row(rng):
    alg = Algebra(4)
    fast = _bivector_with_angles(alg, [2.0, 0.1], rng)  # ratio (0.1/2)^2 per step
    slow = _bivector_with_angles(alg, [2.0, 1.9], rng)  # ratio (1.9/2)^2 per step
    dec = alg.decompose(np.stack([fast, slow]), method="power", max_iter=10_000)
    assert dec.iterations[0, 0] < dec.iterations[1, 0]
    assert dec.converged.all()
    one = alg.decompose(fast, method="power", max_iter=10_000)
    assert one.iterations[0] == dec.iterations[0, 0]  # unaffected by the slow row


@pytest.mark.nojit
@pytest.mark.parametrize("n", [4, 5, 6, 7, 8])
def test_power_parts_simple_before_convergence(n, rng):
    """With a single power step per plane (far from convergence) every part, the deflation
    remainder included, is simple (rank parity of skew matrices), the parts sum to B and the
    product of their exponentials is a unit rotor; it is not exp(B), since the parts do not commute."""
    alg = Algebra(n)
    B = alg.bivector(rng.standard_normal(alg.num_bivectors))
    dec = alg.decompose(B, method="power", max_iter=1, fallback=False)
    assert not dec.converged[: n // 2 - 1].all()
    assert dec.iterations[: n // 2 - 1].max() == 1
    parts = dec.parts()
    np.testing.assert_allclose(parts.sum(axis=0), B, atol=1e-14)
    np.testing.assert_allclose(dec.residual, 0, atol=1e-14)
    assert_simple(alg, parts, rtol=1e-12)
    # an independent rank check on the last part's skew matrix: singular values 3.. vanish
    singular = np.linalg.svd(rotors.skew_matrix(n, dec.bivectors[-1]), compute_uv=False)
    assert singular[2] <= 1e-12 * singular[0]
    R = alg.scalar(1.0)
    for part in parts:
        R = alg.gp(R, alg.exp(part, method="simple"))
    assert_unit_rotor(alg, R)
    assert np.abs(R - alg.exp(B)).max() > 1e-6
    # plane vectors of the last part reproduce it
    u, w = dec.planes[-1]
    np.testing.assert_allclose(dec.angles[-1] * rotors.wedge(n, u, w), dec.bivectors[-1], atol=1e-12)


def test_power_restarts_when_start_is_orthogonal_to_the_range():
    alg = Algebra(6)
    B = 0.9 * alg.blade("e12") + 0.5 * alg.blade("e34") + 0.2 * alg.blade("e56")
    start = np.zeros((3, 6))
    start[:, 5] = 1.0  # e6 is moved by B, fine for plane 1 ...
    start[0] = [0, 0, 0, 0, 0, 0]
    start[0, 0] = 1.0
    start[1] = 0
    start[1, 0] = 1.0  # ... e1 is annihilated after the first plane is deflated
    dec = alg.decompose(B, method="power", start=start, tol=1e-13, max_iter=1000)
    np.testing.assert_allclose(np.sort(dec.angles)[::-1], [0.9, 0.5, 0.2], atol=1e-10)
    np.testing.assert_allclose(dec.parts().sum(axis=0), B, atol=1e-14)


# ---------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("method", ["exact", "power"])
def test_edge_cases(method, rng):
    alg = Algebra(6)
    zero = np.zeros(alg.dim)
    dec = alg.decompose(zero, method=method)
    np.testing.assert_array_equal(dec.bivectors, 0)
    np.testing.assert_array_equal(alg.exp(zero), alg.scalar(1.0))
    np.testing.assert_array_equal(alg.log(alg.scalar(1.0)), zero)
    one_plane = 0.8 * alg.blade("e25")
    dec = alg.decompose(one_plane, method=method)
    np.testing.assert_allclose(np.sort(dec.angles)[::-1], [0.8, 0, 0], atol=1e-12)
    np.testing.assert_allclose(alg.exp(one_plane), alg.scalar(np.cos(0.8)) + np.sin(0.8) * alg.blade("e25"), atol=1e-14)
    # equal angles in two (and three) planes: isoclinic rotations
    for angles in ([0.9, 0.9], [0.9, 0.9, 0.9], [1.1, 1.1, 0.2]):
        B = _bivector_with_angles(alg, angles, rng)
        dec = alg.decompose(B, method=method, **({"max_iter": 100} if method == "power" else {}))
        np.testing.assert_allclose(np.sort(dec.angles)[::-1][: len(angles)], sorted(angles, reverse=True), atol=1e-9)
        np.testing.assert_allclose(dec.parts().sum(axis=0) + alg.bivector(dec.residual), B, atol=1e-12)
        assert_simple(alg, dec.parts(), rtol=1e-10, scale=alg.norm(B))
        b = alg.bivector_coefficients(B)
        np.testing.assert_allclose(alg.rotation_matrix(alg.exp(B)), _expm2(6, b), atol=1e-12)


@pytest.mark.parametrize("method", ["exact", "power"])
def test_factors_reproduce_parts(method, rng):
    """(V, W) with b_j = v_j ^ w_j, the format of the rotor sandwich maps."""
    for n in (3, 4, 7):
        alg = Algebra(n)
        b = rng.standard_normal((5, alg.num_bivectors))
        b[0] = 0
        dec = alg.decompose(alg.bivector(b), method=method)
        V, W = dec.factors()
        assert V.shape == W.shape == (5, n // 2, n)
        np.testing.assert_allclose(rotors.wedge(n, V, W), dec.bivectors, atol=1e-12)


@pytest.mark.parametrize("scale", [1e-150, 1e-8, 1e3, 1e8])
def test_tiny_and_huge_norms(scale, rng):
    alg = Algebra(5)
    b = rng.standard_normal((2, 10))
    b /= np.linalg.norm(b, axis=-1, keepdims=True)
    B = alg.bivector(b * scale)
    for method in ("exact", "power"):
        dec = alg.decompose(B, method=method, **({"max_iter": 5000, "tol": 1e-12} if method == "power" else {}))
        assert np.all(np.isfinite(dec.bivectors))
        _close(dec.parts().sum(axis=-2) + alg.bivector(dec.residual), B, 1e-13 * scale)
    R = alg.exp(B)
    assert np.all(np.isfinite(R))
    assert_unit_rotor(alg, R)
    if scale <= 1e3:  # expm is accurate to about eps * |2A| in the rotation angles
        _close(alg.rotation_matrix(R), _expm2(5, b * scale), 1e-12 * max(scale, 1))
    if scale < 1:
        _close(R - alg.scalar(1.0), B, 1e-14 * scale + scale**2)  # exp(B) = 1 + B + O(|B|^2)


def test_exp_float32(rng):
    alg = Algebra(6)
    b = rng.standard_normal((4, 15)).astype(np.float32)
    R = alg.exp(alg.bivector(b))
    assert R.dtype == np.float32
    R64 = alg.exp(alg.bivector(b.astype(np.float64)))
    np.testing.assert_allclose(R, R64, atol=1e-5)
    dec = alg.decompose(alg.bivector(b), method="power")
    assert dec.bivectors.dtype == np.float32


# ---------------------------------------------------------------------------- log
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 8])
def test_log_inverts_exp(n, rng):
    alg = Algebra(n)
    b = rng.standard_normal((3, alg.num_bivectors)) * 2
    R = alg.exp(alg.bivector(b))
    L = alg.log(R)
    np.testing.assert_allclose(alg.exp(L), R, atol=1e-10)
    assert np.all(alg.decompose(L).angles <= np.pi + 1e-12)
    # angles below pi/2 in distinct planes: log(exp(B)) = B
    small = _bivector_with_angles(alg, np.array([1.2, 0.7, 0.4, 0.1])[: n // 2], rng)
    np.testing.assert_allclose(alg.log(alg.exp(small)), small, atol=1e-10)


@pytest.mark.nojit
def test_log_special_rotors():
    alg = Algebra(4)
    # half turns (angle pi/2 rotors): R = e12, R = e12 e34, R = -1
    for R in (alg.blade("e12"), alg.gp(alg.blade("e12"), alg.blade("e34")), -alg.scalar(1.0), alg.blade("e1234", -1.0)):
        L = alg.log(R)
        np.testing.assert_allclose(alg.exp(L), R, atol=1e-12)
    np.testing.assert_allclose(alg.log(alg.scalar(1.0)), 0, atol=0)
    with pytest.raises(ValueError, match="no logarithm"):
        Algebra(1).log(-Algebra(1).scalar(1.0))


# ---------------------------------------------------------------------------- bad input
@pytest.mark.nojit
def test_rotor_bad_input():
    alg = Algebra(4)
    with pytest.raises(ValueError, match="must be a bivector"):
        alg.exp(alg.blade("e1"))
    with pytest.raises(ValueError, match="must be a bivector"):
        alg.decompose(alg.scalar(1.0) + alg.blade("e12"))
    with pytest.raises(ValueError, match="last axis"):
        alg.exp(np.zeros(6))
    with pytest.raises(ValueError, match="NaN or infinity"):
        alg.exp(alg.blade("e12", np.nan))
    with pytest.raises(ValueError, match="unit rotor"):
        alg.rotation_matrix(alg.scalar(2.0))
    with pytest.raises(ValueError, match="unit rotor"):
        alg.log(alg.blade("e1"))
    with pytest.raises(ValueError, match="Euclidean"):  # exp, decompose and log cover every signature
        Algebra(3, 1).rotation_matrix(np.r_[1.0, np.zeros(15)])
    with pytest.raises(ValueError, match="Euclidean"):
        Algebra(2, 0, 1).sandwich_matrix(np.r_[1.0, np.zeros(7)])
    with pytest.raises(ValueError, match="max_iter"):
        alg.decompose(alg.blade("e12"), method="power", max_iter=0)
    with pytest.raises(ValueError, match="start must have shape"):
        alg.decompose(alg.blade("e12"), method="power", start=np.ones((3, 4)))
    with pytest.raises(ValueError, match="method"):
        alg.decompose(alg.blade("e12"), method="svd")
