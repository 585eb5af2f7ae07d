"""The numba kernel's quick call, ``Kernel.unchecked`` and recycled outputs give the numbers of the
general call: same values, same dtypes, same errors, for every input the quick call declines."""
from __future__ import annotations

import gc
import warnings

import numpy as np
import pytest

import galinear
from galinear import Algebra, _buffers
from galinear.compiler import KernelDomainError

pytestmark = pytest.mark.core

ALG = Algebra(3)


def _rotate(R, x):
    return R * x * ~R


def _divide(a, b):
    return a / b


@pytest.fixture(scope="module")
def rotate():
    return galinear.compile(_rotate, ALG, {"R": [0, 2], "x": [1]}, target="numba")


@pytest.fixture(scope="module")
def divide():
    return galinear.compile(_divide, ALG, {"a": [0, 1], "b": [0]}, target="numba")


def _general(kernel, *args, out=None):
    """The general call path, by name (the quick call takes positional inputs only)."""
    return kernel(**dict(zip(kernel.input_blades, args)), **({} if out is None else {"out": out}))


def _inputs(rows, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((rows, 4)).astype(dtype), rng.standard_normal((rows, 3)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rows", [1, 7, 300])
def test_quick_call_equals_the_general_call(rotate, dtype, rows):
    R, x = _inputs(rows, dtype)
    assert rotate._fast((R, x)) is not None  # these inputs take the quick call
    quick, general = rotate(R, x), _general(rotate, R, x)
    assert quick.dtype == general.dtype == dtype and quick.shape == (rows, 3)
    np.testing.assert_array_equal(quick, general)
    out = np.empty((rows, 3), dtype)
    assert rotate(R, x, out=out) is out
    np.testing.assert_array_equal(out, general)
    assert R.flags.writeable and x.flags.writeable  # the caller's arrays are left as they were


def test_declined_inputs_take_the_general_call(rotate):
    R, x = _inputs(6, np.float64)
    expected = rotate(R, x)
    cases = {
        "mixed dtypes": (R.astype(np.float32), x),
        "one row without a batch axis": (R[0], x[0]),
        "leading batch axes": (R.reshape(2, 3, 4), x.reshape(2, 3, 3)),
        "broadcast rows": (R[:1], x),
        "strided": (np.asfortranarray(R), x[::1]),
        "lists": (R.tolist(), x.tolist()),
        "integers": (np.round(R * 10).astype(np.int64), x),
    }
    for what, args in cases.items():
        assert rotate._fast(args) is None, what
        got = rotate(*args)
        want = _general(rotate, *args)
        np.testing.assert_array_equal(got, want, err_msg=what)
    np.testing.assert_allclose(rotate(R.reshape(2, 3, 4), x.reshape(2, 3, 3)).reshape(6, 3), expected)


def test_bad_inputs_and_outputs_get_the_general_errors(rotate):
    R, x = _inputs(4, np.float64)
    with pytest.raises(ValueError, match="needs 3 coefficients"):
        rotate(R, R)
    with pytest.raises(TypeError, match="takes 2 arrays"):
        rotate(R, x, x)
    for bad in (np.empty((4, 2)), np.empty((4, 3), np.float32), np.empty((3, 4)).T, (np.empty((4, 3)),) * 2):
        with pytest.raises(ValueError, match="out must"):
            rotate(R, x, out=bad)
    frozen = np.empty((4, 3))
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="writable"):
        rotate(R, x, out=frozen)
    x_nan = x.copy()
    x_nan[2, 1] = np.nan
    with pytest.raises(ValueError, match="inf or nan .first at row 2"):
        rotate(R, x_nan)


def test_a_failed_guard_raises_with_its_rows(divide):
    a = np.ones((3, 4))
    b = np.array([[1.0], [0.0], [2.0]])
    with pytest.raises(KernelDomainError, match=r"rows 1\)"):
        divide(a, b)
    with pytest.raises(ValueError, match="left its domain"):
        divide.unchecked(a, b, np.empty((3, 4)))
    np.testing.assert_array_equal(divide(a, b + 1), _general(divide, a, b + 1))


def test_overflow_warns_as_the_general_call_does(divide):
    a = np.full((2, 4), 1e300)
    b = np.full((2, 1), 1e-300)
    with pytest.warns(RuntimeWarning, match="inf or nan from finite inputs"):
        got = divide(a, b)
    assert np.isinf(got).all()


def test_unchecked_equals_the_checked_call_and_runs_inside_numba(rotate):
    numba = pytest.importorskip("numba")
    R, x = _inputs(5, np.float64)
    out = np.empty((5, 3))
    rotate.unchecked(R, x, out)
    np.testing.assert_array_equal(out, rotate(R, x))
    inner = rotate.unchecked

    @numba.njit(cache=False)
    def twice(R, x, out):
        inner(R, x, out)
        inner(R, out, out)  # rotate the rotated points again

    twice(R, x, out)
    np.testing.assert_allclose(out, rotate(R, rotate(R, x)), rtol=1e-12, atol=1e-12)
    R32, x32 = _inputs(5, np.float32)
    out32 = np.empty((5, 3), np.float32)
    rotate.unchecked(R32, x32, out32)
    np.testing.assert_array_equal(out32, rotate(R32, x32))


def test_unchecked_is_offered_by_the_numba_target_only():
    kernel = galinear.compile(_rotate, ALG, {"R": [0, 2], "x": [1]}, target="numpy")
    with pytest.raises(AttributeError, match="numba target"):
        kernel.unchecked


def test_large_outputs_are_recycled_only_once_dead(rotate):
    rows = (_buffers.MIN_BYTES // (3 * 8)) + 1
    R, x = _inputs(rows, np.float64, seed=3)
    first = rotate(R, x)
    keep = first.copy()
    second = rotate(R, x)  # first is alive: new memory
    assert second.ctypes.data != first.ctypes.data
    address = first.ctypes.data
    del first
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = rotate(R[::-1].copy(), x)
    np.testing.assert_array_equal(second, keep)  # an alive output is never overwritten
    if _buffers.pool_limit() >= keep.nbytes:
        assert third.ctypes.data == address  # the dead one's memory served the next call
    np.testing.assert_array_equal(third, _general(rotate, R[::-1].copy(), x))
