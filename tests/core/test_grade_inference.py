"""Grades inferred from construction and from arrays (galinear.core.mvfast.infer_pattern).

Every constructor records the grades it makes; a MultiVector built from a bare array reads them
from the array's all-zero columns. The inferred grades must equal the declared ones, and every
product, sandwich and sum must equal the dense product of the same arrays (the Algebra's
kernels, which know nothing of grades): float64 to 1e-12, float32 to 1e-5, relative to the
product of the operands' norms.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear import Algebra, MultiVector
from galinear.core import graded, products
from galinear.core.mvfast import infer_pattern

SIGNATURES = [(3, 0, 0), (3, 0, 1), (4, 1, 0), (1, 3, 0), (2, 0, 2)]
TOL = {np.float64: 1e-12, np.float32: 1e-5}


def _draw(rng, alg, grades, shape=(), dtype=np.float64):
    """Coefficients with every blade of ``grades`` non-zero (away from 0) and the rest exactly 0."""
    values = rng.uniform(0.5, 1.5, tuple(shape) + (alg.dim,)) * rng.choice([-1.0, 1.0], tuple(shape) + (alg.dim,))
    values[..., ~np.isin(alg.grades, grades)] = 0.0
    return values.astype(dtype)


def _close(got, want, scale, dtype):
    err = np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)), initial=0.0)
    assert err <= TOL[dtype] * max(scale, 1.0), err


@pytest.mark.parametrize("signature", SIGNATURES)
def test_constructors_record_the_grades_that_inference_finds(signature):
    alg = Algebra(*signature)
    n, rng = alg.n, np.random.default_rng(1)
    made = {
        "zeros": (MultiVector.zeros(alg, (2,)), ()),
        "scalar": (MultiVector.scalar(alg, 2.5), (0,)),
        "vector": (MultiVector.vector(alg, rng.uniform(1, 2, (3, n))), (1,)),
        "bivector": (MultiVector.bivector(alg, rng.uniform(1, 2, alg.num_bivectors)), (2,)),
        "blade": (MultiVector.blade(alg, "e21"), (2,)),
        "pseudoscalar": (MultiVector.pseudoscalar(alg), (n,)),
        "from_blades": (MultiVector.from_blades(alg, e1=1.0, e12=[2.0, 3.0]), (1, 2)),
    }
    made.update({f"basis {name}": (b, (int(alg.grades[i]),)) for i, (name, b) in enumerate(MultiVector.basis(alg).items())})
    made.update({f"e{i + 1}": (e, (1,)) for i, e in enumerate(MultiVector.basis_vectors(alg))})
    for name, (mv, declared) in made.items():
        assert mv.known_grades == declared, name
        # the same coefficients as a bare array: the grades are read back from the zero columns
        assert MultiVector(alg, np.array(mv.values)).known_grades == declared, name
        assert infer_pattern(alg, mv.values) == graded.mask_of(declared), name


@pytest.mark.parametrize("signature", SIGNATURES)
def test_conversions_keep_the_grades(signature):
    pytest.importorskip("clifford", reason="the conversion test needs the clifford package")
    pytest.importorskip("kingdon", reason="the conversion test needs the kingdon package")
    alg = Algebra(*signature)
    rng = np.random.default_rng(2)
    for grades in [(1,), (2,), (0, 2), tuple(range(0, alg.n + 1, 2)), (1, alg.n)]:
        declared = MultiVector(alg, _draw(rng, alg, grades, (3,)), grades=grades)
        back = MultiVector.from_clifford(declared.to_clifford(), alg)
        assert back.known_grades == declared.known_grades and np.array_equal(back.values, declared.values)
        king = MultiVector.from_kingdon(declared.to_kingdon(), alg)
        assert king.known_grades == declared.known_grades and np.array_equal(king.values, declared.values)


@pytest.mark.nojit
def test_inference_is_exact_over_the_batch():
    alg = Algebra(4)
    values = np.zeros((3, 2, alg.dim))
    values[2, 1, alg.blade_names.index("e123")] = 1e-300  # one tiny coefficient in one entry
    values[0, 0, 0] = -2.0
    x = MultiVector(alg, values)
    assert x.known_grades == (0, 3)
    values[1, 0, 1] = np.nan  # NaN is not zero: the grade counts as present
    assert MultiVector(alg, values).known_grades == (0, 1, 3)
    assert MultiVector(alg, np.zeros((0, alg.dim))).known_grades == ()
    assert MultiVector(alg, -np.zeros(alg.dim)).known_grades == ()  # -0.0 is zero


def test_inferred_values_are_read_only_and_setting_a_blade_updates_the_grades():
    alg = Algebra(3)
    x = MultiVector(alg, [0, 1.0, 0, 0, 0, 0, 0, 0])
    assert x.known_grades == (1,)
    with pytest.raises(ValueError, match="read-only"):
        x.values[0] = 3.0
    x["e12"] = 2.0
    assert x.known_grades == (1, 2) and x["e12"] == 2.0
    assert (x * x).allclose(MultiVector(alg, alg.gp(x.values, x.values)))


def test_above_the_table_limit_values_stay_untracked():
    alg = Algebra(products.TABLE_MAX_N + 1)
    x = MultiVector(alg, np.eye(alg.dim)[1])
    assert x.known_grades is None
    assert np.array_equal((x * x).values, alg.gp(x.values, x.values))


# Operand shapes: single multivectors and batches broadcast against each other (materialised);
# both reach the kernels as read-only arrays, so they share one compile per dtype.
SHAPES = {"single": ((), ()), "broadcast": ((2, 1), (3,))}
# Every (signature, dtype) compiles its own kernels per grade pattern (10 to 35 s each with a cold
# numba cache). `make test` runs every signature but Cl(1,3) in float64 on single multivectors (each
# metric's generated kernels) and the broadcast shapes in PGA (the same kernels again: no compile); float32
# products and sandwiches of tracked multivectors are compared in test_graded.py. The float32
# combinations compile the same kernel sources again in single precision: `make test-slow`.
# Cl(1,3) and Cl(4,1) are in `make test-slow` too (Cl(4,1) alone compiles for about 27 s): the
# graded products of Cl(4,1) are compared with the dense path and clifford in test_graded.py, and
# the inference rules are the same code for every metric (Cl(3), PGA and Cl(2,0,2) here).
_FAST = {(sig, np.float64, "single") for sig in SIGNATURES if sig not in ((1, 3, 0), (4, 1, 0))}
_FAST |= {((3, 0, 1), np.float64, "broadcast")}
_PRODUCT_CASES = [
    pytest.param(sig, dt, shapes, id=f"cl{''.join(map(str, sig))}-{np.dtype(dt).name}-{shapes}",
                 marks=() if (sig, dt, shapes) in _FAST else pytest.mark.slow)
    for dt in (np.float64, np.float32) for shapes in SHAPES for sig in SIGNATURES
]


@pytest.mark.parametrize("signature, dtype, shapes", _PRODUCT_CASES)
def test_inferred_products_equal_the_dense_path(signature, dtype, shapes):
    alg = Algebra(*signature)
    rng = np.random.default_rng(3)
    n = alg.n
    patterns = [(1,), (2,), tuple(range(0, n + 1, 2)), tuple(range(n + 1))]
    kinds = {"gp": lambda a, b: a * b, "op": lambda a, b: a ^ b, "lc": lambda a, b: a << b,
             "rc": lambda a, b: a >> b}
    shape_a, shape_b = SHAPES[shapes]
    for ga in patterns:
        for gb in patterns[::3]:
            a_values, b_values = _draw(rng, alg, ga, shape_a, dtype), _draw(rng, alg, gb, shape_b, dtype)
            a, b = MultiVector(alg, a_values), MultiVector(alg, b_values)
            assert a.known_grades == ga and b.known_grades == gb
            scale = float(np.abs(a_values).sum() * np.abs(b_values).sum())
            for kind, fn in kinds.items():
                got = fn(a, b)
                want = getattr(alg, kind)(a_values.astype(np.float64), b_values.astype(np.float64))
                assert got.dtype == dtype and got.shape == np.broadcast_shapes(shape_a, shape_b)
                _close(got.values, want, scale, dtype)
                assert set(got.known_grades) <= set(graded.grades_of(graded.product_pattern(n, kind, a._pattern, b._pattern)))
            got = a @ b  # the sandwich a b ~a
            want = alg.gp(alg.gp(a_values.astype(np.float64), b_values), alg.reverse(a_values.astype(np.float64)))
            _close(got.values, want, scale * float(np.abs(a_values).sum()), dtype)
            _close((a + b).values, a_values.astype(np.float64) + b_values, 1.0, dtype)


def test_motors_on_points_take_the_graded_kernels_without_declared_grades():
    alg = Algebra(3, 0, 1)
    rng = np.random.default_rng(4)
    motors = MultiVector(alg, alg.exp(_draw(rng, alg, (2,), (50,)) * 0.3))
    points = MultiVector(alg, _draw(rng, alg, (3,), (50,)))
    assert motors.known_grades == (0, 2, 4) and points.known_grades == (3,)
    moved = motors @ points
    assert moved.known_grades == (3,) and moved._values is None  # held packed: the graded kernel ran
    want = alg.gp(alg.gp(motors.values, points.values), alg.reverse(motors.values))
    _close(moved.values, want, 1e3, np.float64)


@pytest.mark.nojit
def test_non_finite_operands_are_refused_on_the_short_path():
    alg = Algebra(3)
    a = MultiVector(alg, [0, np.inf, 0, 0, 0, 0, 0, 0])
    b = MultiVector.vector(alg, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="NaN or infinity"):
        a * b


# every new pair of grade sets compiles its own kernels (about 0.6 s each with a cold cache): a third of the
# profile's examples (13 in make test, 166 under the thorough profile)
@settings(max_examples=max(10, settings.default.max_examples // 3))
@given(ga=st.sets(st.integers(0, 4), min_size=1), gb=st.sets(st.integers(0, 4), min_size=1),
       seed=st.integers(0, 2**16), batched=st.booleans())
def test_inference_and_products_property(ga, gb, seed, batched):
    alg = Algebra(3, 0, 1)
    rng = np.random.default_rng(seed)
    shape = (3,) if batched else ()
    a_values, b_values = _draw(rng, alg, sorted(ga), shape), _draw(rng, alg, sorted(gb), ())
    a, b = MultiVector(alg, a_values), MultiVector(alg, b_values)
    assert a.known_grades == tuple(sorted(ga)) and b.known_grades == tuple(sorted(gb))
    declared = MultiVector(alg, a_values, grades=ga) * MultiVector(alg, b_values, grades=gb)
    got = a * b
    assert got.known_grades == declared.known_grades
    _close(got.values, alg.gp(a_values, b_values), float(np.abs(a_values).sum() * np.abs(b_values).sum()), np.float64)
