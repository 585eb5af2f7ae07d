"""log wherever exp works: round trips in 11 algebras against an independent reference.

Reference: exp(B) = expm(L_B)[:, 0], with L_B the left-multiplication matrix built here from a
product table written from scratch (bitmask blades, the reorder sign counted pair by pair, the
metric applied to shared vectors); nothing of galinear's product code is used. Tolerances,
relative to max(1, max |R|): float64 round trips 1e-12 (1e-11 for Cl(8) and large rotors, see
test_large_rotor_relative_accuracy), log(exp B) = B to 1e-11 on the principal branch (every
rotation angle below pi/2), float32 rotors 2e-5.
"""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

scipy_linalg = pytest.importorskip("scipy.linalg", reason="scipy's expm is the reference")

from galinear import Algebra, blades  # noqa: E402

ALGEBRAS = [(3,), (4,), (6,), (8,), (3, 0, 1), (1, 3), (3, 1), (4, 1), (2, 2), (0, 3), (0, 0, 2)]


def _reorder_sign(a: int, b: int) -> float:
    a >>= 1
    swaps = 0
    while a:
        swaps += bin(a & b).count("1")
        a >>= 1
    return -1.0 if swaps & 1 else 1.0


_TABLES = {}


def product_table(metric):
    """T[i, j, k]: coefficient of blade k in blade_i * blade_j (shortlex positions), from scratch."""
    if metric not in _TABLES:
        n = len(metric)
        order = [int(m) for m in blades.shortlex_bitmasks(n)]
        position = {m: i for i, m in enumerate(order)}
        T = np.zeros((2**n, 2**n, 2**n))
        for i, a in enumerate(order):
            for j, b in enumerate(order):
                sign = _reorder_sign(a, b)
                for bit in range(n):
                    if a & b & (1 << bit):
                        sign *= metric[bit]
                T[i, j, position[a ^ b]] = sign
        _TABLES[metric] = T
    return _TABLES[metric]


def reference_exp(alg, B):
    """expm of the left-multiplication matrix of each bivector, applied to 1; float64."""
    T = product_table(alg.metric)
    B = np.atleast_2d(np.asarray(B, dtype=np.float64))
    return np.array([scipy_linalg.expm(np.einsum("i,ijk->kj", b, T))[:, 0] for b in B])


def bivector(alg, **coefficients):
    x = np.zeros(alg.dim)
    for name, value in coefficients.items():
        x[alg.blade_names.index(name)] = value
    return x


def round_trip_error(alg, R):
    """max over rows of |expm(L_log R) - R| / max(1, |R|), after checking log R is a bivector."""
    R = np.atleast_2d(R)
    L = alg.log(R)
    assert L.dtype == R.dtype and L.shape == R.shape
    assert np.abs(L * (alg.grades != 2)).max() == 0, "log must return a pure bivector"
    R64 = R.astype(np.float64)
    back = reference_exp(alg, L)
    return float((np.abs(back - R64).max(axis=-1) / np.maximum(1.0, np.abs(R64).max(axis=-1))).max())


def principal_bivectors(alg, rng, rows, size=1.2):
    """Random bivectors of coefficient 2-norm `size` < pi/2, so every rotation angle is below pi/2."""
    b = rng.standard_normal((rows, alg.num_bivectors))
    b *= size / np.linalg.norm(b, axis=-1, keepdims=True)
    return alg.bivector(b)


