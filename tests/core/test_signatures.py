"""Rotor exponential and invariant decomposition in every signature (galinear.core.signatures).

Reference: exp(B) = expm(L_B) applied to the scalar 1, with L_B the left-multiplication matrix of
B on the whole algebra (scipy.linalg.expm, float64). Tolerances relative to max(1, |exp B|):
float64 1e-11 (1e-10 for the split signatures with complex invariants, whose parts are
complex), float32 inputs 1e-5 (the computation runs in float64, the result is rounded).
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

scipy_linalg = pytest.importorskip("scipy.linalg", reason="scipy's expm is the reference")

from galinear import Algebra, MultiVector  # noqa: E402
from galinear.core import signatures  # noqa: E402

SIGNATURES = [(3, 1, 0), (1, 3, 0), (2, 1, 0), (3, 0, 1), (2, 0, 1), (4, 1, 0), (2, 2, 0), (3, 2, 0),
              (4, 0, 1), (2, 0, 2), (1, 1, 1), (5, 1, 0), (3, 3, 0)]
COMPLEX = {(2, 2, 0), (3, 2, 0), (3, 3, 0)}


def reference_exp(alg, B):
    L = signatures.left_matrix(alg, np.atleast_2d(np.asarray(B, dtype=np.float64)))
    return np.array([scipy_linalg.expm(m)[:, 0] for m in L]).reshape(np.shape(B))


def _bivector(alg, **coefficients):
    x = np.zeros(alg.dim)
    for name, value in coefficients.items():
        x[alg.blade_names.index(name)] = value
    return x


def _assert_close(R, ref, tol):
    R = np.atleast_2d(np.asarray(R, np.float64))
    ref = np.atleast_2d(ref)
    err = np.abs(R - ref).max(axis=-1) / np.maximum(1.0, np.abs(ref).max(axis=-1))
    assert err.max() <= tol, (err.max(), tol)


@pytest.mark.parametrize("signature", SIGNATURES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_matches_expm(signature, dtype, rng):
    alg = Algebra(*signature)
    B = alg.bivector(rng.standard_normal((12, alg.num_bivectors)) * 1.5).astype(dtype)
    R = alg.exp(B)
    assert R.dtype == dtype and R.shape == B.shape
    tol = (1e-10 if signature in COMPLEX else 1e-11) if dtype == np.float64 else 1e-5
    _assert_close(R, reference_exp(alg, B), tol)
    R64 = R.astype(np.float64)
    RR = alg.gp(R64, alg.reverse(R64))
    RR[:, 0] -= 1  # R ~R = 1, up to rounding of the order of |R|^2
    assert np.all(np.abs(RR).max(axis=-1) <= 10 * tol * np.maximum(1.0, (R64 * R64).sum(axis=-1)))


CASES = {
    "boost rapidity 20": ((3, 1, 0), {"e14": 20.0}),
    "boost and rotation": ((3, 1, 0), {"e14": 2.0, "e23": 1.0}),
    "null rotation": ((3, 1, 0), {"e12": 1.0, "e24": 1.0}),
    "zero": ((3, 1, 0), {}),
    "pga translation": ((3, 0, 1), {"e12": 0.3, "e13": -0.7}),
    "pga rotation about a shifted axis": ((3, 0, 1), {"e23": 0.9, "e12": 0.4}),
    "pga screw": ((3, 0, 1), {"e34": 0.8, "e12": 0.5}),
    "cga isoclinic rotation": ((4, 1, 0), {"e12": 0.7, "e34": 0.7}),
    "cga translation": ((4, 1, 0), {"e14": 0.3, "e15": 0.3, "e24": 0.2, "e25": 0.2}),
    "cga dilation": ((4, 1, 0), {"e45": 0.5}),
    "cga rotation and dilation": ((4, 1, 0), {"e12": 1.1, "e45": 0.5}),
    "split signature, complex pair": ((2, 2, 0), {"e12": 1.0, "e34": 0.5, "e13": 0.7, "e24": -0.3}),
}


@pytest.mark.nojit
@pytest.mark.parametrize("name", sorted(CASES))
def test_exp_special_cases(name):
    signature, coefficients = CASES[name]
    alg = Algebra(*signature)
    B = _bivector(alg, **coefficients)
    _assert_close(alg.exp(B), reference_exp(alg, B), 1e-12)
    _assert_close(alg.exp(B.astype(np.float32)), reference_exp(alg, B), 1e-6)


@pytest.mark.nojit
def test_pga_motor_moves_points():
    """exp of a PGA translation bivector translates a point (plane-based PGA, e1 null)."""
    alg = Algebra(3, 0, 1)
    e = MultiVector.basis(alg)
    # planes are vectors a e2 + b e3 + c e4 + d e1; the point at the origin is e234
    T = (e["e12"] * 0.5).exp()  # 1 + 0.5 e12
    assert T.allclose(1 + 0.5 * e["e12"], atol=1e-15)
    moved = T @ e["e234"]
    assert moved.grades(1e-15) == (3,) and abs(moved["e234"] - 1) < 1e-15 and abs(moved["e134"]) == pytest.approx(1.0)


def test_simple_method_and_errors():
    alg = Algebra(3, 1)
    b = _bivector(alg, e14=0.5)
    want = _bivector(alg, e14=np.sinh(0.5))
    want[0] = np.cosh(0.5)
    _assert_close(alg.exp(b, method="simple"), want, 1e-15)
    with pytest.raises(ValueError, match="simple bivector"):
        alg.exp(_bivector(alg, e14=1.0, e23=1.0), method="simple")
    with pytest.raises(ValueError, match="must be a bivector"):
        alg.exp(alg.blade("e1"))
    with pytest.raises(ValueError, match="power iteration is for Euclidean"):
        alg.decompose(b, method="power")


@pytest.mark.parametrize("signature", [(3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 2, 0), (5, 1, 0)])
def test_decomposition_parts(signature, rng):
    """Parts sum to B, square to their invariants, commute, and multiply (as exponentials) to exp B."""
    alg = Algebra(*signature)
    B = alg.bivector(rng.standard_normal((6, alg.num_bivectors)))
    dec = alg.decompose(B)
    assert isinstance(dec, signatures.SignatureDecomposition)
    parts = np.zeros(dec.bivectors.shape[:-1] + (alg.dim,), dtype=dec.bivectors.dtype)
    parts[..., 1 + alg.n : 1 + alg.n + alg.num_bivectors] = dec.bivectors
    assert np.allclose(parts.sum(axis=-2), B, atol=1e-12) and np.abs(dec.residual).max() < 1e-12
    k = alg.n // 2
    R = np.broadcast_to(alg.scalar(1.0), B.shape).astype(np.complex128)
    for j in range(k):
        b = parts[:, j]
        sq = signatures._complex_product(alg, "gp", b, b)
        assert np.allclose(sq[:, 0], dec.squares[:, j], atol=1e-10) and np.abs(sq[:, 1:]).max() < 1e-10
        for m in range(j + 1, k):
            c = parts[:, m]
            ab = signatures._complex_product(alg, "gp", b, c)
            ba = signatures._complex_product(alg, "gp", c, b)
            assert np.abs(ab - ba).max() < 1e-10
        c_, s_ = signatures._cosh_sinhc(dec.squares[:, j])
        factor = s_[:, None] * b
        factor[:, 0] += c_
        R = signatures._complex_product(alg, "gp", R, factor)
    assert np.abs(R.imag).max() < 1e-10
    _assert_close(R.real, reference_exp(alg, B), 1e-10)
    assert np.all(dec.multiplicity == 1)
    if signature not in COMPLEX:
        assert dec.bivectors.dtype == np.float64
        # planes: each part is s u ^ w with (u, w) coefficient-orthonormal
        u, w = dec.planes[..., 0, :], dec.planes[..., 1, :]
        assert np.allclose(np.einsum("...i,...i->...", u, w), 0, atol=1e-12)
        from galinear.core.rotors import wedge

        s = np.linalg.norm(dec.bivectors, axis=-1)
        assert np.allclose(s[..., None] * wedge(alg.n, u, w), dec.bivectors, atol=1e-10)


def test_cosh_sinhc_matches_mpmath_on_both_sides_of_the_series_switch():
    """cosh(sqrt(lam)) and sinh(sqrt(lam))/sqrt(lam) of complex lam (the rotor specification's cos and
    sinc at q = -lam) against 40-digit mpmath, 1e-15 relative (numpy's complex cosh and sinh reach
    5e-16 at |lam| = 30; the series below the switch 2e-16): boosts, rotations and complex
    invariants from |lam| = 1e-14 to 30, just below and above the switch |lam| = 0.01."""
    mpmath = pytest.importorskip("mpmath", reason="mpmath gives the reference values")
    from galinear._generated import rotor_spec

    switch = rotor_spec.SERIES_SWITCH["float64"]
    sizes = np.array([1e-14, 1e-8, 1e-4, 0.5 * switch, 0.999 * switch, 1.001 * switch, 2 * switch, 0.3, 4.0, 30.0])
    phases = np.exp(1j * np.array([0.0, np.pi, np.pi / 2, 0.7, -2.9]))
    lam = (sizes[:, None] * phases[None, :]).ravel()
    c, s = signatures._cosh_sinhc(lam)
    with mpmath.workdps(40):
        for value, c_j, s_j in zip(lam, c, s):
            z = mpmath.sqrt(mpmath.mpc(value.real, value.imag))
            want_c, want_s = mpmath.cosh(z), mpmath.sinh(z) / z
            assert abs(complex(c_j) - want_c) <= 1e-15 * abs(want_c), (value, c_j, want_c)
            assert abs(complex(s_j) - want_s) <= 1e-15 * abs(want_s), (value, s_j, want_s)


def test_decomposition_kinds_minkowski():
    """Cl(3,1): one boost (lambda > 0) and one rotation (lambda < 0), rotations sorted first."""
    alg = Algebra(3, 1)
    dec = alg.decompose(_bivector(alg, e14=2.0, e23=1.0))
    assert np.allclose(dec.squares, [-1.0, 4.0]) and np.allclose(dec.angles, [1.0, 2.0])
    assert np.allclose(dec.bivectors, [[0, 0, 0, 1.0, 0, 0], [0, 0, 2.0, 0, 0, 0]])  # e23, then e14
    cga = Algebra(4, 1)
    iso = cga.decompose(_bivector(cga, e12=0.7, e34=0.7))
    assert iso.multiplicity.tolist() == [2, 0]  # equal invariants: the group's sum in the first slot
    assert np.allclose(iso.bivectors.sum(axis=0), _bivector(cga, e12=0.7, e34=0.7)[1 + 5 : 1 + 15])


@given(seed=st.integers(0, 2**32 - 1),
       signature=st.sampled_from([(3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 2, 0), (4, 0, 1), (1, 2, 1)]),
       size=st.floats(1e-6, 8.0))
def test_property_exp_is_a_rotor_and_matches_expm(seed, signature, size):
    rng = np.random.default_rng(seed)
    alg = Algebra(*signature)
    B = alg.bivector(rng.standard_normal((2, alg.num_bivectors)))
    B *= size / np.abs(B).max()
    R = alg.exp(B)
    ref = reference_exp(alg, B)
    tol = 1e-12 * max(1.0, float(np.abs(ref).max())) * (1 + size) ** 2
    assert np.abs(R - ref).max() <= tol
    # exp(B) exp(-B) = 1
    one = alg.gp(R, alg.exp(-B))
    assert np.abs(one - alg.scalar(1.0)).max() <= tol * max(1.0, float(np.abs(ref).max()))


def test_matches_clifford_for_minkowski():
    """clifford's exp (a truncated series) agrees on small Cl(3,1) and PGA bivectors."""
    pytest.importorskip("clifford")
    rng = np.random.default_rng(3)
    for signature in [(3, 1, 0), (3, 0, 1)]:
        alg = Algebra(*signature)
        for _ in range(3):
            B = alg.bivector(rng.standard_normal(alg.num_bivectors) * 0.5)
            ref = alg.from_clifford(alg.to_clifford(B).exp())
            _assert_close(alg.exp(B), ref, 1e-9)


