"""galinear.MultiVector: operators against clifford (and kingdon when installed), properties.

Tolerances, relative to the product of the operands' coefficient 2-norms: float64 1e-12 for
single products, 1e-10 for inverses and chains of products; float32 1e-5 (1e-4 for inverses,
whose rounding grows with the condition of x). References are computed in float64.
"""
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from galinear import Algebra, MultiVector
from galinear.core.duality import hodge_signs
from galinear.core.inverses import NotInvertibleError
from galinear.core.outermorphisms import outermorphism_matrix
from galinear.testing import assert_close, clifford_reference, default_rtol, norm_product, random_multivector

clifford = pytest.importorskip("clifford", reason="clifford is the reference implementation (test extra)")

SIGNATURES = [(3, 0, 0), (2, 0, 0), (3, 1, 0), (3, 0, 1), (4, 1, 0), (1, 1, 1), (2, 2, 0), (2, 0, 2)]


def _clifford_values(alg, mvs):
    return [alg.to_clifford(m.values.astype(np.float64)) for m in mvs]


@pytest.mark.parametrize("signature", SIGNATURES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_operators_match_clifford(signature, dtype, rng):
    """Products from clifford's own sparse tables (no per-algebra compilation), unary maps from
    clifford's grade lists."""
    alg = Algebra(*signature)
    a, b = random_multivector(rng, alg, (3,), dtype), random_multivector(rng, alg, (3,), dtype)
    A, B = a.values.astype(np.float64), b.values.astype(np.float64)
    tol = default_rtol(dtype)
    for op, name in [(lambda x, y: x * y, "gp"), (lambda x, y: x ^ y, "op"), (lambda x, y: x << y, "lc"),
                     (lambda x, y: x >> y, "rc")]:
        got = op(a, b)
        assert got.dtype == dtype
        assert_close(got.values, clifford_reference(alg, name, A, B), norm_product(a, b), tol)
    # clifford's | (its table imt) drops the terms with a scalar factor; ours keeps them (kingdon's |)
    from galinear.testing import _table_product

    layout = alg.clifford_layout()
    ref = _table_product(layout.imt, A, B) + A[:, :1] * B + B[:, :1] * A
    ref[:, 0] -= A[:, 0] * B[:, 0]
    assert_close((a | b).values, ref, norm_product(a, b), tol)
    grades = np.asarray(layout._basis_blade_order.grades)
    for got, sign in [(~a, (-1.0) ** (grades * (grades - 1) // 2)), (a.involute(), (-1.0) ** grades),
                      (a.conjugate(), (-1.0) ** (grades * (grades + 1) // 2))]:
        assert_close(got.values, A * sign, norm_product(a), tol)
    assert_close(a(2).values, A * (grades == 2), norm_product(a), tol)
    assert_close(a.grade(0, alg.n).values, A * ((grades == 0) | (grades == alg.n)), norm_product(a), tol)
    assert_close((2.5 * a - 1).values, 2.5 * A - np.eye(alg.dim)[0], norm_product(a) + 1, tol)


def test_operators_match_clifford_multivectors(rng):
    """~, involutions, grade calls, dual, inv and / through clifford.MultiVector objects (float64).

    One signature, Cl(3,1): clifford compiles its dual and inverse per algebra (about 20 s);
    every other signature checks x^-1 x = 1 directly (test_inverse_every_signature).
    """
    alg = Algebra(3, 1)
    a, b = random_multivector(rng, alg, (2,)), random_multivector(rng, alg, (2,))
    inv, quotient = a.inv(), a / b
    for i in range(2):
        A, B = _clifford_values(alg, (a[i], b[i]))
        assert_close((~a).values[i], (~A).value, norm_product(a[i]), 1e-12)
        assert_close(a.involute().values[i], A.gradeInvol().value, norm_product(a[i]), 1e-12)
        assert_close(a.conjugate().values[i], A.conjugate().value, norm_product(a[i]), 1e-12)
        assert_close(a(2).values[i], A(2).value, norm_product(a[i]), 1e-12)
        assert_close(a.dual().values[i], A.dual().value, norm_product(a[i]), 1e-12)
        assert_close(inv.values[i], A.inv().value, np.linalg.norm(inv.values[i]), 1e-10)
        assert_close(quotient.values[i], (A / B).value, np.linalg.norm(quotient.values[i]), 1e-10)


def test_clifford_round_trip_and_algebra_inference(rng):
    for signature in [(3, 0, 0), (3, 0, 1), (3, 1, 0)]:
        alg = Algebra(*signature)
        x = random_multivector(rng, alg, ())
        back = MultiVector.from_clifford(x.to_clifford())
        assert back.algebra == alg and back == x
        xb = random_multivector(rng, alg, (2, 3))
        assert MultiVector.from_clifford(xb.to_clifford(), alg) == xb
    with pytest.raises(ValueError, match="cannot combine multivectors"):
        random_multivector(rng, Algebra(3)) * random_multivector(rng, Algebra(2, 1))


def test_kingdon_interop():
    kingdon = pytest.importorskip("kingdon", reason="kingdon is optional (pip install kingdon)")
    rng = np.random.default_rng(7)
    for signature in [(3, 0, 0), (3, 0, 1), (3, 1, 0), (2, 0, 2)]:
        alg = Algebra(*signature)
        kalg = kingdon.Algebra(*signature)
        a, b = random_multivector(rng, alg, ()), random_multivector(rng, alg, ())
        ka, kb = a.to_kingdon(kalg), b.to_kingdon(kalg)
        assert MultiVector.from_kingdon(ka, alg) == a
        scale = norm_product(a, b)
        for ours, theirs in [(a * b, ka * kb), (a ^ b, ka ^ kb), (a | b, ka | kb), (a & b, ka & kb),
                             (a << b, ka.lc(kb)), (~a, ~ka)]:
            assert_close(ours.values, MultiVector.from_kingdon(theirs, alg).values, scale, 1e-12)
        kind = "hodge" if 0 in alg.metric else "polarity"  # what "auto" picks (kingdon's auto needs r <= 1)
        assert_close(a.dual().values, MultiVector.from_kingdon(ka.dual(kind), alg).values, norm_product(a), 1e-12)
        assert_close(a.undual().values, MultiVector.from_kingdon(ka.undual(kind), alg).values, norm_product(a), 1e-12)
    batch = random_multivector(rng, Algebra(3), (5,))
    assert MultiVector.from_kingdon(batch.to_kingdon()) == batch


@pytest.mark.nojit
def test_broadcasting_and_scalars(rng):
    alg = Algebra(3)
    a, b = random_multivector(rng, alg, (5, 1)), random_multivector(rng, alg, (1, 4))
    ab = a * b
    assert ab.shape == (5, 4)
    assert np.allclose(ab.values, alg.gp(a.values, b.values))
    x = random_multivector(rng, alg, ())
    assert (2 * x).allclose(x * 2.0) and (x + 1)["1"] == x["1"] + 1 and (1 - x).allclose(-(x - 1))
    assert (np.float64(3) * x).allclose(x * 3) and (x / 2).allclose(0.5 * x)
    assert (2 / x).allclose(2 * x.inv(), rtol=1e-10)
    assert (x ** 3).allclose(x * x * x) and (x ** 0) == 1.0 and (x ** -2).allclose(x.inv() * x.inv(), rtol=1e-9)
    assert (x ** 1) == x
    with pytest.raises(TypeError, match="integer powers"):
        x ** 0.5
    with pytest.raises(TypeError, match="cannot combine"):
        x * [1.0, 2.0]
    batch = x * np.arange(8.0)  # an array of numbers is a batch of scalars
    assert batch.shape == (8,) and np.allclose(batch.values, np.arange(8.0)[:, None] * x.values)
    x32 = x.astype(np.float32)
    assert (x32 * x32).dtype == np.float32 and (x32 + 1).dtype == np.float32 and (2 * x32).dtype == np.float32


def test_blade_access_and_indexing(rng):
    alg = Algebra(4)
    x = random_multivector(rng, alg, (3,))
    assert np.array_equal(x["e12"], x.values[:, 5]) and np.array_equal(x.e21, -x.values[:, 5])
    assert np.array_equal(x["1"], x.values[:, 0])
    x.e13 = 7.0
    assert np.all(x.values[:, 6] == 7.0)
    x["e31"] = 2.0
    assert np.all(x.e13 == -2.0)
    assert x[1] == MultiVector(alg, x.values[1]) and x[1:].shape == (2,) and x[..., 0].shape == ()
    assert len(x) == 3 and [m.shape for m in x] == [(), (), ()]
    with pytest.raises(KeyError, match="no blade named 'e15'"):
        x["e15"]
    with pytest.raises(AttributeError, match="no blade named"):
        x.e11 = 1.0
    with pytest.raises(AttributeError, match="fixed at construction"):
        x.values = None
    big = MultiVector.blade(Algebra(11), "e(10)(11)", 2.0)
    assert big["e(10)(11)"] == 2.0 and big["e(11)(10)"] == -2.0


@pytest.mark.nojit
def test_repr_and_latex():
    alg = Algebra(3)
    e1, e2, e3 = MultiVector.basis_vectors(alg)
    x = 1 + 2 * (e1 ^ e2) - e3
    assert str(x) == "1 - e3 + 2*e12"
    assert repr(x) == "MultiVector(Algebra(3), 1 - e3 + 2*e12)"
    assert x.latex() == r"1 - e_{3} + 2\,e_{12}" and x._repr_latex_() == r"$1 - e_{3} + 2\,e_{12}$"
    assert str(MultiVector.zeros(alg)) == "0"
    batch = MultiVector(alg, np.stack([x.values, -x.values]))
    assert "shape=(2,)" in repr(batch) and "grades=(0, 1, 2)" in repr(batch)
    assert "dtype=float32" in repr(x.astype(np.float32))
    assert repr(MultiVector.blade(Algebra(3, 0, 1), "e14")) == "MultiVector(Algebra(3, 0, 1), e14)"


# Cl(6) in float32 compiles the matrix path's kernels again in single precision (about 18 s
# cold): `make test-slow`; float64 and the other n = 6 signatures in float32 stay.
@pytest.mark.parametrize("signature, dtype", [
    pytest.param(signature, dtype, id=f"{np.dtype(dtype).name}-cl{''.join(map(str, signature))}",
                 marks=pytest.mark.slow if (signature, dtype) == ((6, 0, 0), np.float32) else ())
    for dtype in (np.float64, np.float32)
    for signature in [(1, 0, 0), (2, 0, 0), (3, 0, 0), (3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 2, 1), (6, 0, 0), (4, 2, 0),
                      (5, 0, 1)]])
def test_inverse_every_signature(signature, dtype, rng):
    """Closed forms up to n = 5, the matrix path above: x^-1 x = x x^-1 = 1."""
    alg = Algebra(*signature)
    x = random_multivector(rng, alg, (6,), dtype)
    y = x.inv()
    one = np.zeros(alg.dim)
    one[0] = 1
    scale = np.linalg.norm(x.values.astype(np.float64), axis=-1) * np.linalg.norm(y.values.astype(np.float64), axis=-1)
    assert_close((x * y).values, np.broadcast_to(one, x.values.shape), scale, default_rtol(dtype, "chain"))
    assert_close((y * x).values, np.broadcast_to(one, x.values.shape), scale, default_rtol(dtype, "chain"))
    assert y.dtype == dtype


@pytest.mark.parametrize("signature,name", [((3, 0, 0), "idempotent"), ((3, 1, 0), "null"), ((3, 0, 1), "e1"),
                                            ((6, 0, 0), "idempotent"), ((4, 1, 0), "null"), ((3, 0, 1), "zero")])
def test_not_invertible_raises(signature, name):
    alg = Algebra(*signature)
    basis = MultiVector.basis(alg)
    x = {
        "idempotent": (1 + basis["e1"]) * 0.5,
        "null": basis["e1"] + basis[alg.blade_names[alg.n]],  # e1 + e_n with e_n^2 = -1
        "e1": basis["e1"],  # the null vector of PGA
        "zero": MultiVector.zeros(alg),
    }[name]
    with pytest.raises(NotInvertibleError, match="not invertible"):
        x.inv()
    with pytest.raises(NotInvertibleError):
        basis["e2"] / x


@pytest.mark.parametrize("zero", [0.0, 0, -0.0, np.float32(0.0), np.array([1.0, 0.0])])
def test_division_by_a_zero_scalar_is_refused_like_a_zero_multivector(zero):
    """``e1 / 0.0`` raises the NotInvertibleError of ``e1 / MultiVector.zeros`` (not inf and nan)."""
    alg = Algebra(3)
    e1 = MultiVector.basis(alg)["e1"]
    with pytest.raises(NotInvertibleError, match="division by zero"):
        e1 / zero
    with pytest.raises(NotInvertibleError):
        e1 / MultiVector.zeros(alg)
    assert_close((e1 / 4.0).values, 0.25 * e1.values)
    assert_close((e1 / np.array([1.0, 2.0])).values, np.array([1.0, 0.5])[:, None] * e1.values)


SIG_STRATEGY = st.sampled_from([(3, 0, 0), (4, 0, 0), (3, 1, 0), (3, 0, 1), (2, 1, 1), (4, 1, 0), (2, 0, 2)])


@given(seed=st.integers(0, 2**32 - 1), signature=SIG_STRATEGY)
def test_property_associativity_and_inverse(seed, signature):
    rng = np.random.default_rng(seed)
    alg = Algebra(*signature)
    a, b, c = (random_multivector(rng, alg, ()) for _ in range(3))
    assert_close(((a * b) * c).values, (a * (b * c)).values, norm_product(a, b, c), 1e-12)
    assert_close(((a ^ b) ^ c).values, (a ^ (b ^ c)).values, norm_product(a, b, c), 1e-12)
    assert_close(((a & b) & c).values, (a & (b & c)).values, norm_product(a, b, c), 1e-12)
    y = a.inv()
    assert_close((y * a).values, MultiVector.scalar(alg, 1.0).values, norm_product(a, y), 1e-10)


@given(seed=st.integers(0, 2**32 - 1), signature=SIG_STRATEGY, kind=st.sampled_from(["auto", "hodge", "polarity"]))
def test_property_dual_round_trip(seed, signature, kind):
    rng = np.random.default_rng(seed)
    alg = Algebra(*signature)
    x = random_multivector(rng, alg, (2,))
    if kind == "polarity" and 0 in alg.metric:
        with pytest.raises(ValueError, match="kind='hodge'"):
            x.dual(kind)
        return
    assert x.dual(kind).undual(kind).allclose(x, rtol=0, atol=1e-12 * float(np.abs(x.values).max()))
    assert x.undual(kind).dual(kind).allclose(x, rtol=0, atol=1e-12 * float(np.abs(x.values).max()))


@given(seed=st.integers(0, 2**32 - 1), signature=SIG_STRATEGY, r=st.integers(0, 5), s=st.integers(0, 5))
def test_property_meet_join(seed, signature, r, s):
    """Regressive-product identities: grades, I as unit, complement of a meet, (anti)symmetry."""
    rng = np.random.default_rng(seed)
    alg = Algebra(*signature)
    n = alg.n
    r, s = min(r, n), min(s, n)
    a, b = random_multivector(rng, alg, ())(r), random_multivector(rng, alg, ())(s)
    m = a & b
    want = set() if r + s < n else {r + s - n}
    assert set(m.grades(tol=1e-12 * float(norm_product(a, b)))) <= want
    I = MultiVector.pseudoscalar(alg)
    assert (I & a).allclose(a, rtol=0, atol=1e-14) and (a & I).allclose(a, rtol=0, atol=1e-14)
    assert m.dual("hodge").allclose(a.dual("hodge") ^ b.dual("hodge"), rtol=0, atol=1e-12 * float(norm_product(a, b)))
    sign = (-1) ** ((n - r) * (n - s))
    assert (b & a).allclose(sign * m, rtol=0, atol=1e-12 * float(norm_product(a, b)))


def _exp_log_round_trip(seed, n, scale, kind, dtype):
    """exp(log R) = R for a rotor of Euclidean Cl(n) drawn from ``seed``: a random bivector of norm
    ``scale``, an isoclinic one (all k angles equal, planes turned by a random rotor) or a single
    plane (``kind``), in ``dtype``. float64 within 1e-10, float32 within 1e-4 (float32 rotors are
    unit only to rounding)."""
    rng = np.random.default_rng(seed)
    alg = Algebra(n)
    if kind == "random":
        b = rng.standard_normal(alg.num_bivectors)
    else:
        b = np.zeros(alg.num_bivectors)
        b[0] = 1.0  # e12
        if kind == "isoclinic":
            for j in range(1, n // 2):  # e12 + e34 + e56: every plane turned by the same angle
                b[alg.blade_names.index(f"e{2 * j + 1}{2 * j + 2}") - 1 - n] = 1.0
    B = MultiVector.bivector(alg, scale * b / np.linalg.norm(b))
    turn = MultiVector.bivector(alg, rng.standard_normal(alg.num_bivectors)).exp()
    R = (turn @ B).exp().astype(dtype)
    back = R.log().exp()
    assert back.dtype == dtype
    tol = 1e-10 if dtype == np.float64 else 1e-4
    assert np.max(np.abs(back.values.astype(np.float64) - R.values)) <= tol


#: The n of the property's float32 rotors. float32 compiles every product kernel of an algebra
#: again in single precision (Cl(5)'s dense product alone about 5 s with a cold numba cache): the
#: CI profile draws float32 rotors of Cl(3) only, whose float32 kernels
#: test_operators_match_clifford compiles too; the thorough profile every n, and
#: test_exp_log_euclidean_float32 (make test-slow) Cl(2), Cl(4) and Cl(5).
_EXP_LOG_FLOAT32_N = (3,) if settings.default.max_examples <= 40 else (2, 3, 4, 5)


@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 5), scale=st.floats(1e-6, 10.0),
       kind=st.sampled_from(["random", "isoclinic", "one plane"]),
       dtype=st.sampled_from([np.float64, np.float32]))
def test_property_exp_log_euclidean(seed, n, scale, kind, dtype):
    """exp(log R) = R for rotors of Euclidean Cl(n), n = 2..5 (n = 6 below), through the class: random
    bivectors of norm up to 10 (angles past pi), isoclinic ones (all k angles equal, planes
    turned by a random rotor) and single planes. float64 within 1e-10, float32 within 1e-4
    (float32 rotors are unit only to rounding; the n of :data:`_EXP_LOG_FLOAT32_N`). The other
    signatures: test_signatures.py."""
    assume(dtype == np.float64 or n in _EXP_LOG_FLOAT32_N)
    _exp_log_round_trip(seed, n, scale, kind, dtype)


# float32 in Cl(2), Cl(4) and Cl(5) compiles their product kernels again (Cl(5)'s about 5 s with a
# cold numba cache); in `make test`, test_property_exp_log_euclidean checks exp(log R) = R for
# float32 rotors in Cl(3) and for float64 rotors in every one of these algebras
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["random", "isoclinic", "one plane"])
@pytest.mark.parametrize("n", [2, 4, 5])
def test_exp_log_euclidean_float32(n, kind):
    for seed, scale in ((0, 1e-6), (1, 0.7), (2, 9.5)):
        _exp_log_round_trip(seed, n, scale, kind, np.float32)


@pytest.mark.slow  # Cl(6)'s dense products compile for about 20 s per float type with a cold numba cache
@pytest.mark.parametrize("kind", ["random", "isoclinic", "one plane"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_log_euclidean_cl6(kind, dtype):
    for seed, scale in ((0, 1e-6), (1, 0.7), (2, 9.5)):
        _exp_log_round_trip(seed, 6, scale, kind, dtype)


def test_meet_of_planes_is_their_line():
    """Cl(3): two planes through the origin meet in their common line; PGA: the join of two points."""
    alg = Algebra(3)
    e1, e2, e3 = MultiVector.basis_vectors(alg)
    line = (e1 ^ e2).meet(e2 ^ e3)
    assert line == e2
    pga = Algebra(3, 0, 1)  # e1 is the null vector: plane-based PGA, points are trivectors
    b = MultiVector.basis(pga)
    origin = b["e234"]
    point = origin + b["e134"] * 0 + b["e123"] * 0  # translate along e2 below
    moved = b["e234"] - 2.0 * b["e134"]  # the point (2, 0, 0) up to orientation conventions
    line = origin & moved  # the join (regressive product) of two points is the line through them
    assert (line ^ origin).allclose(0, atol=1e-14) and (line ^ moved).allclose(0, atol=1e-14)
    assert (line ^ point).allclose(0, atol=1e-14)


def test_project_reject(rng):
    alg = Algebra(4)
    u, v, x = (MultiVector.vector(alg, rng.standard_normal(4)) for _ in range(3))
    B = u ^ v
    p, q = x.project(B), x.reject(B)
    assert (p + q).allclose(x) and (p ^ B).allclose(0, atol=1e-12) and (q << B).allclose(0, atol=1e-12)
    assert q.allclose((x ^ B) * B.inv(), atol=1e-12)
    assert p(1).allclose(p, atol=1e-15)


def test_outermorphism(rng):
    alg = Algebra(4)
    M = rng.standard_normal((4, 4))
    a, b = random_multivector(rng, alg, ()), random_multivector(rng, alg, ())
    fa, fb = a.outermorphism(M), b.outermorphism(M)
    assert (a ^ b).outermorphism(M).allclose(fa ^ fb, atol=1e-11)
    I = MultiVector.pseudoscalar(alg)
    assert I.outermorphism(M).allclose(np.linalg.det(M) * I, atol=1e-12)
    vec = MultiVector.vector(alg, rng.standard_normal(4))
    assert np.allclose(vec.outermorphism(M).values[1:5], M @ vec.values[1:5])
    # the outermorphism of a rotation matrix is the rotor's sandwich on every grade
    R = MultiVector.bivector(alg, rng.standard_normal(6)).exp()
    rot = alg.rotation_matrix(R.values)
    assert a.outermorphism(rot).allclose(R @ a, atol=1e-12)
    batch = outermorphism_matrix(alg, np.stack([M, np.eye(4)]))
    assert batch.shape == (2, 16, 16) and np.allclose(batch[1], np.eye(16))
    with pytest.raises(ValueError, match=r"\(\.\.\., 4, 4\)"):
        a.outermorphism(np.eye(3))


def test_hodge_signs_definition():
    for n in range(0, 6):
        alg = Algebra(n, 0, 0)
        target, sign = hodge_signs(n)
        I = alg.blade(alg.blade_names[-1])
        for j in range(alg.dim):
            e = np.zeros(alg.dim)
            e[j] = 1
            star = np.zeros(alg.dim)
            star[target[j]] = sign[j]
            assert np.allclose(alg.op(e, star), I)


def test_sandwich_exp_log_and_norms(rng):
    alg = Algebra(3)
    B = MultiVector.bivector(alg, rng.standard_normal(3))
    R = B.exp()
    x = random_multivector(rng, alg, ())
    assert (R @ x).allclose(R * x * ~R) and R.log().exp().allclose(R, atol=1e-12)
    assert np.isclose(float(R.norm()), 1.0) and (x.normalized().norm() - 1) < 1e-12
    with pytest.raises(TypeError, match="needs a MultiVector"):
        R @ 2.0


def test_pickle_and_copy():
    import copy
    import pickle

    x = MultiVector(Algebra(3, 1), np.arange(16.0))
    for y in (pickle.loads(pickle.dumps(x)), copy.copy(x), copy.deepcopy(x)):
        assert y == x and y.algebra == x.algebra
    assert not np.shares_memory(copy.deepcopy(x).values, x.values)
