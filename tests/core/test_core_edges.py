"""Numerics at the edges of the core: huge and tiny inputs, overflow named as overflow, numpy integers.

References: numpy's own cos/sin/cosh of the exact angle or rapidity (the rotor of a single plane
is cos + sin b or cosh + sinh b), 1/x for inverses of scaled vectors.
"""
import numpy as np
import pytest

from galinear import Algebra, blades


def test_dimension_limit_is_named():
    with pytest.raises(ValueError, match=f"maximum n = {blades.MAX_DIMENSION}"):
        Algebra(10**9)
    with pytest.raises(ValueError, match="maximum n"):
        Algebra(15, 5, 1)
    with pytest.raises(ValueError, match="non-negative"):
        Algebra(3, -1)
    with pytest.raises(TypeError, match="non-negative integer"):
        Algebra(3.0)


def test_numpy_integers_are_accepted():
    assert Algebra(np.int64(3)) == Algebra(3)
    assert Algebra(np.int64(3), np.int32(1)) == Algebra(3, 1)
    assert Algebra(signature=(np.int64(3), np.int64(0), np.int64(1))) == Algebra(3, 0, 1)
    alg = Algebra(np.int64(4))
    x = alg.blade("e12", 2.0) + alg.scalar(1.0)
    np.testing.assert_array_equal(alg.grade(x, np.int64(2)), alg.blade("e12", 2.0))


@pytest.mark.parametrize("signature", [(3,), (4,), (3, 1), (4, 1), (3, 0, 1)])
@pytest.mark.parametrize("angle", [1e30, 1e300, 1.7e308])
def test_exp_of_huge_rotations_is_a_finite_rotor(signature, angle):
    alg = Algebra(*signature)
    name = "e23" if signature == (3, 0, 1) else "e12"  # e1 is null in PGA
    R = alg.exp(alg.blade(name, angle))
    want = np.cos(angle) * alg.scalar(1.0) + np.sin(angle) * alg.blade(name)
    np.testing.assert_allclose(R, want, atol=1e-15)
    assert np.isfinite(alg.log(R)).all()


def test_exp_of_huge_translations_and_mixed_planes():
    pga = Algebra(3, 0, 1)
    T = pga.exp(pga.blade("e12", 1e300))  # a translator: 1 + B exactly
    np.testing.assert_array_equal(T, pga.scalar(1.0) + pga.blade("e12", 1e300))
    cl4 = Algebra(4)
    B = cl4.bivector([1e30, 0, 0, 0, 0, 3e29])  # e12, e34: angles 1e30 and 3e29
    R = cl4.exp(B)
    want = cl4.scalar(np.cos(1e30)) + np.sin(1e30) * cl4.blade("e12")
    want = cl4.gp(want, np.cos(3e29) * cl4.scalar(1.0) + np.sin(3e29) * cl4.blade("e34"))
    np.testing.assert_allclose(R, want, atol=1e-14)
    cga = Algebra(4, 1)
    R = cga.exp(cga.bivector(np.r_[1e30, 0, 0, 0, 0, 0, 0, 3e29, 0, 0]))  # e12 + e34, no boost
    assert np.isfinite(R).all() and np.abs(cga.gp(R, cga.reverse(R)) - cga.scalar(1.0)).max() < 1e-12
    for angle, exact in ((1e5, True), (1e10, True), (1e30, False), (1e300, False)):  # isoclinic: the series path
        R = cga.exp(cga.bivector(np.r_[angle, 0, 0, 0, 0, 0, 0, angle, 0, 0]))
        assert np.abs(cga.gp(R, cga.reverse(R)) - cga.scalar(1.0)).max() < 1e-13
        if exact:  # beyond 1/eps the angle itself carries no digits: only unitarity is meaningful
            c, s = np.cos(angle), np.sin(angle)
            np.testing.assert_allclose(R[[0, 6, 13, 26]], [c * c, c * s, c * s, s * s], atol=1e-14 * angle)  # angle to eps relative
    dec = cga.decompose(cga.bivector(1e30 * np.random.default_rng(0).standard_normal(10)))
    assert np.isfinite(dec.bivectors).all()


