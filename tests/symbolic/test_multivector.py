"""Symbolic multivectors: products against clifford and the numpy reference galinear.testing.reference_gp."""
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as st

from galinear import blades
from galinear.symbolic import MultiVector, basis, bivector, blade, scalar, symbols, vector

from galinear.testing import reference_gp, reference_reverse


def _mv(n, values):
    return MultiVector(n, [sp.Rational(int(v)) for v in values])


def _as_float(mv):
    return np.array([float(c) for c in mv.coefficients])


@pytest.fixture(scope="module")
def clifford():
    return pytest.importorskip("clifford")


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_products_match_clifford(clifford, n, rng):
    layout, _ = clifford.Cl(n)
    assert [tuple(t) for t in layout.bladeTupList] == [
        tuple(i + 1 for i in range(n) if m >> i & 1) for m in blades.shortlex_bitmasks(n).tolist()
    ]
    x = rng.integers(-5, 6, size=1 << n)
    y = rng.integers(-5, 6, size=1 << n)
    a, b = _mv(n, x), _mv(n, y)
    ca = clifford.MultiVector(layout, x.astype(float))
    cb = clifford.MultiVector(layout, y.astype(float))
    np.testing.assert_array_equal(_as_float(a * b), (ca * cb).value)
    np.testing.assert_array_equal(_as_float(a ^ b), (ca ^ cb).value)
    np.testing.assert_array_equal(_as_float(a.lc(b)), (ca << cb).value)
    np.testing.assert_array_equal(_as_float(a.reverse()), (~ca).value)
    np.testing.assert_array_equal(_as_float(a.involute()), ca.gradeInvol().value)
    np.testing.assert_array_equal(_as_float(a.conjugate()), ca.conjugate().value)
    assert float(a.norm_squared()) == pytest.approx(ca.mag2())
    assert float(a.scalar_product(b)) == pytest.approx((ca * cb).value[0])
    for g in range(n + 1):
        np.testing.assert_array_equal(_as_float(a.grade_part(g)), ca(g).value)


@pytest.mark.parametrize("metric", [(1, 1, -1), (0, 1, 1), (-1, -1)])
def test_nondegenerate_and_degenerate_metrics_match_clifford(clifford, metric, rng):
    n = len(metric)
    layout, _ = clifford.Cl(sig=list(metric))
    x = rng.integers(-4, 5, size=1 << n)
    y = rng.integers(-4, 5, size=1 << n)
    got = _as_float(_mv(metric, x) * _mv(metric, y))
    want = (clifford.MultiVector(layout, x.astype(float)) * clifford.MultiVector(layout, y.astype(float))).value
    np.testing.assert_array_equal(got, want)


@given(n=st.integers(1, 5), data=st.data())
def test_gp_matches_numpy_cayley_reference(n, data):
    coeffs = st.lists(st.integers(-9, 9), min_size=1 << n, max_size=1 << n)
    x, y = np.array(data.draw(coeffs)), np.array(data.draw(coeffs))
    np.testing.assert_array_equal(_as_float(_mv(n, x) * _mv(n, y)), reference_gp(x, y, n))
    np.testing.assert_array_equal(_as_float(_mv(n, x).reverse()), reference_reverse(x))


def test_contractions_and_outer_product_by_grade():
    n = 4
    a, b = symbols(n, "a", grades=(1,)), symbols(n, "b", grades=(2,))
    product = a * b
    assert (a.lc(b) - product.grade_part(1)).is_zero(sp.expand)
    assert (a.op(b) - product.grade_part(3)).is_zero(sp.expand)
    assert b.lc(a).is_zero(sp.expand)  # grade 2 into grade 1: zero
    assert (b.rc(a) - (b * a).grade_part(1)).is_zero(sp.expand)
    assert (a << b) == a.lc(b) and (b >> a) == b.rc(a) and (a ^ b) == a.op(b)


def test_symbolic_identities_small_n():
    u, v = vector(3, "u"), vector(3, "v")
    assert (u * v - (u.lc(v) + u.op(v))).is_zero(sp.expand)
    e = basis(3)
    assert (e[1] * e[2] + e[2] * e[1]).is_zero()
    assert e[4] * e[4] == -1  # e12^2 = -1
    assert (u ** 2 - (u * u)) == 0
    assert vector(2, "u").norm_squared() == sp.Symbol("u1") ** 2 + sp.Symbol("u2") ** 2


def test_bivector_order_matches_bivector_pairs():
    n = 4
    values = list(range(1, 7))
    b = bivector(n, values)
    names = blades.blade_names(n)
    for p, (i, j) in enumerate(blades.bivector_pairs(n).tolist()):
        assert b.coefficients[names.index(f"e{i + 1}{j + 1}")] == values[p]


def test_latex_and_str():
    b = bivector(3, "b")
    tex = b.latex()
    assert r"e_{12}" in tex and r"b_{12}" in tex and tex.count("+") == 2
    assert b._repr_latex_().startswith("$")
    assert MultiVector(2).latex() == "0"
    x = blade(3, "e13", -1) + 2
    assert str(x) == "2 - e13"
    assert "e13" in repr(x)


