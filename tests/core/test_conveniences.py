"""Conveniences of galinear.MultiVector: scalar ``&``, float/abs/clean/sqrt, arrays of scalars,
complex refusal, the keyword constructor, zero-based PGA names, interop errors, blade and batch
indexing, and LaTeX through sympy. References: clifford for the regressive product and norms,
the rotor exponential at half the angle for sqrt, dense arrays for the batched scalars."""
import numpy as np
import pytest

from galinear import Algebra, MultiVector


@pytest.fixture
def cl3():
    alg = Algebra(3)
    return alg, MultiVector.basis(alg)


def _rand(rng, alg, shape=(), dtype=np.float64):
    return MultiVector(alg, rng.standard_normal(tuple(shape) + (alg.dim,)).astype(dtype))


@pytest.mark.parametrize("signature", [(3, 0, 0), (3, 0, 1), (4, 1, 0)])
def test_scalar_regressive_from_the_left(rng, signature):
    clifford = pytest.importorskip("clifford", reason="the reference regressive product is clifford's")
    del clifford
    alg = Algebra(*signature)
    x = _rand(rng, alg, (4,))
    got = 1.5 & x
    assert got.allclose(MultiVector.scalar(alg, 1.5) & x) and got.allclose(x & 1.5)
    # s v x keeps only the pseudoscalar part of x, as a scalar: compare with clifford's vee
    cx = MultiVector(alg, x.values[0]).to_clifford()
    want = MultiVector(alg, np.eye(alg.dim)[0] * 1.5).to_clifford() & cx
    assert np.allclose(got.values[0], alg.from_clifford(want), atol=1e-12)
    assert np.allclose(got.values[..., 0], 1.5 * x.values[..., -1]) and np.all(got.values[..., 1:] == 0)


def test_float_abs_and_clean(cl3, rng):
    alg, b = cl3
    assert float(b["e1"] * b["e1"]) == 1.0 and isinstance(float(MultiVector.scalar(alg, 2)), float)
    with pytest.raises(ValueError, match=r"non-scalar parts.*float\(mv.grade\(0\)\)"):
        float(b["e1"] + 2.0)
    with pytest.raises(TypeError, match="batched"):
        float(MultiVector.scalar(alg, [1.0, 2.0]))
    x = _rand(rng, alg)
    cx = x.to_clifford()
    assert np.isclose(abs(x), abs(cx), rtol=1e-12) and np.ndim(abs(x)) == 0  # clifford's abs: the norm
    batch = _rand(rng, alg, (3,))
    assert np.allclose(abs(batch), batch.norm()) and abs(batch).shape == (3,)
    noisy = x + 1e-14 * b["e123"] - x["e123"] * b["e123"]  # e123 part now ~1e-14
    cleaned = noisy.clean(1e-12)
    assert cleaned["e123"] == 0.0 and 3 not in cleaned.known_grades
    assert np.array_equal(cleaned.values[:7], noisy.values[:7])
    assert x.astype(np.float32).clean(1e-6).dtype == np.float32
    with pytest.raises(ValueError, match="eps >= 0"):
        x.clean(-1.0)


