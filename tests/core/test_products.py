"""Products, involutions and helpers of galinear.Algebra against the clifford package.

Tolerances (relative to the product of the input 2-norms, per row; see galinear.testing):
float64 1e-12, float32 1e-5 (references in float64 from the same float32 inputs).
"""
import numpy as np
import pytest

from galinear import Algebra, blades
from galinear.core import products
from galinear.testing import assert_matches_clifford, clifford_reference

pytest.importorskip("clifford", reason="clifford is the reference implementation (test extra)")

BINARY = ["gp", "op", "lc", "rc"]
UNARY = ["reverse", "involute", "conjugate", "norm"]
DTYPES = [np.float64, np.float32]


def _random(rng, alg, rows, dtype=np.float64):
    return rng.standard_normal((rows, alg.dim)).astype(dtype)


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("dtype", DTYPES)
def test_products_match_clifford_euclidean(n, dtype, rng):
    alg = Algebra(n)
    rows = 4 if n < 8 else 2
    a, b = _random(rng, alg, rows, dtype), _random(rng, alg, rows, dtype)
    for name in BINARY:
        assert_matches_clifford(alg, name, a, b, method="table")
        assert alg.gp(a, b, method="table").dtype == dtype
    assert_matches_clifford(alg, "scalar_product", a, b)
    for name in UNARY:
        assert_matches_clifford(alg, name, a)


@pytest.mark.parametrize("signature", [(2, 1, 0), (1, 3, 0), (0, 3, 0), (2, 1, 1), (3, 1, 1), (4, 1, 0)])
def test_products_match_clifford_other_signatures(signature, rng):
    alg = Algebra(*signature)
    assert alg.signature == signature
    a, b = _random(rng, alg, 4), _random(rng, alg, 4)
    for name in BINARY:
        assert_matches_clifford(alg, name, a, b)
    assert_matches_clifford(alg, "scalar_product", a, b)
    for name in UNARY:
        assert_matches_clifford(alg, name, a)


@pytest.mark.nojit
@pytest.mark.parametrize("signature", [(3, 0, 0), (1, 1, 1)])
def test_products_small_nojit(signature, rng):
    """The representative subset also run with NUMBA_DISABLE_JIT=1."""
    alg = Algebra(*signature)
    a, b = _random(rng, alg, 3), _random(rng, alg, 3)
    for name in ("gp", "op", "lc"):  # clifford's MultiVector operators (a * b, a ^ b, a << b)
        assert_matches_clifford(alg, name, a, b, method="table", route="operators")
    assert_matches_clifford(alg, "rc", a, b, method="table")
    assert_matches_clifford(alg, "gp", a.astype(np.float32), b.astype(np.float32), method="table")


@pytest.mark.nojit
@pytest.mark.parametrize("signature", [(3, 0, 0), (2, 1, 1), (4, 0, 0)])
def test_bitmask_kernel_matches_table_kernel(signature, rng):
    alg = Algebra(*signature)
    a, b = _random(rng, alg, 5), _random(rng, alg, 5)
    a[0, ::3] = 0  # exercise the zero skipping
    for name, code in products.KINDS.items():
        expected = getattr(alg, name)(a, b, method="table")
        out = np.empty_like(a)
        finite = products.bitmask_product(
            alg._to_bitmask(a), alg._to_bitmask(b), out, alg._metric_array, code
        )
        assert finite
        np.testing.assert_allclose(alg._from_bitmask(out), expected, rtol=0, atol=1e-13)


def test_large_n_uses_bitmask_kernel_and_is_correct(rng):
    """Cl(11) (above the table limit): vector identities and associativity on sparse inputs."""
    alg = Algebra(11)
    u, v, w = rng.standard_normal((3, 11))
    U, V, W = alg.vector(u), alg.vector(v), alg.vector(w)
    uv = alg.gp(U, V)
    assert uv[0] == pytest.approx(u @ v, rel=1e-13)
    np.testing.assert_allclose(alg.bivector_coefficients(uv), alg.bivector_coefficients(alg.op(U, V)), atol=1e-14)
    np.testing.assert_allclose(uv[1 + 11 + 55 :], 0, atol=0)
    # u v + v u = 2 u.v
    np.testing.assert_allclose(uv + alg.gp(V, U), alg.scalar(2 * (u @ v)), atol=1e-13)
    left = alg.gp(alg.gp(U, V), W)
    right = alg.gp(U, alg.gp(V, W))
    np.testing.assert_allclose(left, right, atol=1e-13)
    # u _| (v ^ w) = (u.v) w - (u.w) v
    np.testing.assert_allclose(alg.lc(U, alg.op(V, W)), (u @ v) * W - (u @ w) * V, atol=1e-13)


