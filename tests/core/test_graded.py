"""Grade-aware products (galinear.core.graded) against the dense kernels, clifford and kingdon.

A MultiVector with known grades runs only the terms its grades need; every result must equal
the dense product of the same arrays (float64: 1e-12, float32: 1e-5 relative to the product of
the operands' norms), clifford's tables and kingdon's generated code, and the coefficients
outside the reported grades must be exactly zero.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from galinear import Algebra, MultiVector
from galinear.core import graded
from galinear.testing import clifford_reference

SIGNATURES = [(3, 0, 0), (3, 0, 1), (4, 1, 0), (3, 1, 0), (1, 1, 1), (2, 0, 2)]
TOL = {np.float64: 1e-12, np.float32: 1e-5}
KINDS = {"gp": lambda a, b: a * b, "op": lambda a, b: a ^ b, "lc": lambda a, b: a << b, "rc": lambda a, b: a >> b}


def _graded(rng, alg, grades, shape=(5,), dtype=np.float64):
    values = rng.standard_normal(tuple(shape) + (alg.dim,))
    values[..., ~np.isin(alg.grades, grades)] = 0.0
    return MultiVector(alg, values.astype(dtype), grades=grades)


def _pattern_pairs(n):
    even = tuple(range(0, n + 1, 2))
    odd = tuple(range(1, n + 1, 2))
    return [((1,), (1,)), ((2,), (1,)), (even, even), (odd, (n,)), ((0, 2), (1, 3) if n >= 3 else (1,))]


def _assert_close(got, want, scale, tol):
    err = np.max(np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64)), initial=0.0)
    assert err <= tol * max(scale, 1e-300), (err, tol * scale)


def _outside_is_zero(mv):
    outside = ~np.isin(mv.algebra.grades, mv.known_grades)
    assert np.all(mv.values[..., outside] == 0)


@pytest.mark.parametrize("signature", SIGNATURES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_products_match_dense_and_clifford(signature, dtype, rng):
    alg = Algebra(*signature)
    for ga, gb in _pattern_pairs(alg.n):
        a, b = _graded(rng, alg, ga, dtype=dtype), _graded(rng, alg, gb, dtype=dtype)
        A, B = a.values.astype(np.float64), b.values.astype(np.float64)
        scale = float(np.max(np.linalg.norm(A, axis=-1) * np.linalg.norm(B, axis=-1)))
        for kind, op in KINDS.items():
            got = op(a, b)
            assert got.dtype == dtype and got.known_grades is not None
            _outside_is_zero(got)
            _assert_close(got.values, getattr(alg, kind)(A, B), scale, TOL[dtype])
            _assert_close(got.values, clifford_reference(alg, kind, A, B), scale, TOL[dtype])


@pytest.mark.parametrize("signature", SIGNATURES)
def test_sandwich_matches_two_products(signature, rng):
    alg = Algebra(*signature)
    even = tuple(range(0, alg.n + 1, 2))
    for gx in [(1,), (2,), (alg.n - 1,), (0, 1, 2)]:
        R, x = _graded(rng, alg, even), _graded(rng, alg, gx)
        got = R @ x
        want = alg.gp(alg.gp(R.values, x.values), alg.reverse(R.values))
        _outside_is_zero(got)
        scale = float(np.max(np.linalg.norm(R.values, axis=-1) ** 2 * np.linalg.norm(x.values, axis=-1)))
        _assert_close(got.values, want, scale, 1e-12)


@pytest.mark.parametrize("signature", SIGNATURES)
def test_against_kingdon(signature, rng):
    kingdon = pytest.importorskip("kingdon", reason="kingdon is a second reference (test extra: pip install kingdon)")
    alg = Algebra(*signature)
    kalg = kingdon.Algebra(*signature)
    even = tuple(range(0, alg.n + 1, 2))
    for ga, gb in [((1,), (1,)), ((2,), (1,)), (even, even), ((1,), (alg.n - 1,)), ((2,), (0, 2))]:
        a, b = _graded(rng, alg, ga, ()), _graded(rng, alg, gb, ())
        ka, kb = a.to_kingdon(kalg), b.to_kingdon(kalg)
        scale = float(np.linalg.norm(a.values) * np.linalg.norm(b.values))
        for ours, theirs in [(a * b, ka * kb), (a ^ b, ka ^ kb), (a | b, ka | kb), (a & b, ka & kb),
                             (a << b, ka.lc(kb)), (a >> b, ka.rc(kb))]:
            _assert_close(ours.values, MultiVector.from_kingdon(theirs, alg).values, scale, 1e-12)
    R = _graded(rng, alg, (2,), (7,)).exp()  # kingdon's >> assumes a unit versor (R ~R = 1)
    x = _graded(rng, alg, (1,), (7,))
    ours = R @ x
    theirs = MultiVector.from_kingdon(R.to_kingdon(kalg) >> x.to_kingdon(kalg), alg)
    scale = float(np.max(np.linalg.norm(R.values, axis=-1) ** 2 * np.linalg.norm(x.values, axis=-1)))
    _assert_close(ours.values, theirs.values, scale, 1e-12)
    # kingdon drops the grades that vanish for unit versors; ours keeps those that vanish for
    # every even R (in Cl(4,1) an even R x ~R can have a grade-3 part), so it is a superset
    assert set(theirs.known_grades) <= set(ours.known_grades)


def test_cost_follows_the_grades():
    """A vector times a vector in Cl(10) runs n**2 terms (the dense product 4**n)."""
    n = 10
    alg = Algebra(n)
    terms = graded._kept_terms(alg.metric, "gp", 0b10, 0b10)
    assert terms[0].size == n * n
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((2, 4, n))
    got = MultiVector.vector(alg, u) * MultiVector.vector(alg, v)
    assert got.known_grades == (0, 2)
    _assert_close(got.values[..., 0], np.sum(u * v, axis=-1), 10.0, 1e-14)
    wedge = np.array([u[:, i] * v[:, j] - u[:, j] * v[:, i] for i in range(n) for j in range(i + 1, n)]).T
    _assert_close(alg.bivector_coefficients(got.values), wedge, 10.0, 1e-14)


def test_broadcast_nan_and_readonly(rng):
    alg = Algebra(3, 0, 1)
    R = _graded(rng, alg, (0, 2, 4), ())
    x = _graded(rng, alg, (3,), (6, 2))
    _assert_close((R @ x).values, alg.gp(alg.gp(R.values, x.values), alg.reverse(R.values)), 100.0, 1e-13)
    _assert_close((x * R).values, alg.gp(x.values, R.values), 100.0, 1e-13)
    bad = x.values.copy()
    bad[1, 0, 11] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        R * MultiVector(alg, bad, grades=(3,))
    with pytest.raises(ValueError):
        x.values[0, 0, 0] = 1.0  # tracked values are read-only
    x["e1"] = 2.0  # naming a blade is the way to set one, and it records the grade
    assert x.known_grades == (1, 3) and np.all(x.values[..., 1] == 2.0)
    with pytest.raises(ValueError, match="outside"):
        MultiVector(alg, rng.standard_normal(alg.dim), grades=(1,))
    assert (MultiVector.zeros(alg, 3) * R).known_grades == ()


def test_each_graded_kernel_compiles_once_per_dtype(monkeypatch, rng):
    """Read-only, writable, broadcast and strided operands reach a graded kernel as one array
    kind: one compile per dtype (numba types read-only and writable arrays differently)."""
    from galinear._numba import jit

    alg = Algebra(3)
    vector = 0b10
    kernels = {}
    for name in ("_product_kernel", "_packed_product_kernel"):
        original = getattr(graded, name)
        # a new dispatcher of the same code: its signatures are those of this test's calls only
        kernels[name] = jit(original(alg.metric, "gp", vector, vector).py_func)
        monkeypatch.setattr(graded, name, lambda *key, kernel=kernels[name]: kernel)
    columns = graded.blades_of(alg.n, vector)
    for dtype in (np.float64, np.float32):
        u, v = rng.standard_normal((2, 4, alg.dim)).astype(dtype)
        u[:, ~np.isin(alg.grades, 1)] = 0.0
        v[:, ~np.isin(alg.grades, 1)] = 0.0
        frozen = v.copy()
        frozen.setflags(write=False)
        for a, b in ((u, v), (u, frozen), (frozen, u[:1]), (np.repeat(u, 2, axis=0)[::2], frozen)):
            want = alg.gp(a, b)
            got, _ = graded.product(alg, "gp", a, vector, b, vector)
            _assert_close(got, want, 100.0, TOL[dtype])
            packed, pattern = graded.product_packed(alg, "gp", a[:, columns], vector, b[:, columns], vector)
            _assert_close(graded.unpack(alg.n, packed, pattern), want, 100.0, TOL[dtype])
    for name, kernel in kernels.items():
        signatures = [", ".join(map(str, s)) for s in kernel.signatures]
        assert len(signatures) == 2, (f"{name} compiled {len(signatures)} times for 2 dtypes:\n"
                                      + "\n".join(signatures))


@settings(max_examples=12, deadline=None)
@given(st.sampled_from(SIGNATURES), st.lists(st.integers(0, 4), min_size=1, max_size=3),
       st.lists(st.integers(0, 4), min_size=1, max_size=3), st.integers(0, 2**31 - 1))
def test_reported_grades_follow_the_rules(signature, ga, gb, seed):
    """The pattern of each product is the grade rule applied to the operands' grades."""
    alg = Algebra(*signature)
    ga = tuple(sorted({g % (alg.n + 1) for g in ga}))
    gb = tuple(sorted({g % (alg.n + 1) for g in gb}))
    rng = np.random.default_rng(seed)
    a, b = _graded(rng, alg, ga, (2,)), _graded(rng, alg, gb, (2,))
    for kind, op in KINDS.items():
        got = op(a, b)
        rule = graded.product_pattern(alg.n, kind, graded.mask_of(ga), graded.mask_of(gb))
        assert got.known_grades == graded.grades_of(rule)
        _outside_is_zero(got)