def test_exp_series_fallback_agrees(rng):
    alg = Algebra(4, 1)
    B = alg.bivector(rng.standard_normal((5, 10)))
    _assert_close(signatures.exp_series(alg, B), reference_exp(alg, B), 1e-12)
    _assert_close(alg.exp(B), signatures.exp_series(alg, B), 1e-12)


# ---------------------------------------------------------------------------- logarithm
@given(seed=st.integers(0, 2**32 - 1),
       signature=st.sampled_from([(2, 1, 0), (3, 1, 0), (1, 3, 0), (3, 0, 1), (4, 1, 0), (2, 2, 0), (4, 0, 1),
                                  (3, 2, 0), (2, 0, 2)]),
       size=st.floats(1e-6, 3.0))
def test_property_exp_log_round_trip(seed, signature, size):
    """exp(log R) = R for rotors R = exp(B) in every signature with n <= 5."""
    rng = np.random.default_rng(seed)
    alg = Algebra(*signature)
    B = alg.bivector(rng.standard_normal((3, alg.num_bivectors)))
    B *= size / np.abs(B).max()
    R = alg.exp(B)
    L = alg.log(R)
    assert np.abs(alg.grade(L, 2) - L).max() == 0
    err = np.abs(alg.exp(L) - R).max(axis=-1) / np.maximum(1.0, np.abs(R).max(axis=-1))
    assert err.max() <= 1e-8