@pytest.mark.parametrize("signature", [(3, 0, 0), (2, 0, 0), (4, 0, 0), (3, 0, 1)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rotor_sqrt_is_the_half_angle_rotor(rng, signature, dtype):
    alg = Algebra(*signature)
    tol = {np.float64: 1e-10, np.float32: 2e-5}[dtype]
    B = MultiVector.bivector(alg, rng.uniform(-0.8, 0.8, (5, alg.num_bivectors)))
    if 0 in alg.metric:  # PGA: a simple motor (a rotation about a line plus a translation along it)
        B = MultiVector.bivector(alg, np.array([[0.3, 0.0, 0.0, 0.5, 0.0, 0.0]] * 5)) * rng.uniform(0.5, 1.5, (5,))
    R = B.exp().astype(dtype)
    S = R.sqrt()
    assert S.dtype == dtype
    assert (S * S).allclose(R, rtol=0, atol=tol)
    assert S.allclose((B * 0.5).exp(), rtol=0, atol=tol)  # angles within (-pi, pi): the principal root
    with pytest.raises(ValueError):
        (R + MultiVector.vector(alg, np.ones(alg.n))).sqrt()


@pytest.mark.nojit
def test_arrays_of_scalars_are_batches(cl3):
    alg, b = cl3
    e1 = b["e1"]
    for got in (np.arange(3.0) * e1, e1 * np.arange(3.0), np.arange(3) * e1):
        assert got.shape == (3,) and got.known_grades == (1,)
        assert np.array_equal(got.values, np.arange(3.0)[:, None] * e1.values)
    s = np.arange(3.0)
    assert np.array_equal((s + e1).values[:, 0], s) and np.array_equal((e1 - s).values[:, 0], -s)
    assert np.allclose((e1 / (s + 1)).values[:, 1], 1 / (s + 1))
    assert (s[:, None] * MultiVector.vector(alg, np.ones((4, 3)))).shape == (3, 4)
    assert (np.float32(2.0) * e1.astype(np.float32)).dtype == np.float32


def test_complex_coefficients_are_refused_with_the_reason(cl3):
    alg, b = cl3
    for bad in (lambda: b["e1"] * 1j, lambda: MultiVector(alg, np.ones(8) * 1j),
                lambda: MultiVector.from_blades(alg, e1=1j), lambda: b["e1"] + np.ones(3) * 1j):
        with pytest.raises(TypeError, match="complex coefficients are not supported.*pseudoscalar"):
            bad()


def test_keyword_constructor(cl3):
    alg, b = cl3
    x = MultiVector.from_blades(alg, e12=2, e1=1)
    assert x == b["e1"] + 2 * b["e12"] and x.known_grades == (1, 2)
    y = MultiVector.from_blades(alg, {"e21": 2.0, "1": [1.0, 3.0]})
    assert y.shape == (2,) and np.array_equal(y.values[:, 0], [1.0, 3.0]) and np.all(y["e12"] == -2.0)
    with pytest.raises(ValueError, match="'scalar' is given twice"):  # "1" and "scalar" name one blade
        MultiVector.from_blades(alg, {"1": 1.0, "scalar": 1.0})
    assert MultiVector.from_blades(alg, e1=np.float32(1) * np.ones(2, np.float32)).dtype == np.float32
    with pytest.raises(KeyError, match="no blade named 'e14'"):
        MultiVector.from_blades(alg, e14=1.0)
    with pytest.raises(ValueError, match="at least one blade"):
        MultiVector.from_blades(alg)
    with pytest.raises(ValueError, match="finite"):
        MultiVector.from_blades(alg, e1=np.nan)


def test_zero_based_names_in_pga():
    alg = Algebra(3, 0, 1)
    assert alg.metric[0] == 0  # the null vector is galinear's e1
    x = MultiVector(alg, np.arange(16.0))
    assert x["e0"] == x["e1"] == 1.0 and x.e0 == x["e0"]
    assert x["e01"] == x["e12"] and x["e10"] == -x["e12"] and x["e023"] == x["e134"] and x["e0123"] == x["e1234"]
    zb = MultiVector.basis(alg, zero_based_names=True)
    assert list(zb)[:5] == ["1", "e0", "e1", "e2", "e3"]
    assert zb["e0"] * zb["e0"] == 0.0 and float(zb["e1"] * zb["e1"]) == 1.0
    assert MultiVector.blade(alg, "e0") == MultiVector.blade(alg, "e1")
    y = MultiVector.zeros(alg)
    y["e03"] = 2.0
    assert y["e14"] == 2.0
    pytest.importorskip("kingdon", reason="the name check against kingdon needs the kingdon package")
    k = x.to_kingdon()
    for name in ("e0", "e01", "e03", "e023", "e0123"):  # names with a 0 mean what kingdon's mean
        assert np.isclose(getattr(k, name), x[name]), name
    assert x["e123"] == k.e012 and x["e234"] == k.e123  # names without a 0 stay one-based
    with pytest.raises(KeyError, match="zero-based names use e0"):
        x["e04"]
    with pytest.raises(KeyError, match="no blade named 'e0'"):
        MultiVector(Algebra(3), np.zeros(8))["e0"]
    with pytest.raises(ValueError, match="one null basis vector"):
        MultiVector.basis(Algebra(3), zero_based_names=True)


def test_interop_errors_name_the_conversion(cl3):
    alg, b = cl3
    clifford = pytest.importorskip("clifford", reason="needs clifford for its multivector type")
    del clifford
    with pytest.raises(TypeError, match=r"clifford.MultiVector; convert it first with MultiVector.from_clifford"):
        b["e1"] * b["e1"].to_clifford()
    pytest.importorskip("kingdon", reason="needs kingdon for its multivector type")
    with pytest.raises(TypeError, match=r"MultiVector.from_kingdon\(x\)"):
        b["e1"] + b["e1"].to_kingdon()
    with pytest.raises(TypeError, match="np.asarray"):
        b["e1"] * [1.0, 2.0]


def test_blade_and_batch_indexing(cl3, rng):
    alg, b = cl3
    x = _rand(rng, alg)
    for name in ("e12", "e21", "1", "e123", "e312"):
        assert isinstance(x[name], np.float64), name
    assert x["e21"] == -x["e12"] and x["e312"] == x["e123"]
    with pytest.raises(IndexError, match="unbatched MultiVector has no batch axis.*mv\\['e12'\\]"):
        x[0]
    batch = _rand(rng, alg, (4, 2))
    assert isinstance(batch["e12"], np.ndarray) and batch["e12"].shape == (4, 2)
    assert np.array_equal(batch["e21"], -batch["e12"])
    assert batch[1].shape == (2,) and batch[1, 0].shape == () and batch[..., 0].shape == (4,)
    with pytest.raises(IndexError, match="2 batch axes"):
        batch[0, 0, 0]
    assert x.astype(np.float32)["e12"].dtype == np.float32


def test_latex_through_sympy(cl3):
    sp = pytest.importorskip("sympy", reason="sympy's printer calls the _latex hook")
    alg, b = cl3
    x = 2 * b["e1"] + 3 * b["e12"] - b["e123"]
    assert sp.latex(x) == r"2\,e_{1} + 3\,e_{12} - e_{123}" == x.latex()
    assert sp.latex(MultiVector.zeros(alg)) == "0"
    assert "text" not in sp.latex(MultiVector.vector(alg, np.ones((2, 3))))
    assert x._repr_latex_() == f"${x.latex()}$"


def test_algebra_multivector_constructor(cl3):
    alg, b = cl3
    x = alg.multivector(e12=2, e1=1)
    assert isinstance(x, MultiVector) and x.algebra == alg
    by_hand = MultiVector(alg, alg.blade("e1") + 2 * alg.blade("e12"))
    assert x == by_hand and x.known_grades == (1, 2)
    y = alg.multivector({"e31": [1.0, 2.0], "1": 0.5}, e2=3)
    assert y.shape == (2,) and np.array_equal(y["e13"], [-1.0, -2.0]) and np.all(y["1"] == 0.5)
    assert y == MultiVector.from_blades(alg, {"e31": [1.0, 2.0], "1": 0.5}, e2=3)
    pga = Algebra(3, 0, 1)
    assert pga.multivector(e0=1, e01=2) == MultiVector(pga, pga.blade("e1") + 2 * pga.blade("e12"))
    with pytest.raises(KeyError, match="no blade named 'e14'.*e12"):
        alg.multivector(e14=1.0)
    with pytest.raises(KeyError, match="no blade named 'x'"):
        alg.multivector({"x": 1.0})
    with pytest.raises(ValueError, match="at least one blade"):
        alg.multivector()


def test_a_blade_given_twice_is_refused_not_summed():
    import galinear

    alg = galinear.Algebra(4)
    for make in (lambda: alg.multivector({"e12": 2}, e12=3), lambda: alg.multivector(e12=2, e21=3)):
        with pytest.raises(ValueError, match="given twice"):
            make()
    assert alg.multivector(e12=2, e13=3)["e13"] == 3


def test_truth_value_of_a_multivector():
    import galinear

    alg = galinear.Algebra(3)
    assert bool(alg.multivector(e1=1.0)) and not bool(alg.multivector(e1=0.0))
    with pytest.raises(ValueError, match="ambiguous"):
        bool(galinear.MultiVector(alg, np.zeros((2, 8))))
