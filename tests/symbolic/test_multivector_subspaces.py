"""Symbolic meet, join, project, reject and reflected contractions against the numeric
galinear.MultiVector at rational points (exact rationals in sympy, float64 in the core; the
results agree within 1e-12 relative to the product of the operands' norms)."""
import numpy as np
import pytest
import sympy as sp

from galinear import Algebra
from galinear import MultiVector as NumericMultiVector
from galinear.symbolic import MultiVector

SIGNATURES = [(3, 0, 0), (3, 1, 0), (3, 0, 1), (4, 1, 0), (2, 0, 2)]


def _pair(rng, alg, grades=None):
    """The same rational multivector as a symbolic and a numeric MultiVector."""
    ints = rng.integers(-6, 7, size=alg.dim)
    if grades is not None:
        ints = ints * np.isin(alg.grades, grades)
    sym = MultiVector(alg.metric, [sp.Rational(int(v), 3) for v in ints])
    return sym, NumericMultiVector(alg, ints / 3.0)


def _close(sym, num, scale):
    got = np.array([float(c) for c in sym.coefficients])
    assert np.max(np.abs(got - num.values)) <= 1e-12 * max(1.0, scale)


@pytest.mark.parametrize("signature", SIGNATURES)
def test_subspace_methods_match_numeric(signature, rng):
    alg = Algebra(*signature)
    (a, na), (b, nb) = _pair(rng, alg), _pair(rng, alg)
    scale = float(np.linalg.norm(na.values) * np.linalg.norm(nb.values))
    _close(a.meet(b), na.meet(nb), scale)
    _close(a & b, na & nb, scale)
    _close(a.join(b), na.join(nb), scale)
    # an invertible blade: the outer product of two vectors with rational coefficients
    (u, nu), (v, nv) = _pair(rng, alg, (1,)), _pair(rng, alg, (1,))
    B, nB = u ^ v, nu ^ nv
    assert (B * B.reverse()).coefficients[0] != 0  # the seeded draw gives a non-null blade
    size = float(np.linalg.norm(na.values) * np.linalg.norm(nB.values) * np.linalg.norm(nB.inv().values))
    _close(a.project(B), na.project(nB), size)
    _close(a.reject(B), na.reject(nB), size)
    # reflected contractions: a real number on the left, as in the numeric class
    _close(2 << a, 2 << na, float(np.linalg.norm(na.values)))
    _close(sp.Rational(1, 2) >> a, 0.5 >> na, float(np.linalg.norm(na.values)))
    assert (2 >> a) == MultiVector(alg.metric, [2 * a.coefficients[0]] + [0] * (alg.dim - 1))
    assert (2 << a) == a * 2


def test_project_reject_identities():
    """x = project + reject; the projection of a vector lies in the blade, the rejection is
    orthogonal to it (exact, symbolic coefficients)."""
    from galinear.symbolic import vector

    u, v, x = vector(3, [1, 2, 0]), vector(3, [0, 1, 1]), vector(3, "x")
    B = u ^ v
    p, q = x.project(B), x.reject(B)
    assert (p + q - x).is_zero()
    assert (p ^ B).is_zero() and q.lc(B).is_zero()
    assert q == (x ^ B) * B.inv()


def test_meet_of_coordinate_planes():
    from galinear.symbolic import blade

    assert blade(3, "e12").meet(blade(3, "e23")) == blade(3, "e2")
    with pytest.raises(ValueError, match="not invertible"):
        blade((0, 1, 1), "e1").project(blade((0, 1, 1), "e1"))
