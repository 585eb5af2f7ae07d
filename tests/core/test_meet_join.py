"""Meet and join of blades (galinear.core.meetjoin, MultiVector.meet / join).

References: the clifford package's ``join`` and ``meet`` (non-degenerate algebras) and incidence
(the meet lies in both blades, both blades lie in the join, grades add up; in PGA a point on a
line has L & P = 0). Blades are wedges of small-integer vectors, so shared directions cancel
exactly in every library. Tolerances: 1e-12 relative in float64, 1e-5 for float32 inputs.
"""
import numpy as np
import pytest

clifford = pytest.importorskip("clifford", reason="clifford's meet and join are the reference")

from galinear import Algebra, MultiVector  # noqa: E402
from galinear.core import meetjoin  # noqa: E402


def random_blade(alg, rng, grade, shared=()):
    """Wedge of `shared` vectors and random small-integer vectors, `grade` factors in all."""
    x = alg.scalar(1.0)
    factors = list(shared) + [rng.integers(-2, 3, alg.n).astype(float) for _ in range(grade - len(shared))]
    for v in factors:
        x = alg.op(x, alg.vector(v))
    return x


def blade_pairs(alg, rng, count):
    pairs = []
    while len(pairs) < count:
        ga, gb = rng.integers(1, alg.n, 2)
        overlap = int(rng.integers(0, min(ga, gb) + 1))
        shared = [rng.integers(-2, 3, alg.n).astype(float) for _ in range(overlap)]
        a, b = random_blade(alg, rng, ga, shared), random_blade(alg, rng, gb, shared)
        if np.abs(a).max() > 0 and np.abs(b).max() > 0:
            pairs.append((a, b))
    return pairs


def contains(alg, big, small):
    """Every vector of blade `small` lies in blade `big` (v ^ big = 0)."""
    V = meetjoin.blade_vectors(alg, small)
    if V is None or V.shape[0] == 0:
        return True
    wedges = alg.op(alg.vector(V), big[None])
    return np.abs(wedges).max() <= 1e-10 * np.abs(big).max()


@pytest.mark.parametrize("signature", [(3,), (4,), (3, 1), (2, 2), (4, 1)])
def test_against_clifford_and_incidence(signature, rng):
    alg = Algebra(*signature)
    compared = []
    for a, b in blade_pairs(alg, rng, 25):
        M, J = meetjoin.meet_join(alg, a, b)
        ca, cb = alg.to_clifford(a), alg.to_clifford(b)
        try:
            cJ = alg.from_clifford(ca.join(cb))
            cM = alg.from_clifford(ca.meet(cb))
        except (np.linalg.LinAlgError, ZeroDivisionError):  # clifford inverts a null join
            cJ = cM = np.full(alg.dim, np.nan)
        except ValueError as error:  # clifford's blade test (via the inverse) refuses null blades
            assert "not a blade" in str(error)
            cJ = cM = np.full(alg.dim, np.nan)
        scale = max(1.0, np.abs(M).max())
        outer = alg.op(a, b)
        if np.isfinite(cJ).all() and np.isfinite(cM).all():
            sign = 1.0 if np.sum(J * cJ) >= 0 else -1.0
            np.testing.assert_allclose(J, sign * cJ, atol=1e-12)
            np.testing.assert_allclose(M, sign * cM, atol=1e-12 * scale)
            compared.append(sign)
            if np.abs(outer).max() > 0:  # disjoint: the join is a ^ b normalised, as in clifford
                assert sign == 1.0
        # else clifford's meet inverts a join it could not normalise (NaN, or a LinAlgError):
        # the pair is checked by incidence alone
        if np.abs(outer).max() > 0:
            assert np.sum(J * outer) > 0
        ga, gb = [int(alg.grades[np.argmax(np.abs(x))]) for x in (a, b)]
        gm, gj = int(alg.grades[np.argmax(np.abs(M))]), int(alg.grades[np.argmax(np.abs(J))])
        assert gm + gj == ga + gb
        assert contains(alg, a, M) and contains(alg, b, M)
        assert contains(alg, J, a) and contains(alg, J, b)
        if gm == 1:
            assert np.abs(alg.op(M, a)).max() <= 1e-10 * scale * np.abs(a).max()
            assert np.abs(alg.op(M, b)).max() <= 1e-10 * scale * np.abs(b).max()
    assert len(compared) >= 15  # most pairs are compared with clifford


