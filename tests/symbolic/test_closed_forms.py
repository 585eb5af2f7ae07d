"""Closed forms against independent references (scipy expm, series, the core, galinear.nn)."""
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from galinear import blades
from galinear.symbolic import MultiVector, bivector, blade, vector
from galinear.symbolic.closed_forms import (
    closed_form_parts,
    decomposition_roots,
    exp_series,
    exp_simple,
    invariant_decomposition,
    is_simple,
    normalize_rotor,
    rotor_from_bivector,
    rotor_gadget_parameter_count,
    rotor_network_parameter_count,
    sandwich_matrix,
)

scipy_linalg = pytest.importorskip("scipy.linalg")


def _skew(n, values):
    A = np.zeros((n, n))
    for (i, j), v in zip(blades.bivector_pairs(n).tolist(), values):
        A[i, j], A[j, i] = v, -v
    return A


def _vector_block(R):
    n = R.n
    M = np.array(sandwich_matrix(R.applyfunc(lambda c: sp.N(c, 30))).evalf(30), dtype=np.float64)
    return M[1 : n + 1, 1 : n + 1]


@pytest.mark.parametrize("n", [2, 3])
def test_exp_simple_rotation_matches_scipy_expm(n, rng):
    values = rng.uniform(-1.5, 1.5, size=n * (n - 1) // 2)
    R = exp_simple(bivector(n, [sp.Rational(round(v * 1000), 1000) for v in values]))
    A = _skew(n, [round(v * 1000) / 1000 for v in values])
    np.testing.assert_allclose(_vector_block(R), scipy_linalg.expm(2 * A), rtol=1e-12, atol=1e-12)


def test_exp_simple_equals_long_series():
    b = vector(4, [1, 2, 0, -1]).op(vector(4, [0, 1, 3, 1])) / 3
    closed = [float(sp.N(c, 40)) for c in exp_simple(b).coefficients]
    series = [float(c) for c in exp_series(b, 40).coefficients]
    np.testing.assert_allclose(closed, series, rtol=1e-14, atol=1e-14)
    assert exp_simple(0 * b) == 1


@pytest.mark.parametrize("n", [4, 5])
def test_rotor_from_bivector_matches_scipy_expm(n, rng):
    values = [int(v) for v in rng.integers(-3, 4, size=n * (n - 1) // 2)]
    R = rotor_from_bivector(bivector(n, values))
    np.testing.assert_allclose(_vector_block(R), scipy_linalg.expm(2 * _skew(n, values)), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n", [4, pytest.param(6, marks=pytest.mark.slow)])
def test_decomposition_matches_core_exponential(n, rng):
    import galinear.core as core
    values = [int(v) for v in rng.integers(-2, 3, size=n * (n - 1) // 2)]
    R = rotor_from_bivector(bivector(n, values))
    symbolic = np.array([float(sp.N(c, 30)) for c in R.coefficients])
    algebra = core.Algebra(n)
    numeric = algebra.exp(algebra.bivector(np.array(values, dtype=np.float64)))
    np.testing.assert_allclose(numeric, symbolic, rtol=1e-9, atol=1e-9)


def test_k3_decomposition_rotor_matches_scipy_expm():
    """n = 6 with rational roots (three planes e14, e25, e36 plus a coupling) against expm."""
    n = 6
    names = {"e14": 1, "e25": 2, "e36": 3, "e15": 0}
    values = [names.get(f"e{i + 1}{j + 1}", 0) for i, j in blades.bivector_pairs(n).tolist()]
    R = rotor_from_bivector(bivector(n, values))
    np.testing.assert_allclose(_vector_block(R), scipy_linalg.expm(2 * _skew(n, values)), rtol=1e-12, atol=1e-12)


def _zero(c):
    """Exact zero test, cheap when it holds: the coefficients here lie in Q(sqrt(d)), where
    expansion reaches the canonical a + b sqrt(d); anything else is left to simplify."""
    return 0 if sp.expand(c) == 0 else sp.simplify(c)


# Each example is exact sympy arithmetic (about 0.5 s), so this property runs 1/8 of the
# profile's examples: 5 under "ci", 62 under "thorough".
@settings(max_examples=max(5, settings.default.max_examples // 8), deadline=None)
@given(st.lists(st.integers(-3, 3), min_size=6, max_size=6))
def test_decomposition_parts_are_valid_for_integer_bivectors(values):
    B = bivector(4, values)
    parts = invariant_decomposition(B)
    assert len(parts) == 2
    assert (parts[0] + parts[1] - B).is_zero(_zero)
    for p in parts:
        assert p.op(p).is_zero(_zero)
    assert (parts[0] * parts[1] - parts[1] * parts[0]).is_zero(_zero)


def test_equal_angles_use_documented_fallback():
    B = bivector(4, [2, 0, 0, 0, 0, 2])  # 2 e12 + 2 e34: isoclinic
    assert decomposition_roots(B) == [-4, -4]
    with pytest.raises(ValueError, match="equal roots"):
        closed_form_parts(B, decomposition_roots(B))
    with pytest.raises(ValueError, match="equal roots"):
        invariant_decomposition(B, method="closed")
    parts = invariant_decomposition(B)
    assert (parts[0] + parts[1] - B).is_zero() and all(p.op(p).is_zero() for p in parts)
    assert all((p * p + 4).is_zero() for p in parts)


def test_symbolic_k2_closed_form_on_canonical_bivector():
    t1, t2 = sp.symbols("t1 t2", positive=True)
    B = bivector(4, [t1, 0, 0, 0, 0, t2])
    parts = closed_form_parts(B, [-(t1**2), -(t2**2)])
    assert (parts[0] - t1 * blade(4, "e12")).applyfunc(sp.cancel).is_zero()
    assert (parts[1] - t2 * blade(4, "e34")).applyfunc(sp.cancel).is_zero()


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match=r"k = floor\(n/2\) <= 3"):
        invariant_decomposition(bivector(8, [1] * 28))
    with pytest.raises(ValueError, match="grade 2 only"):
        invariant_decomposition(vector(4, "v"))
    with pytest.raises(ValueError, match="not \\(provably\\) simple"):
        exp_simple(bivector(4, "b"))
    assert not is_simple(bivector(4, "b")) and is_simple(bivector(3, "b"))
    exp_simple(bivector(4, "b"), assume_simple=True)  # the caller takes responsibility
    with pytest.raises(ValueError, match="Euclidean"):
        exp_simple(MultiVector((1, -1), [0, 0, 0, 1]))
    with pytest.raises(TypeError, match="MultiVector"):
        exp_simple([0, 1])
    with pytest.raises(ValueError, match="method"):
        invariant_decomposition(bivector(4, [1] * 6), method="power")
    with pytest.raises(ValueError, match="odd-grade"):
        normalize_rotor(vector(3, [1, 0, 0]))
    with pytest.raises(ValueError, match="not a scalar"):
        normalize_rotor(1 + blade(4, "e1234"))
    with pytest.raises(ValueError, match="order"):
        exp_series(bivector(2, [1]), -1)
    assert invariant_decomposition(bivector(1, [])) == []
    B3 = bivector(3, [1, 2, 3])
    assert invariant_decomposition(B3)[0] == B3


def test_normalize_rotor_gives_unit_rotor():
    R = normalize_rotor(3 + bivector(3, [1, 2, 2]))
    assert (R * R.reverse() - 1).is_zero()


def test_paper_parameter_counts():
    assert rotor_network_parameter_count(2048, 2048) == 895
    assert rotor_network_parameter_count(2048, 512) == 1076
    assert rotor_network_parameter_count(1536, 1536) == 1401
    assert rotor_network_parameter_count(1536, 256) == 1493
    assert rotor_gadget_parameter_count(2048, 2048) == 2 * 55 + 1
    assert rotor_gadget_parameter_count(2048, 512) == 4 * (2 * 36 + 1)
    with pytest.raises(ValueError, match="power of two"):
        rotor_gadget_parameter_count(16, 16, chunk=6)
    with pytest.raises(ValueError, match="positive integer"):
        rotor_gadget_parameter_count(0, 16)


@pytest.mark.parametrize(
    "d_in,d_out,hidden", [(2048, 2048, None), (2048, 512, None), (1536, 1536, 2048), (1536, 256, 2048), (40, 24, 32)]
)
def test_parameter_counts_match_galinear_nn(d_in, d_out, hidden):
    pytest.importorskip("torch")
    import galinear.nn as nn
    net = nn.RotorNetwork(d_in, d_out, hidden=hidden)
    expected = rotor_network_parameter_count(d_in, d_out, hidden=d_in if hidden is None else hidden)
    assert sum(p.numel() for p in net.parameters()) == expected


@pytest.mark.parametrize("d_in,d_out,double,alpha,bias", [(24, 40, True, True, False), (64, 8, False, False, True), (7, 5, True, True, True)])
def test_gadget_count_matches_rotor_linear(d_in, d_out, double, alpha, bias):
    pytest.importorskip("torch")
    import galinear.nn as nn
    layer = nn.RotorLinear(d_in, d_out, bias=bias, double_rotor=double, alpha=alpha)
    expected = rotor_gadget_parameter_count(d_in, d_out, double=double, alpha=alpha, bias=bias)
    assert sum(p.numel() for p in layer.parameters()) == expected