def test_a_product_estimated_above_a_minute_is_refused_unless_asked(monkeypatch, rng):
    """Dense Cl(20) (15,700 s by the estimate) is refused at once; GALINEAR_ALLOW_SLOW=1 runs it.

    The opt-in is checked on Cl(11) with the kernel's speed set a million times lower, so that
    the estimate passes the minute while the product itself takes milliseconds."""
    monkeypatch.delenv(products.ALLOW_SLOW_VARIABLE, raising=False)
    from galinear._limits import TooLargeError

    big = Algebra(20)
    x = np.ones((1, big.dim))
    with pytest.raises(TooLargeError, match=r"about \d+ s .* GALINEAR_ALLOW_SLOW=1"):
        big.gp(x, x)
    alg = Algebra(11)
    u, v = alg.vector(rng.standard_normal((2, 11)))
    monkeypatch.setattr(products, "BITMASK_TERMS_PER_SECOND", 1.0)
    with pytest.raises(TooLargeError, match="more than the 60 s"):
        alg.gp(u, v)
    monkeypatch.setenv(products.ALLOW_SLOW_VARIABLE, "1")
    with pytest.warns(UserWarning, match="Dense multivectors of Cl\\(11\\) are expensive"):
        uv = alg.gp(u, v)
    assert uv[0] == pytest.approx(float(alg.vector_coefficients(u) @ alg.vector_coefficients(v)), rel=1e-13)


def test_broadcasting_and_shapes(rng):
    alg = Algebra(3)
    a = rng.standard_normal((2, 1, 8))
    b = rng.standard_normal((5, 8))
    out = alg.gp(a, b)
    assert out.shape == (2, 5, 8)
    for i in range(2):
        for j in range(5):
            np.testing.assert_allclose(out[i, j], alg.gp(a[i, 0], b[j]), rtol=0, atol=1e-15)
    assert alg.gp(np.zeros((0, 8)), np.zeros((0, 8))).shape == (0, 8)
    assert alg.scalar_product(a, b).shape == (2, 5)
    assert alg.norm(b).shape == (5,)
    # integers are promoted to float64, float32 with float64 to float64
    assert alg.gp(np.ones(8, dtype=int), np.ones(8)).dtype == np.float64
    assert alg.gp(np.ones(8, np.float32), np.ones(8)).dtype == np.float64


def test_grade_projection_and_constructors(rng):
    alg = Algebra(4)
    x = rng.standard_normal(alg.dim)
    ref = clifford_reference(alg, "reverse", x)  # touch the clifford layout once
    assert ref.shape == (alg.dim,)
    layout = alg.clifford_layout()
    mv = layout.MultiVector(x.copy())
    for g in range(5):
        np.testing.assert_array_equal(alg.grade(x, g), mv(g).value)
    np.testing.assert_array_equal(alg.grade(x, 0, 2, 4), (mv(0) + mv(2) + mv(4)).value)
    np.testing.assert_array_equal(alg.grade(x, [1, 3]), (mv(1) + mv(3)).value)
    # constructors against clifford's basis blades
    blades_cf = layout.blades
    np.testing.assert_array_equal(alg.blade("e13", 2.5), (2.5 * blades_cf["e13"]).value)
    np.testing.assert_array_equal(alg.blade("1"), layout.scalar.value)
    b = rng.standard_normal(6)
    expected = sum(c * blades_cf["e%d%d" % (i + 1, j + 1)] for c, (i, j) in zip(b, blades.bivector_pairs(4)))
    np.testing.assert_allclose(alg.bivector(b), expected.value, atol=0)
    v = rng.standard_normal(4)
    np.testing.assert_allclose(alg.vector(v), sum(c * blades_cf["e%d" % (i + 1)] for i, c in enumerate(v)).value)
    np.testing.assert_array_equal(alg.bivector_coefficients(alg.bivector(b)), b)
    np.testing.assert_array_equal(alg.vector_coefficients(alg.vector(v)), v)
    assert alg.scalar(3.0)[0] == 3.0 and alg.scalar(np.ones((2, 3))).shape == (2, 3, 16)


def test_order_permutation_round_trip(rng):
    alg = Algebra(5)
    x = rng.standard_normal((3, alg.dim))
    np.testing.assert_array_equal(alg._from_bitmask(alg._to_bitmask(x)), x)
    np.testing.assert_array_equal(alg.shortlex_index[alg.bitmasks], np.arange(alg.dim))
    assert alg.blade_names[:5] == ("1", "e1", "e2", "e3", "e4")


def test_clifford_round_trip(rng):
    alg = Algebra(2, 1, 0)
    x = rng.standard_normal((2, 3, alg.dim))
    mvs = alg.to_clifford(x)
    assert mvs.shape == (2, 3)
    np.testing.assert_array_equal(alg.from_clifford(mvs), x)
    np.testing.assert_array_equal(alg.from_clifford(alg.to_clifford(x[0, 0])), x[0, 0])
    with pytest.raises(ValueError, match="metric"):
        Algebra(3).from_clifford(mvs[0, 0])