def test_issue_examples():
    for n in (3, 4):
        alg = Algebra(n)
        e = MultiVector.basis(alg)
        J = (e["e1"] ^ e["e2"]).join(e["e2"] ^ e["e3"])
        assert abs(abs(J["e123"]) - 1) < 1e-15 and np.abs(J.values).sum() == pytest.approx(1)
        M = e["e12"].meet(e["e23"])
        assert abs(abs(M["e2"]) - 1) < 1e-15 and np.abs(M.values).sum() == pytest.approx(1)
        assert (e["e12"] & e["e23"]).values[0] == 0 or n == 3  # the regressive product stays as it was
        layout = alg.clifford_layout()
        cJ = layout.blades["e12"].join(layout.blades["e23"])
        cM = layout.blades["e12"].meet(layout.blades["e23"])
        sign = np.sign(J["e123"] * cJ[(1, 2, 3)])
        assert M["e2"] == pytest.approx(sign * cM[(2,)])
    # & and ^ keep their meaning: zero for overlapping blades in Cl(4)
    e = MultiVector.basis(Algebra(4))
    assert np.abs((e["e12"] & e["e23"]).values).max() == 0
    assert np.abs((e["e12"] ^ e["e23"]).values).max() == 0


def test_pga_meet_of_planes_and_join_of_points(rng):
    pga = Algebra(3, 0, 1)  # e1 is the null vector: plane a e1 + x e2 + y e3 + z e4
    for _ in range(10):
        p1, p2, p3 = (MultiVector.vector(pga, rng.standard_normal(4)) for _ in range(3))
        line = p1.meet(p2)
        np.testing.assert_allclose(line.values, (p1 ^ p2).values, atol=1e-12)
        point = line.meet(p3)
        np.testing.assert_allclose(point.values, (p1 ^ p2 ^ p3).values, atol=1e-12)
        plane_meet = p1.meet(p1)  # was 0: a plane meets itself in itself
        v, p = plane_meet.values[1:5], p1.values[1:5]
        assert np.abs(v - p * (v @ p) / (p @ p)).max() < 1e-12  # a multiple of p1
        assert np.abs(plane_meet.values).max() > 0
        assert np.abs(line.meet(p1).values - (line.values * np.sum(line.meet(p1).values * line.values)
                                             / np.sum(line.values**2))).max() < 1e-12  # plane through the line
        P1, P2 = (p1 ^ p2 ^ p3), MultiVector.vector(pga, rng.standard_normal(4)) ^ p2 ^ p3
        L = P1.join(P2)
        vee = (P1 & P2).values
        np.testing.assert_allclose(L.values, vee / np.linalg.norm(vee), atol=1e-12)  # normalised, same sign
        assert np.abs((L & P1).values).max() < 1e-12 and np.abs((L & P2).values).max() < 1e-12  # both on it
        same = P1.join(P1)  # was 0: the join of a point with itself is the point
        np.testing.assert_allclose(same.values, P1.values / np.linalg.norm(P1.values), atol=1e-12)
        plane = L.join(MultiVector.vector(pga, rng.standard_normal(4)) ^ p1 ^ p3)  # line and a third point
        assert np.abs(plane.values[5:]).max() < 1e-12 and np.abs((plane ^ P1).values).max() < 1e-12  # P1 on it
        M, J = plane.meet(L), plane.join(L)  # the plane contains the line: meet = line, join = plane
        for got, want in ((M, L), (J, plane)):
            ratio = np.sum(got.values * want.values) / np.sum(want.values**2)
            assert abs(ratio) > 0.1 and np.abs(got.values - ratio * want.values).max() < 1e-12


@pytest.mark.parametrize("signature", [(3,), (3, 1), (3, 0, 1)])
def test_float32_and_batches(signature, rng):
    alg = Algebra(*signature)
    pairs = blade_pairs(alg, rng, 6)
    a = np.stack([p[0] for p in pairs])
    b = np.stack([p[1] for p in pairs])
    M, J = meetjoin.meet_join(alg, a, b)
    for row, (x, y) in enumerate(pairs):
        m, j = meetjoin.meet_join(alg, x, y)
        np.testing.assert_array_equal(M[row], m)
        np.testing.assert_array_equal(J[row], j)
    M32, J32 = meetjoin.meet_join(alg, a.astype(np.float32), b.astype(np.float32))
    assert M32.dtype == np.float32 and J32.dtype == np.float32
    np.testing.assert_allclose(J32, J, atol=1e-5)
    np.testing.assert_allclose(M32, M, atol=1e-5 * max(1.0, np.abs(M).max()))
    mv = MultiVector(alg, a).meet(MultiVector(alg, b))
    np.testing.assert_array_equal(mv.values, M)


def test_errors_name_the_problem():
    alg = Algebra(4)
    e = MultiVector.basis(alg)
    with pytest.raises(ValueError, match="not a blade"):
        (e["e12"] + e["e34"]).meet(e["e1"])
    with pytest.raises(ValueError, match="grades"):
        (e["e1"] + e["e12"]).join(e["e2"])
    with pytest.raises(ValueError, match="zero"):
        (0 * e["e1"]).join(e["e2"])
