"""Symbolic rotors of every signature (galinear.symbolic.signatures) against independent references.

References: the numeric core's ``Algebra(p, q, r).exp`` and ``scipy.linalg.expm`` of the
left-multiplication matrix of B applied to the scalar 1 (the series itself), float64, 1e-12
relative to max(1, max |R|). Exact identities (parts sum to B, commute, square to lambda) are
checked with sympy on rational bivectors.
"""
import random

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear import Algebra, blades
from galinear.core.signatures import left_matrix
from galinear.symbolic import bivector, blade, vector
from galinear.symbolic.closed_forms import exp_simple, exp_series
from galinear.symbolic.proof_scripts import random_rational
from galinear.symbolic.signatures import (
    cosh_sinhc,
    exp_signature,
    exp_simple_signature,
    screw_decomposition,
    signature_decomposition,
    signature_roots,
)

scipy_linalg = pytest.importorskip("scipy.linalg")

TOL = 1e-12
SIGNATURES = [(3, 1), (1, 3), (3, 0, 1), (4, 1), (2, 2), (2, 1), (2, 0, 1), (1, 1, 1), (4,), (3, 2), (2, 1, 1)]


def numeric(x):
    """Complex coefficients of a numeric symbolic multivector (30 digits, then float64)."""
    return np.array([complex(sp.N(c, 30)) for c in x.coefficients])


def references(sig, values):
    alg = Algebra(*sig)
    B = alg.bivector(np.array([float(v) for v in values]))
    core = alg.exp(B)
    series = scipy_linalg.expm(left_matrix(alg, B))[:, 0]
    return core, series


def assert_matches(R, refs):
    got = numeric(R)
    for ref in refs:
        scale = max(1.0, float(np.abs(ref).max()))
        assert np.abs(got.imag).max() <= TOL * scale
        np.testing.assert_allclose(got.real, ref, rtol=0, atol=TOL * scale)


def exact_zero(c):
    """Normal form of an expression in radicals and I (rationalised denominators, expanded)."""
    return sp.expand(sp.radsimp(sp.expand(c)))


