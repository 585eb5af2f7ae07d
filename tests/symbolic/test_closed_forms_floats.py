"""Numeric input of the symbolic invariant decomposition is taken exactly: a float becomes the
rational it holds (the reference is Python's own exact conversion, fractions.Fraction), nothing
is rounded, so the parts sum to B exactly and square to their roots exactly, also where two
angles differ by 1e-9 and on the isoclinic (deflation) path."""
from fractions import Fraction

import pytest
import sympy as sp

from galinear.symbolic import bivector, blade
from galinear.symbolic.closed_forms import decomposition_roots, invariant_decomposition


def _rational(x: float) -> sp.Rational:
    f = Fraction(x)
    return sp.Rational(f.numerator, f.denominator)


def test_parts_of_nearly_equal_angles_sum_exactly_to_b():
    """1.000000001 e12 + e34 (n = 4): the parts are exactly 1.000000001 e12 and e34."""
    B = bivector(4, [1.000000001, 0, 0, 0, 0, 1])
    parts = invariant_decomposition(B)
    assert len(parts) == 2
    assert (parts[0] + parts[1] - B).is_zero()
    a = _rational(1.000000001)
    assert a != 1
    assert (parts[0] - a * blade(4, "e12")).is_zero()
    assert (parts[1] - blade(4, "e34")).is_zero()
    assert decomposition_roots(B) == [-a**2, -1]


def test_rational_roots_are_not_rounded():
    """An exact input whose two roots differ by 2e-9: both roots and parts stay exact."""
    a = sp.Rational(1_000_000_001, 1_000_000_000)
    B = bivector(4, [a, 0, 0, 0, 0, 1])
    assert decomposition_roots(B) == [-a**2, -1]
    parts = invariant_decomposition(B)
    for part, square in zip(parts, (-a**2, -1)):
        assert (part * part - square).is_zero()
    assert (parts[0] + parts[1] - B).is_zero()


@pytest.mark.parametrize("values", [
    [0.1, 0.2, -0.3, 0.7, 1e-9, 0.5],              # two distinct angles
    [1.000000001, 0, 0, 0, 0, 1.000000001],        # isoclinic, axis-aligned
    [0.3, 0.1, 0.2, 0.2, -0.1, 0.3],               # isoclinic (self-dual), deflation in a tilted plane
])
def test_float_parts_sum_exactly_and_are_simple_and_commute(values):
    B = bivector(4, values)
    parts = invariant_decomposition(B)
    assert (parts[0] + parts[1] - B).is_zero()
    for p in parts:
        assert p.op(p).is_zero()
    assert (parts[0] * parts[1] - parts[1] * parts[0]).is_zero()
    for part, root in zip(parts, decomposition_roots(B)):
        assert (part * part - root).is_zero()
    exact = [_rational(v) for v in values]
    assert (parts[0] + parts[1] - bivector(4, exact)).is_zero()
