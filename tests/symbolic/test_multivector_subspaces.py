"""Symbolic meet, join, project, reject and reflected contractions against the numeric
galinear.MultiVector at rational points (exact rationals in sympy, float64 in the core; the
results agree within 1e-12 relative to the product of the operands' norms). Meet and join are
compared on rational blades (outer products of random rational vectors, some sharing a vector,
PGA planes and points) and checked exactly by incidence; ``&`` and ``^`` on random multivectors."""
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


def _wedge(pairs):
    """Outer product of (symbolic, numeric) vector pairs, as such a pair."""
    sym, num = pairs[0]
    for s, x in pairs[1:]:
        sym, num = sym ^ s, num ^ x
    return sym, num


def _blade_pairs(rng, alg, count):
    """Pairs of rational blades; about half share vectors (e.g. u ^ v and v ^ w)."""
    out = []
    while len(out) < count:
        ga, gb = (int(g) for g in rng.integers(1, alg.n, 2))
        shared = [_pair(rng, alg, (1,)) for _ in range(int(rng.integers(0, min(ga, gb) + 1)))]
        a = _wedge(shared + [_pair(rng, alg, (1,)) for _ in range(ga - len(shared))])
        b = _wedge(shared + [_pair(rng, alg, (1,)) for _ in range(gb - len(shared))])
        if not (a[0].is_zero() or b[0].is_zero()):
            out.append((a, b))
    return out


@pytest.mark.parametrize("signature", SIGNATURES)
def test_subspace_methods_match_numeric(signature, rng):
    alg = Algebra(*signature)
    (a, na), (b, nb) = _pair(rng, alg), _pair(rng, alg)
    scale = float(np.linalg.norm(na.values) * np.linalg.norm(nb.values))
    _close(a & b, na & nb, scale)
    _close(a ^ b, na ^ nb, scale)
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


@pytest.mark.parametrize("signature", SIGNATURES)
def test_meet_join_of_rational_blades_match_numeric(signature, rng):
    alg = Algebra(*signature)
    for (a, na), (b, nb) in _blade_pairs(rng, alg, 6):
        scale = float(np.linalg.norm(na.values) * np.linalg.norm(nb.values))
        M, J = a.meet(b), a.join(b)
        nM, nJ = na.meet(nb), na.join(nb)
        _close(M, nM, max(scale, float(np.abs(nM.values).max())))
        _close(J, nJ, float(np.abs(nJ.values).max()))
        assert len(M.grades()) == len(J.grades()) == 1
        assert M.grades()[0] + J.grades()[0] == a.grades()[0] + b.grades()[0]


def test_meet_join_of_overlapping_blades_exactly():
    """u ^ v and v ^ w in Cl(3) and Cl(4): the meet spans v, the join u ^ v ^ w normalised; the meet
    lies in both (v ^ meet = 0), both lie in the join, the meet is a positive multiple of a & b
    when the blades span the space."""
    from galinear.symbolic import vector

    for n in (3, 4):
        u, v, w = (vector(n, c[:n]) for c in ([1, 2, 0, 3], [0, 1, 1, -1], [2, 0, 3, 1]))
        a, b = u ^ v, v ^ w
        M, J = a.meet(b), a.join(b)
        assert (M ^ v).is_zero() and not M.is_zero() and M.grades() == (1,)
        assert (a ^ M).is_zero() and (b ^ M).is_zero()
        assert (J ^ u).is_zero() and (J ^ v).is_zero() and (J ^ w).is_zero()
        assert sp.simplify(abs(J.scalar_product(J.reverse())) - 1) == 0
        uvw = u ^ v ^ w
        assert (J - uvw * (1 / uvw.norm())).is_zero() or (J + uvw * (1 / uvw.norm())).is_zero()
        if n == 3:  # a & b = lambda v with lambda != 0: the meet is a positive multiple of it
            ratio = sp.simplify(M.coefficients[2] / (a & b).coefficients[2])
            assert ratio > 0 and (M - (a & b) * ratio).is_zero()


def test_pga_planes_and_points_exactly():
    """Plane-based PGA Cl(3,0,1): two planes meet in their line p1 ^ p2 (a positive multiple), two
    points join to their line (P1 & P2) normalised, as in the numeric layer."""
    from galinear.symbolic import vector

    metric = (0, 1, 1, 1)
    p1, p2 = vector(metric, [1, 2, 0, 1]), vector(metric, [sp.Rational(1, 2), 0, 1, 3])
    line = p1.meet(p2)
    ratio = sp.simplify(line.coefficients[5] / (p1 ^ p2).coefficients[5])
    assert ratio > 0 and (line - (p1 ^ p2) * ratio).is_zero()
    P1 = MultiVector(metric, [0] * 11 + [1, 2, -1, 3, 0])
    P2 = MultiVector(metric, [0] * 11 + [sp.Rational(2, 3), 0, 1, 1, 0])
    vee = P1 & P2
    size = sp.sqrt(sum(c * c for c in vee.coefficients))
    assert (P1.join(P2) - vee * (1 / size)).is_zero()
    alg = Algebra(3, 0, 1)
    for x, y in ((p1, p2), (P1, P2), (p1 ^ p2, P1)):
        nx = NumericMultiVector(alg, np.array([float(c) for c in x.coefficients]))
        ny = NumericMultiVector(alg, np.array([float(c) for c in y.coefficients]))
        _close(x.meet(y), nx.meet(ny), float(np.linalg.norm(nx.values) * np.linalg.norm(ny.values)))
        _close(x.join(y), nx.join(ny), 1.0)


def test_meet_join_refusals():
    from galinear.symbolic import blade, vector

    e12, e34 = blade(4, "e12"), blade(4, "e34")
    with pytest.raises(ValueError, match="not a blade.*e12 \\+ e34"):
        (e12 + e34).meet(e12)
    with pytest.raises(ValueError, match="not a blade: it has grades \\(1, 2\\)"):
        e12.join(e12 + blade(4, "e1"))
    with pytest.raises(ValueError, match="b is zero"):
        e12.meet(MultiVector(4))
    with pytest.raises(ValueError, match="symbolic coefficients.*subs"):
        vector(3, "x").join(blade(3, "e1"))
    with pytest.raises(ValueError, match="floating-point.*Rational"):
        blade(3, "e1", 0.5).meet(blade(3, "e2"))


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
