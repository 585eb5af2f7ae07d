"""Generated kernels against the numpy references of galinear.testing, the symbolic layer and the core.

Only the gp kernels are shipped (Algebra.gp uses them); sandwich kernels and the torch target
are generated into a temporary folder here, so the generator stays tested for them.
"""
import importlib.util
import tempfile
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from galinear import _generated
from galinear._generated import available, find_kernel, metric_code, module_name
from galinear.symbolic import MultiVector
from galinear.symbolic.closed_forms import sandwich as symbolic_sandwich
from galinear.symbolic.codegen import write_kernel
from galinear.symbolic.spec import KernelSpec

from galinear.testing import assert_close, reference_gp, reference_sandwich, rotor_from_rows

BATCH = 33


def _inputs(rng, dtype, *widths):
    """Read-only C-contiguous inputs: the array type galinear.Algebra hands to the kernels, so
    the tests and the core share one compiled specialisation per dtype."""
    out = []
    for w in widths:
        x = np.ascontiguousarray(rng.standard_normal((BATCH, w)).astype(dtype))
        x.flags.writeable = False
        out.append(x)
    return out


_FOLDER = Path(tempfile.mkdtemp(prefix="galinear-test-kernels-"))


@lru_cache(maxsize=None)
def written_kernel(op, n, target="numba"):
    """A kernel that is not shipped, written by the generator into a temporary folder and imported."""
    path = write_kernel(KernelSpec.euclidean(op, n), target, _FOLDER / target)
    module_spec = importlib.util.spec_from_file_location(f"_test_{target}_{path.stem}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.kernel


def _fast_then_slow(fast, slow):
    return list(fast) + [pytest.param(n, marks=pytest.mark.slow) for n in slow]


@pytest.mark.parametrize("n", _fast_then_slow([1, 2, 3, 4, 5], [6]))
def test_gp_matches_cayley_reference(n, dtype, rng):
    """n = 6 is in the slow tier: compiling its 4,096-term body takes 15-30 s per dtype (its
    source is also proved equal to the symbolic product by proofs/generated_kernels.py)."""
    kernel = find_kernel("gp", (1,) * n)
    assert kernel is not None
    a, b = _inputs(rng, dtype, 1 << n, 1 << n)
    out = np.empty_like(a)
    kernel(a, b, out)
    assert out.dtype == dtype
    assert_close(out, reference_gp(a.astype(np.float64), b.astype(np.float64), n))


def _rotor_width(n):
    return 1 + n * (n - 1) // 2


@pytest.mark.parametrize("n", _fast_then_slow([1, 2, 3, 4], [5, 6]))
def test_sandwich_matches_reference(n, dtype, rng):
    kernel = written_kernel("sandwich", n)
    r, x = _inputs(rng, dtype, _rotor_width(n), 1 << n)
    out = np.empty_like(x)
    kernel(r, x, out)
    R = rotor_from_rows(r.astype(np.float64), n)
    expected = reference_sandwich(x.astype(np.float64), R)
    assert_close(out, expected)


@pytest.mark.parametrize("n", _fast_then_slow([1, 2, 3, 4], [5, 6]))
def test_double_sandwich_matches_reference(n, dtype, rng):
    kernel = written_kernel("sandwich2", n)
    r, s, x = _inputs(rng, dtype, _rotor_width(n), _rotor_width(n), 1 << n)
    out = np.empty_like(x)
    kernel(r, s, x, out)
    R, S = rotor_from_rows(r.astype(np.float64), n), rotor_from_rows(s.astype(np.float64), n)
    expected = reference_sandwich(x.astype(np.float64), R, S)
    assert_close(out, expected)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_kernels_match_symbolic_layer(n, rng):
    """Evaluate the symbolic product exactly at the (float64) inputs and compare."""
    a, b = _inputs(rng, np.float64, 1 << n, 1 << n)
    out = np.empty_like(a)
    find_kernel("gp", n)(a, b, out)
    r, x = _inputs(rng, np.float64, _rotor_width(n), 1 << n)
    out_s = np.empty_like(x)
    written_kernel("sandwich", n)(r, x, out_s)
    for row in range(3):
        A = MultiVector(n, [sp.Float(v, 30) for v in a[row]])
        B = MultiVector(n, [sp.Float(v, 30) for v in b[row]])
        np.testing.assert_allclose(out[row], [float(c) for c in (A * B).coefficients], rtol=1e-13, atol=1e-13)
        R = MultiVector(n, [sp.Float(v, 30) for v in rotor_from_rows(r[row], n)])
        X = MultiVector(n, [sp.Float(v, 30) for v in x[row]])
        got = [float(c) for c in symbolic_sandwich(R, X).coefficients]
        np.testing.assert_allclose(out_s[row], got, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n", _fast_then_slow([2, 4], [5, 6]))
def test_gp_matches_core_table_kernel(n, dtype, rng):
    import galinear.core as galinear
    algebra = galinear.Algebra(n)
    a, b = _inputs(rng, dtype, 1 << n, 1 << n)
    table = algebra.gp(a, b, method="table")
    generated = algebra.gp(a, b, method="generated")
    assert generated.dtype == dtype
    assert_close(generated, table.astype(np.float64))


@pytest.mark.nojit
@pytest.mark.parametrize("n", [2, 3])
def test_gp_and_sandwich_small_nojit(n, rng):
    """Representative subset that also runs with NUMBA_DISABLE_JIT=1 (pure Python semantics)."""
    for dtype in (np.float32, np.float64):
        a, b = _inputs(rng, dtype, 1 << n, 1 << n)
        out = np.empty_like(a)
        find_kernel("gp", n)(a, b, out)
        assert_close(out, reference_gp(a.astype(np.float64), b.astype(np.float64), n))
        r, x = _inputs(rng, dtype, _rotor_width(n), 1 << n)
        out = np.empty_like(x)
        written_kernel("sandwich", n)(r, x, out)
        R = rotor_from_rows(r.astype(np.float64), n)
        assert_close(out, reference_sandwich(x.astype(np.float64), R))


@pytest.mark.nojit
def test_kernel_rejects_wrong_widths_and_batches():
    kernel = find_kernel("gp", 2)
    a = np.zeros((3, 4))
    a.flags.writeable = False
    with pytest.raises(ValueError, match="wrong row widths"):
        kernel(a, np.zeros((3, 8)), np.zeros((3, 4)))
    with pytest.raises(ValueError, match="same batch size"):
        kernel(a, np.zeros((2, 4)), np.zeros((3, 4)))


def test_unit_rotor_sandwich_is_orthogonal_and_keeps_grades(rng):
    """Exact maths, numerically: for a unit simple rotor the map preserves grade and norm."""
    n = 4
    v, w = rng.standard_normal((2, n))
    from galinear import blades

    b = np.array([v[i] * w[j] - v[j] * w[i] for i, j in blades.bivector_pairs(n).tolist()])
    theta = np.linalg.norm(b)
    r = np.concatenate([[np.cos(theta)], np.sin(theta) / theta * b])[None, :]
    grades = blades.blade_grades(n)
    for g in range(n + 1):
        x = np.where(grades == g, rng.standard_normal(1 << n), 0.0)[None, :]
        out = np.empty_like(x)
        written_kernel("sandwich", n)(r, x, out)
        np.testing.assert_allclose(out[0, grades != g], 0.0, atol=1e-12)
        np.testing.assert_allclose(np.linalg.norm(out), np.linalg.norm(x), rtol=1e-12)


@pytest.mark.parametrize("op,n", [("gp", 3), ("gp", 5), ("sandwich", 4), ("sandwich2", 3)])
def test_torch_kernels_match_reference_and_differentiate(op, n, rng):
    torch = pytest.importorskip("torch")
    kernel = written_kernel(op, n, "torch")
    for dtype, np_dtype in ((torch.float32, np.float32), (torch.float64, np.float64)):
        if op == "gp":
            a, b = _inputs(rng, np_dtype, 1 << n, 1 << n)
            got = kernel(torch.tensor(a), torch.tensor(b))
            expected = reference_gp(a.astype(np.float64), b.astype(np.float64), n)
        else:
            widths = [_rotor_width(n)] * (2 if op == "sandwich2" else 1) + [1 << n]
            args = _inputs(rng, np_dtype, *widths)
            got = kernel(*[torch.tensor(t) for t in args])
            R = rotor_from_rows(args[0].astype(np.float64), n)
            S = rotor_from_rows(args[1].astype(np.float64), n) if op == "sandwich2" else R
            expected = reference_sandwich(args[-1].astype(np.float64), R, S)
        assert got.dtype == dtype
        assert_close(got.numpy(), expected)
    a = torch.randn(4, 1 << n, dtype=torch.float64, requires_grad=True)
    b = torch.randn(1, 1 << n, dtype=torch.float64)  # broadcasts over the leading axis
    if op == "gp" and n <= 3:
        assert torch.autograd.gradcheck(lambda t: kernel(t, b), (a,))
    with pytest.raises(ValueError, match="last axis"):
        kernel(torch.zeros(2, 3, dtype=torch.float64), *([torch.zeros(2, 1 << n)] if op != "sandwich2" else [torch.zeros(2, 1), torch.zeros(2, 1 << n)]))


def test_find_kernel_contract():
    assert find_kernel("gp", (1, 1, 1)) is find_kernel("gp", 3)
    assert find_kernel("gp", (1,) * 7) is None  # not shipped
    assert find_kernel("gp", (1, 1, -1)) is None
    assert find_kernel("nope", 3) is None
    assert find_kernel("gp", ()) is None
    assert metric_code((0, 1, -1)) == "zpm"
    assert module_name("sandwich", 2) == "sandwich_pp"
    assert available("numba") == [f"gp_{'p' * n}" for n in range(1, 7)]
    assert find_kernel("sandwich", 3) is None  # nothing at run time uses it: not shipped
    with pytest.raises(ValueError, match="--target torch"):
        available("torch")
    with pytest.raises(ValueError, match="\\+1, -1 or 0"):
        find_kernel("gp", (1, 2))
    with pytest.raises(TypeError):
        find_kernel("gp", "ppp")
    with pytest.raises(ValueError, match="target"):
        available("cuda")


def test_generated_package_imports_nothing_heavy():
    import subprocess
    import sys

    code = (
        "import sys; import galinear._generated as g; k = g.find_kernel('gp', 2); "
        "print('torch' in sys.modules, 'sympy' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
    assert _generated.__doc__ and "sandwich" in _generated.__doc__


@pytest.mark.nojit
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_kernel_reports_non_finite_inputs_and_works_in_place(bad, rng):
    n = 3
    kernel = find_kernel("gp", n)
    a, b = (np.ascontiguousarray(x) for x in rng.standard_normal((2, 130, 1 << n)))  # 3 blocks of rows
    expected = reference_gp(a, b, n)
    out = np.empty_like(a)
    assert kernel(a, b, out)
    a_in_place = a.copy()
    assert kernel(a_in_place, b, a_in_place)
    np.testing.assert_allclose(a_in_place, expected, rtol=1e-12, atol=1e-12)
    a[129, 5] = bad
    r, x = rng.standard_normal((130, 4)), rng.standard_normal((130, 1 << n))
    x[0, 0] = bad
    with np.errstate(invalid="ignore", over="ignore"):  # pure-Python mode (nojit) warns on inf - inf
        assert not kernel(a, b, out)
        assert not written_kernel("sandwich", n)(r, x, np.empty_like(x))