def test_bad_input():
    with pytest.raises(ValueError, match="coefficients"):
        MultiVector(2, [1, 2, 3])
    with pytest.raises(ValueError, match="different algebras"):
        vector(2, "u") * vector(3, "u")
    with pytest.raises(ValueError, match="grade"):
        vector(2, "u").grade(3)
    with pytest.raises(ValueError, match="power"):
        vector(2, "u") ** 0.5
    with pytest.raises(ValueError, match="metric"):
        MultiVector((1, 2))
    with pytest.raises(ValueError, match=r"needs C\(3,2\) = 3 values"):
        bivector(3, [1, 2])
    with pytest.raises(ValueError, match=r"not invertible \(the denominator of inv\(\)"):
        vector((1, -1), "u") / vector((1, -1), [1, 1])  # a null vector
    with pytest.raises(ValueError, match="no blade named"):
        blade(2, "e3")
    assert scalar(2, 3) * vector(2, [1, 1]) == vector(2, [3, 3])


def test_symbolic_layer_never_imports_numba_or_torch():
    import subprocess
    import sys

    code = (
        "import sys, galinear.symbolic, galinear.symbolic.codegen, galinear.symbolic.spec, "
        "galinear.symbolic.closed_forms, galinear.symbolic.proof_scripts; "
        "print(sorted(m for m in ('numba', 'torch', 'galinear.core') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# ---------------------------------------------------------------------------- printing hooks, inverse, duals
def test_sympy_printers():
    b = bivector(3, "b") + sp.Rational(1, 2)
    assert sp.latex(b) == b.latex() and r"e_{12}" in sp.latex(b)
    assert sp.sstr(b) == str(b)
    pretty = sp.pretty(b, use_unicode=False)
    assert "e12" in pretty and "b12" in pretty and "MultiVector" not in pretty
    assert "1/2" in pretty.replace(" ", "").replace("\n", "") or "1" in pretty
    assert sp.pretty(MultiVector(2)) == "0"
    x = blade(3, "e13", -1) + (sp.Symbol("a") + 1) * blade(3, "e2")
    text = sp.pretty(x, use_unicode=False)
    assert "-e13" in text.replace(" ", "") and "(a + 1) e2" in text


@pytest.mark.parametrize("metric", [2, 3, 4, (1, 1, -1), (0, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1), (1, 1, 1, 1, -1)])
def test_inverse_closed_forms(metric):
    rng = np.random.default_rng(sum(map(ord, str(metric))))
    n = metric if isinstance(metric, int) else len(metric)
    A = MultiVector(metric, [sp.Rational(int(v), 1) for v in rng.integers(-4, 5, 2**n)])
    Ai = A.inv()
    one = MultiVector(metric, [1] + [0] * (2**n - 1))
    assert (A * Ai - one).is_zero(sp.expand) and (Ai * A - one).is_zero(sp.expand)
    assert (A / A - one).is_zero(sp.expand) and (A ** -2 * A * A - one).is_zero(sp.expand)


def test_inverse_symbolic_and_errors():
    u = vector(3, "u")
    ui = u.inv()
    assert (u * ui).simplify() == scalar(3, 1)
    with pytest.raises(ValueError, match="not invertible"):
        (1 + blade(3, "e1")).inv()  # (1 + e1)(1 - e1) = 0
    with pytest.raises(ValueError, match="not invertible"):
        blade((0, 1, 1), "e1").inv()  # the null vector of PGA
    assert (2 / blade(2, "e1")) == blade(2, "e1", 2)


def test_operator_meanings_match_numeric():
    """Same operators as galinear.MultiVector on exact inputs: |, &, @, dual/undual, A(g)."""
    pytest.importorskip("numba")
    from galinear import Algebra
    from galinear import MultiVector as NumericMV

    for metric, signature in [((1, 1, 1), (3, 0, 0)), ((0, 1, 1, 1), (3, 0, 1)), ((1, 1, 1, -1), (3, 1, 0))]:
        rng = np.random.default_rng(len(metric))
        n = len(metric)
        a_vals, b_vals = rng.integers(-3, 4, (2, 2**n))
        A = MultiVector(metric, [int(v) for v in a_vals])
        B = MultiVector(metric, [int(v) for v in b_vals])
        alg = Algebra(*signature)
        a, b = NumericMV(alg, a_vals.astype(float)), NumericMV(alg, b_vals.astype(float))
        for sym, num in [(A | B, a | b), (A & B, a & b), (A @ B, a @ b), (A.dual(), a.dual()),
                         (A.undual(), a.undual()), (A.dual("hodge"), a.dual("hodge")), (A(0, 2), a(0, 2)),
                         (A ^ B, a ^ b), (A << B, a << b), (A >> B, a >> b)]:
            assert np.allclose(_as_float(sym), num.values, atol=1e-12)
        if 0 not in metric:  # B + 7: a dominant scalar part makes B invertible
            assert np.allclose(_as_float(A / (B + 7)), (a / (b + 7)).values, atol=1e-10)