def rational_values(n, rng, bound=2):
    return [random_rational(rng, bound, 3) for _ in range(n * (n - 1) // 2)]


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: "Cl" + ",".join(map(str, s)))
def test_exp_signature_at_rational_points_matches_core_and_expm(sig):
    rng = random.Random(hash(sig) % 1000)
    metric = blades.metric_from_signature(*sig)
    for _ in range(4):
        values = rational_values(len(metric), rng)
        assert_matches(exp_signature(bivector(metric, values)), references(sig, values))


@pytest.mark.parametrize("sig", [(3, 1), (3, 0, 1), (4, 1), (2, 2), (3, 2)], ids=lambda s: "Cl" + ",".join(map(str, s)))
def test_parts_sum_commute_square_and_multiply_to_exp(sig):
    rng = random.Random(7)
    metric = blades.metric_from_signature(*sig)
    for _ in range(3):
        values = rational_values(len(metric), rng)
        B = bivector(metric, values)
        parts = signature_decomposition(B)
        b1, b2 = parts[0].bivector, parts[1].bivector
        assert (b1 + b2 - B).is_zero(exact_zero)
        assert (b1 * b2 - b2 * b1).is_zero(exact_zero)
        assert exact_zero((b1 * b2).grade(0)) == 0  # b1 b2 = b1 ^ b2
        for p in parts:
            assert (p.bivector * p.bivector - p.square).is_zero(exact_zero)
        product = exp_simple_signature(b1, assume_simple=True) * exp_simple_signature(b2, assume_simple=True)
        assert_matches(product, references(sig, values))


def test_spacetime_algebra_boost_rotation_and_null_rotation():
    m = blades.metric_from_signature(3, 1)  # e4^2 = -1
    boost = exp_simple_signature(blade(m, "e14", sp.Rational(1, 2)))
    assert (boost - (sp.cosh(sp.Rational(1, 2)) + sp.sinh(sp.Rational(1, 2)) * blade(m, "e14"))).is_zero()
    rotation = exp_simple_signature(blade(m, "e12", 3))
    assert (rotation - (sp.cos(3) + sp.sin(3) * blade(m, "e12"))).is_zero()
    null = (blade(m, "e1") + blade(m, "e4")).op(vector(m, [0, 2, sp.Rational(1, 3), 0]))  # n ^ w, n null, w.n = 0
    assert (exp_simple_signature(null) - (1 + null)).is_zero()
    assert (exp_series(null, 5) - (1 + null)).is_zero()
    B = blade(m, "e12", 2) + blade(m, "e34", 3) + blade(m, "e14", 1)  # a general Lorentz generator
    kinds = sorted(p.kind for p in signature_decomposition(B))
    assert kinds == ["boost", "rotation"]
    assert_matches(exp_signature(B), references((3, 1), [2, 0, 1, 0, 0, 3]))


def test_pga_screw_decomposition_symbolic():
    m = blades.metric_from_signature(3, 0, 1)  # e1 null
    B = bivector(m, "b")
    screw = screw_decomposition(B)
    I = blade(m, "e1234")
    r, t = screw.rotation, screw.translation
    assert (r + t - B).is_zero(sp.cancel)
    assert (r * t - t * r).is_zero(sp.cancel)
    assert (t * t).is_zero(sp.cancel)
    assert (t - screw.pitch * r * I).is_zero(sp.cancel)
    assert all(sp.cancel(c) == 0 for c, name in zip(t.coefficients, blades.blade_names(4)) if "1" not in name[1:])
    rng = random.Random(3)
    for _ in range(3):
        values = rational_values(4, rng)
        point = dict(zip(map(tuple, blades.bivector_pairs(4).tolist()), values))
        subs = {sp.Symbol(f"b{i + 1}{j + 1}"): v for (i, j), v in point.items()}
        rn, tn = r.subs(subs), t.subs(subs)
        motor = exp_simple_signature(rn, assume_simple=True) * (1 + tn)
        assert_matches(motor, references((3, 0, 1), values))
        exact = screw_decomposition(bivector(m, values))
        assert (exact.rotation - rn).is_zero() and (exact.translation - tn).is_zero()


def test_pga_pure_translation_and_pure_rotation():
    m = blades.metric_from_signature(3, 0, 1)
    T = blade(m, "e12", 2) + blade(m, "e14", -1)  # ideal: a translation
    screw = screw_decomposition(T)
    assert screw.rotation.is_zero() and (screw.translation - T).is_zero() and screw.pitch == 0
    assert (exp_signature(T) - (1 + T)).is_zero()
    Rb = blade(m, "e23", 1) + blade(m, "e34", 2)
    screw = screw_decomposition(Rb)
    assert (screw.rotation - Rb).is_zero() and screw.translation.is_zero()


def test_cga_isoclinic_rotation_takes_the_equal_root_limit():
    m = blades.metric_from_signature(4, 1)
    B = blade(m, "e12", 1) + blade(m, "e34", 1)
    l1, l2 = signature_roots(B)
    assert l1 == l2 == -1
    with pytest.raises(ValueError, match="not unique"):
        signature_decomposition(B)
    R = exp_signature(B)
    expected = (sp.cos(1) + sp.sin(1) * blade(m, "e12")) * (sp.cos(1) + sp.sin(1) * blade(m, "e34"))
    assert (R - expected).is_zero()
    values = [1, 0, 0, 0, 0, 0, 0, 1, 0, 0]
    assert_matches(R, references((4, 1), values))


def test_cl22_complex_pair_gives_a_real_rotor():
    m = blades.metric_from_signature(2, 2)
    values = [1, 1, 0, 0, -1, 1]
    B = bivector(m, values)
    assert signature_roots(B) == [2 * sp.I, -2 * sp.I]
    parts = signature_decomposition(B)
    assert [p.kind for p in parts] == ["complex", "complex"]
    assert (parts[0].bivector - parts[1].bivector.applyfunc(sp.conjugate)).is_zero()
    R = exp_signature(B)
    assert all(c.is_extended_real for c in R.coefficients)
    assert_matches(R, references((2, 2), values))


def test_cl22_non_diagonalisable_bivector_is_refused_clearly():
    m = blades.metric_from_signature(2, 2)
    B = bivector(m, [-1] * 6)  # sigma = (1, 2, 1): double root 1, B W_2 != B
    with pytest.raises(ValueError, match="not a sum of commuting simple parts"):
        exp_signature(B)


def test_symbolic_simple_exp_cases_and_piecewise():
    lam = sp.Symbol("x", real=True)
    c, s = cosh_sinhc(lam)
    for value, expected in ((-4, (sp.cos(2), sp.sin(2) / 2)), (4, (sp.cosh(2), sp.sinh(2) / 2)), (0, (1, 1))):
        assert sp.simplify(c.subs(lam, value) - expected[0]) == 0
        assert sp.simplify((s.subs(lam, value) - expected[1]).rewrite(sp.sin)) == 0
    m = blades.metric_from_signature(3, 1)
    v, w = vector(m, "v"), vector(m, "w")
    b = v.op(w)
    R = exp_simple_signature(b)
    rng = random.Random(5)
    for _ in range(3):
        point = {sym: random_rational(rng, 2, 3) for sym in b.free_symbols()}
        bn = b.subs(point)
        values = [bn.coefficients[blades.blade_index(4, "e" + "".join(str(k + 1) for k in pair))]
                  for pair in blades.bivector_pairs(4).tolist()]
        assert_matches(R.subs(point), references((3, 1), values))


def test_euclidean_input_agrees_with_closed_forms():
    b = vector(3, [1, 2, 0]).op(vector(3, [0, 1, 3]))
    assert (exp_simple_signature(b) - exp_simple(b)).is_zero(lambda c: sp.simplify(c.rewrite(sp.sin)))
    with pytest.raises(ValueError, match="galinear.symbolic.signatures"):
        exp_simple(bivector((1, 1, -1), [1, 0, 0]))


def test_float_coefficients_are_taken_exactly():
    m = blades.metric_from_signature(3, 1)
    B = bivector(m, [0.5, 0, 1.25, 0, 0, -2.0])
    R = exp_signature(B)
    assert not any(c.has(sp.Float) for c in R.coefficients)
    assert (R - exp_signature(bivector(m, [sp.Rational(1, 2), 0, sp.Rational(5, 4), 0, 0, -2]))).is_zero()
    assert_matches(R, references((3, 1), [0.5, 0, 1.25, 0, 0, -2.0]))


def test_bad_input_errors():
    with pytest.raises(ValueError, match="n <= 5"):
        exp_signature(bivector(6, [1] * 15))
    with pytest.raises(ValueError, match="not \\(provably\\) simple"):
        exp_simple_signature(bivector((1, 1, 1, -1), "b"))
    with pytest.raises(ValueError, match="3D PGA"):
        screw_decomposition(bivector((1, 1, 1, -1), [1] * 6))
    with pytest.raises(ValueError, match="grade 2 only"):
        exp_signature(bivector((1, 1, -1), [1, 0, 0]) + 1)
    with pytest.raises(TypeError, match="MultiVector"):
        signature_roots([1, 2, 3])


@settings(max_examples=15, deadline=None)
@given(st.lists(st.fractions(min_value=-3, max_value=3, max_denominator=4), min_size=6, max_size=6),
       st.sampled_from([(3, 1), (3, 0, 1), (2, 2)]))
def test_exp_of_minus_b_is_the_inverse(values, sig):
    """Property: exp(B) exp(-B) = 1 (the closed forms at rational points, float64)."""
    metric = blades.metric_from_signature(*sig)
    values = [sp.Rational(v.numerator, v.denominator) for v in values]
    B = bivector(metric, values)
    try:
        R, Rinv = exp_signature(B), exp_signature(-B)
    except ValueError as exc:  # a non-diagonalisable Cl(2,2) bivector: refused by design
        assert "not a sum of commuting simple parts" in str(exc)
        return
    alg = Algebra(*sig)
    Rn, Rinvn = numeric(R), numeric(Rinv)
    assert np.abs(Rn.imag).max() == 0 and np.abs(Rinvn.imag).max() == 0
    one = alg.gp(Rn.real, Rinvn.real)
    scale = max(1.0, float(np.abs(Rn).max()) ** 2)
    np.testing.assert_allclose(one.real, np.eye(16)[0], atol=TOL * scale)


def test_signatures_module_imports_neither_numba_nor_torch_nor_core():
    import subprocess
    import sys

    code = ("import sys, galinear.symbolic.signatures; "
            "print(sorted(m for m in ('numba', 'torch', 'galinear.core') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_rational_roots_are_kept_exactly():
    """Roots near simple numbers are not rounded: (e12 + b e34)^2 in Cl(3,1) has roots -1 and b^2
    with b^2 = 1.00000002000000010000 (sympy's nsimplify would give 1)."""
    m = blades.metric_from_signature(3, 1)
    b = sp.Rational(100000001, 100000000)
    roots = signature_roots(blade(m, "e12", 1) + blade(m, "e34", b))
    assert roots == [-1, b**2]
    parts = signature_decomposition(blade(m, "e12", 1) + blade(m, "e34", b))
    assert (parts[0].bivector + parts[1].bivector - blade(m, "e12", 1) - blade(m, "e34", b)).is_zero()