def test_log_inverts_exp_for_small_bivectors(rng):
    for signature in [(3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 2, 0)]:
        alg = Algebra(*signature)
        B = alg.bivector(rng.standard_normal((20, alg.num_bivectors)) * 0.3)
        assert np.abs(alg.log(alg.exp(B)) - B).max() < 1e-10
        B32 = B.astype(np.float32)
        assert alg.log(alg.exp(B32)).dtype == np.float32


@pytest.mark.nojit
def test_log_special_cases():
    sta = Algebra(3, 1)
    assert np.abs(sta.log(sta.scalar(1.0))).max() == 0
    for coefficients in [{"e14": 3.0}, {"e12": np.pi / 2, "e34": 1.0}, {"e12": 0.99 * np.pi}, {"e12": 1.0, "e24": 1.0}]:
        R = sta.exp(_bivector(sta, **coefficients))
        _assert_close(sta.exp(sta.log(R)), R, 1e-10)
    pga = Algebra(3, 0, 1)
    T = pga.exp(_bivector(pga, e12=0.3, e13=0.4))  # a translator: log is its bivector
    assert np.allclose(pga.log(T), _bivector(pga, e12=0.3, e13=0.4), atol=1e-15)
    # -boost = exp(e14) exp(pi e23) in Cl(3,1) (e23 commutes with e14); in Cl(2,1) no plane is left
    minus_boost = -sta.exp(_bivector(sta, e14=1.0))
    _assert_close(sta.exp(sta.log(minus_boost)), minus_boost, 1e-12)
    cl21 = Algebra(2, 1)
    with pytest.raises(ValueError, match="no rotation plane"):
        cl21.log(-cl21.exp(cl21.blade("e13", 1.0)))
    with pytest.raises(ValueError, match="must be a rotor"):
        sta.log(sta.blade("e1"))
    with pytest.raises(ValueError, match="must be a rotor"):
        sta.log(sta.scalar(2.0))