@pytest.mark.parametrize("n", [2, 3, 5])
def test_inverse_of_versors(n, rng):
    alg = Algebra(n)
    vectors = alg.vector(rng.standard_normal((3, 4, n)))
    versor = alg.gp(alg.gp(vectors[0], vectors[1]), vectors[2])  # a product of three vectors
    inv = alg.inverse(versor)
    np.testing.assert_allclose(alg.gp(versor, inv), alg.scalar(np.ones(4)), atol=1e-12)
    assert_matches_clifford(alg, "inverse", versor, rtol=1e-10)
    rotor = alg.scalar(1.0) + alg.blade("e12")  # x x~ = 2: a versor
    np.testing.assert_allclose(alg.inverse(rotor), (alg.scalar(1.0) - alg.blade("e12")) / 2, atol=1e-15)
    # 1 + e1 has x x~ = 2 + 2 e1: not a versor
    with pytest.raises(ValueError, match="versor"):
        alg.inverse(alg.scalar(1.0) + alg.blade("e1"))


def test_generated_method(rng):
    """'generated' uses galinear._generated.find_kernel; without a kernel it is a clear error."""
    from galinear._generated import find_kernel

    for n in (3, 4):
        alg = Algebra(n)
        a, b = _random(rng, alg, 6), _random(rng, alg, 6)
        expected = alg.gp(a, b, method="table")
        if find_kernel("gp", alg.metric) is None:
            with pytest.raises(ValueError, match="no generated kernel"):
                alg.gp(a, b, method="generated")
            np.testing.assert_array_equal(alg.gp(a, b, method="auto"), expected)
        else:
            np.testing.assert_allclose(alg.gp(a, b, method="generated"), expected, rtol=0, atol=1e-13)
            np.testing.assert_allclose(alg.gp(a, b), expected, rtol=0, atol=1e-13)
    with pytest.raises(ValueError, match="method"):
        Algebra(3).gp(a[:, :8], b[:, :8], method="fast")


# ---------------------------------------------------------------------------- one compile per dtype
def _array_kinds(x):
    """x (rows, dim) as the kinds of array callers hand in: writable, read-only, strided (not
    contiguous), and its first row alone (broadcast against the other operand)."""
    frozen = x.copy()
    frozen.setflags(write=False)
    return [x, frozen, np.repeat(x, 2, axis=0)[::2], x[:1]]


@pytest.mark.parametrize("method", ["table", "generated"])
def test_each_product_kernel_compiles_once_per_dtype(monkeypatch, rng, method):
    """numba types read-only, writable and non-contiguous arrays differently; the products hand
    their kernels one kind, so inputs of every kind add no second compile of a kernel."""
    from galinear._numba import jit

    alg = Algebra(3)
    if method == "table":
        kernel = jit(products.table_product.py_func)  # a new dispatcher: only this test's signatures
        monkeypatch.setattr(products, "table_product", kernel)
    else:
        kernel = jit(products._generated_kernel("gp", alg.metric).py_func)
        monkeypatch.setattr(products, "_generated_kernel", lambda kind, metric: kernel)
    for dtype in DTYPES:
        tol = 1e-5 if dtype == np.float32 else 1e-12
        for x in _array_kinds(_random(rng, alg, 4, dtype)):
            for y in _array_kinds(_random(rng, alg, 4, dtype)):
                want = clifford_reference(alg, "gp", x, y)
                np.testing.assert_allclose(alg.gp(x, y, method=method), want, rtol=0, atol=tol)
                if x.shape == y.shape:  # the products' own entry point, without Algebra's copies
                    got = products.multiply(alg.metric, "gp", x, y, method)
                    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
    signatures = [", ".join(map(str, s)) for s in kernel.signatures]
    assert len(signatures) == len(DTYPES), (
        f"the {method} kernel compiled {len(signatures)} times for {len(DTYPES)} dtypes:\n"
        + "\n".join(signatures))


# ---------------------------------------------------------------------------- bad input
@pytest.mark.nojit
def test_bad_input_errors():
    alg = Algebra(3)
    with pytest.raises(ValueError, match=r"last axis of length 2\*\*n = 8"):
        alg.gp(np.ones(7), np.ones(8))
    with pytest.raises(ValueError, match="NaN or infinity"):
        alg.gp(np.full(8, np.nan), np.ones(8))
    with pytest.raises(ValueError, match="NaN or infinity"):
        alg.gp(np.ones((40, 8)), np.r_[np.ones(7), np.inf])
    with pytest.raises(ValueError, match="NaN or infinity"):
        alg.reverse(np.r_[np.ones(7), np.inf])
    with pytest.raises(TypeError, match="complex"):
        alg.gp(np.ones(8) * 1j, np.ones(8))
    with pytest.raises(ValueError, match="would need"):
        Algebra(21)
    with pytest.raises(ValueError, match="non-negative"):
        Algebra(-1)
    with pytest.raises(ValueError, match="grades must be"):
        alg.grade(np.ones(8), 4)
    with pytest.raises(ValueError, match="no blade named"):
        alg.blade("e14")
    with pytest.raises(ValueError, match=r"C\(n, 2\) = 3"):
        alg.bivector(np.ones(4))
    with pytest.raises(ValueError, match="last axis n = 3"):
        alg.vector(np.ones(2))
    with pytest.raises(ValueError, match="either"):
        Algebra(3, signature=(3, 0, 0))
    assert Algebra(signature=(2, 1)) == Algebra(2, 1, 0)
    assert repr(Algebra(3)) == "Algebra(3)" and repr(Algebra(1, 1, 0)) == "Algebra(1, 1, 0)"