def test_overflow_is_named_with_its_limit():
    sta = Algebra(3, 1)
    R = sta.exp(sta.blade("e14", 700.0))
    np.testing.assert_allclose(R, np.cosh(700.0) * sta.scalar(1.0) + np.sinh(700.0) * sta.blade("e14"), rtol=1e-13)
    with pytest.raises(OverflowError, match=r"overflows float64.*710\.48"):  # cosh(phi) > 1.8e308
        sta.exp(sta.blade("e14", 711.0))
    with pytest.raises(OverflowError, match=r"overflows float32.*89\.42"):
        sta.exp(sta.blade("e14", np.float32(90.0)))
    assert np.isfinite(sta.exp(sta.blade("e14", np.float32(89.0)))).all()
    with pytest.raises(OverflowError, match="overflow"):
        sta.exp(sta.bivector(1e30 * np.ones(6)))


def test_inverse_of_huge_and_tiny_vectors():
    alg = Algebra(3)
    np.testing.assert_allclose(alg.inverse(alg.blade("e1", 1e200)), alg.blade("e1", 1e-200), rtol=1e-15)
    np.testing.assert_allclose(alg.inverse(alg.blade("e1", 1e-200)), alg.blade("e1", 1e200), rtol=1e-15)
    x = alg.vector([3e250, 4e250, 0.0])
    np.testing.assert_allclose(alg.inverse(x), alg.vector([3e-250, 4e-250, 0]) / 25, rtol=1e-14)  # x / |x|^2
    with pytest.raises(OverflowError, match="overflow"):
        alg.inverse(alg.blade("e1", 1e-320))


def _left_matrix_inverse(alg, x):
    """Reference inverse: solve x y = 1 with the dense left-multiplication matrix (float64)."""
    L = np.stack([alg.gp(x, e) for e in np.eye(alg.dim)], axis=-1)  # column j: x e_j
    return np.linalg.solve(L, np.eye(alg.dim)[0])


@pytest.mark.parametrize("signature", [(3,), (4, 1), (7,)])
def test_multivector_inv_of_huge_and_tiny_inputs(signature):
    from galinear import MultiVector

    alg = Algebra(*signature)
    e1 = MultiVector.blade(alg, "e1")
    np.testing.assert_allclose((1e200 * e1).inv().values, (1e-200 * e1).values, rtol=1e-15)
    np.testing.assert_allclose((1e-200 * e1).inv().values, (1e200 * e1).values, rtol=1e-15)
    # a general (non-versor) multivector, scaled by 1e250 and 1e-250, against the dense solve
    x = alg.scalar(1.0) + alg.blade("e1", 2.0) + alg.blade("e12", 3.0) + alg.blade("e2", -0.5)
    want = _left_matrix_inverse(alg, x)
    for s in (1e250, 1e-250):
        got = MultiVector(alg, s * x).inv().values
        np.testing.assert_allclose(got * s, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    batch = MultiVector(alg, np.stack([1e200 * e1.values, 1e-200 * e1.values, x]))
    np.testing.assert_allclose(batch.inv().values[:2, 1], [1e-200, 1e200], rtol=1e-15)
    with pytest.raises(OverflowError, match=r"overflows float64.*1e-320.*1\.8e\+308"):
        (1e-320 * e1).inv()
    # float32: inverted in float64 and rounded back; 1/x beyond 3.4e38 is named as overflow
    e1f = e1.astype(np.float32)
    for s in (1e30, 1e-30, 2e38):
        got = (np.float32(s) * e1f).inv()
        assert got.dtype == np.float32
        np.testing.assert_allclose(got.values[1], 1 / np.float64(np.float32(s)), rtol=1e-6 if s < 1e38 else 1e-2)
    with pytest.raises(OverflowError, match=r"overflows float32.*3\.4e\+38"):
        (np.float32(1e-39) * e1f).inv()