@pytest.mark.parametrize("signature", ALGEBRAS)
def test_round_trips_and_principal_branch(signature, rng):
    alg = Algebra(*signature)
    rows = 3 if alg.n == 8 else 12
    B = principal_bivectors(alg, rng, rows)
    R = reference_exp(alg, B)
    tol = 1e-11 if alg.n == 8 else 1e-12
    assert round_trip_error(alg, R) <= tol
    np.testing.assert_allclose(alg.log(R), B, atol=1e-11 * max(1, alg.n // 4))


# float32 compiles the kernels of each algebra again in single precision (Cl(6) alone takes
# tens of seconds with a cold numba cache). `make test` runs float32 in the small algebras, one of
# each kind of metric (Euclidean, degenerate, Minkowski, negative definite, null); the larger
# ones in `make test-slow`.
_FLOAT32_FAST = [(3,), (3, 0, 1), (3, 1), (0, 3), (0, 0, 2)]


@pytest.mark.parametrize("signature", [pytest.param(s, marks=() if s in _FLOAT32_FAST else pytest.mark.slow)
                                       for s in ALGEBRAS])
def test_float32_rotors_give_float32_logs(signature, rng):
    """Rotors rounded to float32 from the float64 reference: float32 logs, round trips to 2e-5."""
    alg = Algebra(*signature)
    R = reference_exp(alg, principal_bivectors(alg, rng, 3 if alg.n == 8 else 12))
    assert round_trip_error(alg, R.astype(np.float32)) <= 2e-5


@pytest.mark.parametrize("signature", [s for s in ALGEBRAS if s != (0, 0, 2)])
def test_minus_one_and_minus_R(signature, rng):
    """-1 = exp(pi b) for any plane b^2 = -1, and -R = R exp(pi b) for a plane commuting with log R."""
    alg = Algebra(*signature)
    minus_one = -alg.scalar(1.0)
    L = alg.log(minus_one)
    assert np.isclose(np.sqrt(-alg.scalar_product(L, L)), np.pi)  # a rotation by pi (a plane b^2 = -1)
    assert round_trip_error(alg, minus_one) <= 1e-12
    rows = 2 if alg.n == 8 else 6
    R = reference_exp(alg, principal_bivectors(alg, rng, rows, size=0.8))
    if signature == (2, 2):  # split signature: -exp(B) has a log only when B has a rotation part
        R = reference_exp(alg, bivector(alg, e12=0.7, e34=0.4, e13=0.1))
    assert round_trip_error(alg, -R) <= (1e-11 if alg.n == 8 else 1e-12)


def test_no_real_logarithm_is_named():
    null = Algebra(0, 0, 2)
    assert round_trip_error(null, reference_exp(null, bivector(null, e12=2.5))) <= 1e-15  # 1 + B
    with pytest.raises(ValueError, match=r"no rotation plane \(b\^2 = -1\)"):
        null.log(-null.scalar(1.0))
    cl21 = Algebra(2, 1)  # -boost: the only direction orthogonal to e13 is e2
    with pytest.raises(ValueError, match="no real logarithm"):
        cl21.log(-cl21.exp(cl21.blade("e13", 0.8)))
    sta = Algebra(3, 1)
    with pytest.raises(ValueError, match="must be a rotor"):
        sta.log(sta.blade("e1") + sta.scalar(1.0))


@pytest.mark.parametrize("perturbation", [0.0, 1e-12, 1e-10, 1e-8, 1e-5, -1e-8])
def test_nearly_null_rotations(perturbation):
    """The issue's case: (1 + eps) e12 - e24 in Cl(3,1), null at eps = 0 (also in Cl(1,3), Cl(4,1))."""
    for signature, coefficients in [((3, 1), {"e12": 1 + perturbation, "e24": -1.0}),
                                    ((1, 3), {"e12": 1 + perturbation, "e13": 1.0}),
                                    ((4, 1), {"e12": 1 + perturbation, "e25": 1.0, "e34": 0.3})]:
        alg = Algebra(*signature)
        B = bivector(alg, **coefficients)
        R = reference_exp(alg, B)
        assert round_trip_error(alg, R) <= 1e-13
        np.testing.assert_allclose(alg.log(R), np.atleast_2d(B), atol=1e-13)


@pytest.mark.parametrize("signature", [(4,), (6,), (8,), (4, 1)])
def test_isoclinic_and_quarter_turns(signature):
    alg = Algebra(*signature)
    quarter = alg.blade("e1234")  # exp(pi/2 (e12 + e34)), planes undetermined
    assert round_trip_error(alg, quarter) <= 1e-12
    for angle in (0.3, 1.2):
        B = bivector(alg, e12=angle, e34=angle)
        R = reference_exp(alg, B)
        assert round_trip_error(alg, R) <= 1e-12
        np.testing.assert_allclose(alg.log(R), np.atleast_2d(B), atol=1e-12)
        assert round_trip_error(alg, -R) <= 1e-12
    one_quarter = reference_exp(alg, bivector(alg, e12=np.pi / 2, e34=0.4))
    assert round_trip_error(alg, one_quarter) <= 1e-12


# (coefficients, whether -exp(B) has a logarithm): it has one exactly when a rotation plane
# (b^2 = -1) commutes with B, e.g. none is left beside two boosts in Cl(2,2)
NAMED = {
    (3, 0, 1): [(dict(e12=0.3, e13=-2.0), True), (dict(e34=0.9, e12=1.5), True), (dict(e23=np.pi / 2, e14=0.7), True)],
    (1, 3): [(dict(e12=2.0), True), (dict(e34=1.1, e12=0.5), True), (dict(e23=np.pi / 2, e14=0.1), True)],
    (3, 1): [(dict(e14=3.0), True), (dict(e12=np.pi / 2, e34=1.0), True), (dict(e12=0.99 * np.pi), True),
             (dict(e12=1.0, e24=1.0), False)],  # -(null rotation): none
    (4, 1): [(dict(e15=2.0, e23=0.4), True), (dict(e12=0.5, e34=0.5, e15=0.2), True), (dict(e45=1.0, e14=1.0), True)],
    (2, 2): [(dict(e13=0.6, e24=0.4), False), (dict(e12=0.5, e34=0.3), True), (dict(e14=0.3, e23=-0.2, e12=0.4), None)],
    (0, 3): [(dict(e12=3.0), True), (dict(e13=np.pi - 1e-9), True)],
}


@pytest.mark.parametrize("signature", list(NAMED))
def test_named_cases_in_each_signature(signature):
    alg = Algebra(*signature)
    for coefficients, minus_has_log in NAMED[signature]:
        R = reference_exp(alg, bivector(alg, **coefficients))
        assert round_trip_error(alg, R) <= 1e-12, coefficients
        if minus_has_log:
            assert round_trip_error(alg, -R) <= 1e-12, coefficients
        elif minus_has_log is False:
            with pytest.raises(ValueError, match="no rotation plane"):
                alg.log(-R)


def test_large_rotor_relative_accuracy():
    """|R| ~ 1e3 to 1e6: the round trip stays within 1e-11 relative (measured 4.9e-13 at |R| = 1278, 6.6e-13 at 8.5e5)."""
    cga = Algebra(4, 1)
    for coefficients in [dict(e15=7.5, e23=0.4), dict(e45=7.9, e12=1.0, e34=0.2), dict(e15=7.0, e25=6.0, e13=0.5),
                         dict(e45=14.0, e12=0.3)]:
        R = reference_exp(cga, bivector(cga, **coefficients))
        assert round_trip_error(cga, R) <= 1e-11, coefficients


@given(st.lists(st.floats(-3, 3), min_size=10, max_size=10), st.sampled_from([(3, 0, 1), (1, 3), (3, 1), (4, 1)]),
       st.sampled_from([1.0, -1.0]))
def test_exp_log_round_trip_property(values, signature, sign):
    alg = Algebra(*signature)
    R = sign * alg.exp(alg.bivector(np.array(values[: alg.num_bivectors])))
    try:
        err = round_trip_error(alg, R)
    except ValueError as error:
        assert sign < 0 and "no rotation plane" in str(error)
        return
    assert err <= 1e-9


# a boost plane (b^2 = +1) and a rotation plane (b^2 = -1) commuting with it, per signature; None: no rotation
BOOSTS = {(1, 1): ("e12", None), (2, 1): ("e13", None), (3, 1): ("e14", "e23"), (1, 3): ("e12", "e34"),
          (4, 1): ("e15", "e23"), (2, 2): ("e13", None), (5, 1): ("e16", "e23")}
RAPIDITIES = [1e-8, 1e-4, 1e-3, 0.1, 1.0, 5.0, 19.0, 20.0, 30.0, 100.0, 300.0, 700.0]
ANGLES = [0.0, np.pi / 8, np.pi / 4, 3 * np.pi / 8, np.pi / 2, 5 * np.pi / 8, 3 * np.pi / 4, 7 * np.pi / 8, np.pi]
EPS = np.finfo(np.float64).eps


def boost_rotor(alg, boost, rotation, phi, theta):
    """(cosh phi + sinh phi b)(cos theta + sin theta w) from its factors (no exp), and its bivector."""
    b, w = bivector(alg, **{boost: 1.0}), bivector(alg, **{rotation: 1.0}) if rotation else np.zeros(alg.dim)
    R = alg.gp(alg.scalar(np.cosh(phi)) + np.sinh(phi) * b, alg.scalar(np.cos(theta)) + np.sin(theta) * w)
    return R, phi * b + theta * w


@pytest.mark.parametrize("signature", list(BOOSTS))
def test_boost_logarithm_to_the_float64_limit(signature):
    """log of a boost of rapidity 1e-8..700 times a commuting rotation by 0..pi, from its factors.

    The bivector comes back within 16 ULPs of max(1, |B|) (measured: 2 ULPs at rapidity 100 and
    1 at 700), and exp(log R) = R within the same relative bound, wherever scipy's logm of the
    16 x 16 (or smaller) left-multiplication matrix is usable the two agree: logm's own error grows like
    eps e^(2 rapidity) (1e-11 at rapidity 5, order 1 at 20), so it is the reference up to rapidity 5
    (tolerance 1e-10). At theta = pi the logarithm's rotation angle may be -pi: there only the
    round trip is compared. Cl(5,1) (three planes, the third at rest): at theta = pi/2 the quarter
    turn leaves two of the three C_j zero, so <R>_2 shows that factor alone and the boost comes
    from what it leaves of R; a small boost's invariant (rapidity^2 cos^2 theta) merges with the
    resting plane's 0 within MERGE_TOL, so both share one weight and B is off by up to
    rapidity^3 / 3 (3e-10 at rapidity 1e-3), which its tolerance adds. Beyond theta = pi/2 its
    logarithm may take the pi in the resting plane instead (another valid logarithm): there only
    the round trip is compared.
    """
    alg = Algebra(*signature)
    boost, rotation = BOOSTS[signature]
    three = alg.n // 2 == 3
    angles = ANGLES if rotation else [0.0]
    cases = [(phi, theta) for phi in RAPIDITIES for theta in angles]
    R, B = (np.array(column) for column in zip(*(boost_rotor(alg, boost, rotation, *case) for case in cases)))
    L = alg.log(R)  # one batch: every row is handled on its own
    back = alg.exp(L)
    for row, (phi, theta) in enumerate(cases):
        tol = 16 * EPS * max(1.0, float(np.abs(B[row]).max()))
        assert np.abs(back[row] - R[row]).max() / max(1.0, float(np.abs(R[row]).max())) <= tol, (phi, theta)
        if theta <= np.pi / 2 if three else theta < np.pi:
            assert np.abs(L[row] - B[row]).max() <= tol, (phi, theta, np.abs(L[row] - B[row]).max())
        if phi <= 5.0 and theta < np.pi:
            from galinear.core.signatures import left_matrix

            reference = scipy_linalg.logm(left_matrix(alg, R[row][None])[0])[:, 0]
            assert np.abs(L[row] - reference.real).max() <= 1e-10, (phi, theta)


def test_boost_logarithm_of_a_batch_and_the_reason_given_before():
    """The rotors of the report: a pure boost of rapidity 20 and 30 in the STA, in one batch."""
    sta = Algebra(3, 1)
    B = np.stack([bivector(sta, e14=20.0), bivector(sta, e14=30.0), bivector(sta, e14=700.0, e23=1.0)])
    np.testing.assert_allclose(sta.log(sta.exp(B)), B, rtol=0, atol=16 * EPS * 700)
    split = Algebra(2, 2)  # two commuting boosts, one of them large
    B = bivector(split, e13=300.0, e24=0.5)
    np.testing.assert_allclose(split.log(split.exp(B)), B, rtol=0, atol=16 * EPS * 300)