@pytest.mark.parametrize("signature", [(3, 0, 1), (4, 1, 0), (2, 0, 2)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_packed_products_stay_packed(signature, dtype, rng):
    """Products of tracked multivectors read and write the columns of their grades only: the
    result holds no dense array until one is asked for, chains stay packed, and every value
    equals the dense product of the same arrays (with exact zeros outside the grades)."""
    alg = Algebra(*signature)
    R = _graded(rng, alg, (0, 2), (), dtype)
    x = _graded(rng, alg, (1,), (4, 3), dtype)
    t = R * x  # one operand broadcast against a batch
    assert t._values is None and t._packed.shape == (4, 3, len(graded.blades_of(alg.n, t._pattern)))
    assert t.shape == (4, 3) and t.ndim == 2 and t.dtype == dtype and len(t) == 4
    assert t._values is None  # shape, ndim, dtype and len read the packed array
    y = t * ~R  # a packed left operand (the reverse is dense: the dense path takes over)
    s = R @ x
    assert s._values is None and s._pattern == graded.sandwich_pattern(alg.n, alg.metric, R._pattern, x._pattern)
    w = (t ^ x) << s  # packed operands on both sides
    assert w._values is None
    Rv, xv = R.values.astype(np.float64), x.values.astype(np.float64)
    tv = alg.gp(Rv, xv)
    scale = float(np.abs(Rv).sum() * np.abs(xv).max()) ** 2
    _assert_close(t.values, tv, scale, TOL[dtype])
    _assert_close(y.values, alg.gp(tv, alg.reverse(Rv)), scale, TOL[dtype])
    _assert_close(s.values, alg.gp(tv, alg.reverse(Rv)), scale, TOL[dtype])
    _assert_close(w.values, alg.lc(alg.op(tv, xv), alg.gp(tv, alg.reverse(Rv))), scale ** 2, TOL[dtype])
    for mv in (t, s, w):
        assert mv.values.dtype == dtype and not mv.values.flags.writeable
        _outside_is_zero(mv)
    # the packed array of an operand is made once and kept
    assert R._packed is not None and R._packed is R._packed_values()
    # setting a blade by name drops the packed copy with the old values
    t["e1"] = 5.0
    assert t._packed is None and np.all(t.values[..., 1] == 5.0)
    assert np.all((t * 1.0).values[..., 1] == 5.0)


def test_packed_edge_cases(rng):
    alg = Algebra(3, 0, 1)
    zero = MultiVector.zeros(alg, 2)
    x = _graded(rng, alg, (1,), (2,))
    assert (zero * x)._packed.shape == (2, 0) and np.all((zero * x).values == 0)
    empty = _graded(rng, alg, (1,), (0,))
    assert (empty * x[:0]).shape == (0,)
    full = _graded(rng, alg, tuple(range(5)), (2,))  # every grade: the dense kernels
    assert (full * x)._values is not None
    with pytest.raises(ValueError, match="cannot combine"):
        x * _graded(rng, Algebra(3), (1,), (2,))
    bad = x.values.copy()
    bad[0, 2] = np.inf
    with pytest.raises(ValueError, match="inf"):
        MultiVector(alg, bad, grades=(1,)) @ x


@pytest.mark.parametrize("signature", [(3, 0, 1), (4, 1, 0), (2, 0, 2)])
def test_packed_kernels_equal_the_symbolic_products(signature):
    """The packed kernels, generated from the blade tables, against the symbolic layer's products
    (sympy, exact integers) on integer coefficients: equal to the last bit."""
    import sympy as sp

    from galinear.symbolic import MultiVector as Symbolic

    alg = Algebra(*signature)
    rng = np.random.default_rng(11)
    ops = {"gp": lambda a, b: a * b, "op": lambda a, b: a ^ b, "lc": lambda a, b: a << b,
           "rc": lambda a, b: a >> b, "sw": lambda a, b: a @ b}
    for ga, gb in _pattern_pairs(alg.n):
        values = []
        for grades in (ga, gb):
            v = rng.integers(-5, 6, size=(3, alg.dim)).astype(np.float64)
            v[:, ~np.isin(alg.grades, grades)] = 0.0
            values.append(v)
        A, B = MultiVector(alg, values[0], grades=ga), MultiVector(alg, values[1], grades=gb)
        for kind, op in ops.items():
            got = op(A, B)
            assert got._values is None  # the packed path ran
            for row in range(3):
                a, b = (Symbolic(alg.metric, [sp.Integer(int(x)) for x in v[row]]) for v in values)
                want = np.array([float(c) for c in op(a, b).coefficients])
                assert np.array_equal(got.values[row], want), (kind, ga, gb)


def test_a_kernel_found_on_disk_is_loaded_without_sympy(tmp_path):
    """Kernels are keyed by (layout, metric, kind, patterns, generator version): the first process
    prints one through galinear.symbolic.numba_source, the next loads it without sympy (an import
    of sympy would fail there) and gives the same bits (an edited file is printed again:
    tests/test_cache_trust.py)."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    script = ("import sys, numpy as np\n"
              "if sys.argv[1] == 'warm': sys.modules['sympy'] = None\n"
              "from galinear import Algebra\nfrom galinear.core import graded\n"
              "A = Algebra(3, 0, 1); a = np.linspace(-1, 1, 16); b = np.cos(np.arange(16.0))\n"
              "v, _ = graded.product(A, 'gp', a, 0b10101, b, 0b1000)\n"
              "print(repr(v.tolist()), 'sympy' in sys.modules and sys.modules['sympy'] is not None)\n")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))

    def run(mode):
        done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, env=env,
                              timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()[-1], done.stdout.rsplit(" ", 1)[0]

    printed, cold = run("cold")
    assert printed == "True"  # a missing kernel is printed through the symbolic layer
    (module,) = (cache / "galinear_graded").glob("graded_*.py")
    assert "galinear.symbolic.numba_source" in module.read_text()
    printed, warm = run("warm")
    assert printed == "False" and warm == cold
