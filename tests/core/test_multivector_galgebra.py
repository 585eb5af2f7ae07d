"""galinear.MultiVector against galgebra (sympy-based, exact) at rational points.

galgebra builds an algebra from a metric list in our basis order (Cl(3), Cl(3,1) with e4^2 = -1,
PGA Cl(3,0,1) with e1 null) and stores coefficients in the same shortlex order
(``Mv.blade_coefs()``). Exact rational results are compared with float64 ones within 1e-12
relative to the product of the operands' norms (1e-10 for inverses and exponentials).

Conventions: galgebra's ``|`` is Hestenes' inner product, which drops the terms with a scalar
factor (compared after removing them from ours, as for clifford's ``|``); ``<`` and ``>`` are the
left and right contractions. Its dual depends on a global mode; ``"Iinv+"`` gives
:math:`x I^{-1}`, ours in non-degenerate metrics (the mode is restored afterwards). It has no
dual for degenerate metrics (it returns nan), no regressive product, and ``inv()`` only for
versors (x x~ a scalar). A linear map ``ga.lt(rows)`` takes row i as the image of e_i, the
transpose of our outermorphism matrix.
"""
import numpy as np
import pytest
import sympy as sp

from galinear import Algebra, MultiVector

galgebra_ga = pytest.importorskip("galgebra.ga", reason="galgebra is an optional reference (pip install galgebra)")
Ga = galgebra_ga.Ga

SIGNATURES = [(3, 0, 0), (3, 1, 0), (3, 0, 1)]


def _rational(rng, alg, grades=None):
    ints = rng.integers(-6, 7, size=alg.dim)
    if grades is not None:
        ints = ints * np.isin(alg.grades, grades)
    return MultiVector(alg, ints / 3.0), [sp.Rational(int(v), 3) for v in ints]


def _to_galgebra(ga, coefficients):
    return sum((c * blade for c, blade in zip(coefficients, ga.mv_blades_lst)), ga.mv(0, "scalar"))


def _values(mv):
    return np.array([float(sp.N(c, 30)) for c in mv.blade_coefs()])


def _close(ours, theirs, scale, tol=1e-12):
    assert np.max(np.abs(ours.values - _values(theirs))) <= tol * max(1.0, float(scale))


@pytest.fixture(scope="module", params=SIGNATURES, ids=lambda s: "Cl" + str(s))
def algebras(request):
    alg = Algebra(*request.param)
    names = " ".join(f"e{i + 1}" for i in range(alg.n))
    ga, *_ = Ga.build(names, g=list(alg.metric))
    ga.mv_blades_lst = [ga.mv(1, "scalar")] + [b for grade in ga.mv_blades[1:] for b in grade]
    return alg, ga


def test_products_and_maps_match_galgebra(algebras, rng):
    alg, ga = algebras
    (a, ca), (b, cb) = _rational(rng, alg), _rational(rng, alg)
    A, B = _to_galgebra(ga, ca), _to_galgebra(ga, cb)
    assert np.array_equal(_values(A), a.values)
    scale = float(np.linalg.norm(a.values) * np.linalg.norm(b.values))
    _close(a * b, A * B, scale)
    _close(a ^ b, A ^ B, scale)
    _close(a << b, A < B, scale)
    _close(a >> b, A > B, scale)
    hestenes = (a | b) - a["1"] * b - b["1"] * a + a["1"] * b["1"]
    _close(hestenes, A | B, scale)
    _close(~a, A.rev(), np.linalg.norm(a.values))
    matrix = rng.integers(-3, 4, size=(alg.n, alg.n))
    L = ga.lt([[int(v) for v in row] for row in matrix.T])
    _close(a.outermorphism(matrix.astype(float)), L(A), np.linalg.norm(a.values) * np.abs(matrix).sum() ** alg.n)
    if 0 not in alg.metric:
        previous = Ga.dual_mode_value
        try:
            Ga.dual_mode("Iinv+")
            _close(a.dual(), A.dual(), np.linalg.norm(a.values))
        finally:
            Ga.dual_mode_value = previous


def test_versor_inverse_exp_and_projection_match_galgebra(algebras, rng):
    alg, ga = algebras
    e = ga.mv_blades_lst[1 : 1 + alg.n]
    # two non-null vectors (no null component), their product is an invertible versor
    (u, cu), (v, cv) = _rational(rng, alg, (1,)), _rational(rng, alg, (1,))
    null = [i + 1 for i, m in enumerate(alg.metric) if m == 0]
    for mv, coefficients in ((u, cu), (v, cv)):
        for i in null:
            mv[alg.blade_names[i]] = 0.0
            coefficients[i] = 0
    U, V = _to_galgebra(ga, cu), _to_galgebra(ga, cv)
    assert float((u * u)["1"]) != 0 and float((v * v)["1"]) != 0
    _close((u * v).inv(), (U * V).inv(), np.linalg.norm((u * v).inv().values), 1e-10)
    # exp of a simple bivector (a plane of two basis vectors, one of them e1: null in PGA)
    B = MultiVector.blade(alg, "e12", 0.75) + MultiVector.blade(alg, "e13", -0.5)
    _close(B.exp(), (sp.Rational(3, 4) * (e[0] ^ e[1]) - sp.Rational(1, 2) * (e[0] ^ e[2])).exp(), 1.0, 1e-10)
    # projection of a vector onto the blade u ^ v
    (x, cx) = _rational(rng, alg, (1,))
    X = _to_galgebra(ga, cx)
    blade = u ^ v
    scale = np.linalg.norm(x.values) * np.linalg.norm(blade.values) * np.linalg.norm(blade.inv().values)
    _close(x.project(blade), X.project_in_blade(U ^ V), scale, 1e-10)
