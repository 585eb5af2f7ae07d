"""The jax target: the generated function under jax.jit, jax.grad and jax.vmap, in float32 and float64,
against the numpy target (values, and the numpy target's generated backward for gradients) in the
six signatures the compiler tests use (galinear.testing.compiled.SIGNATURE_CASES)."""
import contextlib

import numpy as np
import pytest

import galinear
from galinear.compiler import KernelDomainError
from galinear.testing.compiled import SIGNATURE_CASES as SIGNATURES
from galinear.testing.compiled import SIGNATURE_INPUTS as INPUTS

jax = pytest.importorskip("jax", reason="the jax target needs jax (pip install 'galinear[jax]'; make test installs it)")
jnp = jax.numpy

TOLERANCE = {np.float64: 1e-12, np.float32: 2e-5}


@contextlib.contextmanager
def precision(dtype):
    """jax in float64 for the block only (``jax_enable_x64`` is restored after it)."""
    if dtype != np.float64:
        yield
        return
    if hasattr(jax, "enable_x64"):
        with jax.enable_x64(True):
            yield
        return
    before = jax.config.jax_enable_x64  # pragma: no cover - older jax
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


def _pair(case):
    signature, func = SIGNATURES[case]
    alg = galinear.Algebra(*signature)
    return (galinear.compile(func, alg, INPUTS, target="jax"),
            galinear.compile(func, alg, INPUTS, target="numpy", grad=True))


def _arrays(kernel, rows, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((rows, len(b))).astype(dtype) for b in kernel.input_blades.values()]


def _close(got, want, dtype):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    scale = np.maximum(1.0, np.abs(want))
    assert np.max(np.abs(got - want) / scale) < TOLERANCE[dtype]


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("case", sorted(SIGNATURES))
def test_jit_grad_vmap_against_numpy(case, dtype):
    """One jitted function holds the vmapped kernel and the gradient of a weighted sum of its outputs."""
    kernel, reference = _pair(case)
    a, b = _arrays(kernel, 5, dtype)
    weights = np.random.default_rng(1).standard_normal((5, len(kernel.output_blades))).astype(dtype)
    with precision(dtype):
        jw = jnp.asarray(weights)

        def values_and_gradients(x, y):
            grads = jax.grad(lambda x_, y_: (kernel(x_, y_) * jw).sum(), argnums=(0, 1))(x, y)
            return jax.vmap(kernel)(x, y), grads

        values, grads = jax.jit(values_and_gradients)(jnp.asarray(a), jnp.asarray(b))
    assert values.dtype == dtype
    _close(values, reference.forward(a, b), dtype)
    for got, expected in zip(grads, reference.backward(a, b, weights)):
        assert got.dtype == dtype
        _close(got, expected, dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_eager_calls_keep_the_array_kind_and_dtype(dtype):
    kernel, reference = _pair("euclidean")
    a, b = _arrays(kernel, 3, dtype)
    with precision(dtype):
        plain = kernel(jnp.asarray(a), jnp.asarray(b))
        from_numpy = kernel(a, b)
    assert isinstance(plain, jax.Array) and plain.dtype == dtype
    assert isinstance(from_numpy, np.ndarray) and from_numpy.dtype == dtype
    _close(plain, reference.forward(a, b), dtype)
    _close(from_numpy, reference.forward(a, b), dtype)


def test_the_exp_closed_form_under_jit_and_grad():
    def moved(B, x):
        M = B.exp()
        return M * x * ~M

    alg = galinear.Algebra(3, 0, 1)
    kernel = galinear.compile(moved, alg, {"B": 2, "x": 3}, target="jax")
    reference = galinear.compile(moved, alg, {"B": 2, "x": 3}, target="numpy", grad=True)
    B = np.array([[0.0] * 6, [1e-9] * 6, [0.3, -0.2, 0.5, 1.1, -0.4, 0.2], [0.0, 0.0, 0.0, 2.9, 0.0, 0.0]])
    x = np.random.default_rng(2).standard_normal((4, 4))
    with precision(np.float64):
        loss = jax.value_and_grad(lambda B_, x_: kernel(B_, x_).sum(), argnums=(0, 1))
        total, grads = jax.jit(loss)(jnp.asarray(B), jnp.asarray(x))
    np.testing.assert_allclose(float(total), reference.forward(B, x).sum(), rtol=1e-12)
    for got, expected in zip(grads, reference.backward(B, x, np.ones((4, 4)))):
        np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-9, atol=1e-9)


def test_domain_errors_outside_transforms_inf_inside():
    kernel = galinear.compile(lambda a: a.inv(), galinear.Algebra(3), {"a": 1}, target="jax")
    with precision(np.float64):
        x = jnp.asarray([[1.0, 2.0, 0.0], [0.0, 0.0, 0.0]])
        with pytest.raises(KernelDomainError, match="rows 1"):
            kernel(x)
        out = jax.jit(kernel)(x)
        assert np.all(np.isfinite(np.asarray(out[0]))) and not np.all(np.isfinite(np.asarray(out[1])))


def test_float64_without_x64():
    """numpy float64 inputs compute in float64 within the call; jax inputs follow jax's setting."""
    kernel = galinear.compile(lambda a, b: a * b, galinear.Algebra(2), {"a": 1, "b": 1}, target="jax")
    if jax.config.jax_enable_x64:
        pytest.skip("jax_enable_x64 is on in this process")
    a, b = np.array([[1.0, 1e-9]]), np.array([[1.0, 3.0]])
    out = kernel(a, b)
    assert out.dtype == np.float64 and out[0, 0] == 1.0 + 3e-9
    assert not jax.config.jax_enable_x64  # nothing left switched on
    assert kernel(a.astype(np.float32), b.astype(np.float32)).dtype == np.float32
    with pytest.raises(TypeError, match="jax_enable_x64"):
        kernel(jnp.asarray(a, jnp.float32), b)  # a jax array mixed with float64


def test_verify_without_touching_global_state():
    kernel = galinear.compile(lambda a, b: a ^ b, galinear.Algebra(3), {"a": 1, "b": 1}, target="jax")
    assert kernel.verify(n=8, clifford=False).ok


def test_torch_function_names_jax_grad_instead():
    kernel = galinear.compile(lambda a, b: a * b, galinear.Algebra(2), {"a": 1, "b": 1}, target="jax")
    with pytest.raises(ValueError, match="jax"):
        kernel.torch_function()


def test_jax_missing_names_the_extra(monkeypatch):
    import galinear._extras as extras
    from galinear.compiler.targets import jax as target

    def missing(package, feature):
        raise extras.MissingExtraError(feature, package, "jax")

    monkeypatch.setattr(extras, "require", missing)
    with pytest.raises(ModuleNotFoundError, match=r"galinear\[jax\]"):
        target.require_jax()


def test_an_unknown_target_lists_the_registered_ones():
    from galinear.compiler.targets import TARGETS

    with pytest.raises(ValueError, match="registered targets are numba, numpy, torch, c, triton, jax"):
        galinear.compile(lambda a: a, galinear.Algebra(2), {"a": 1}, target="cuda")
    assert "jax" in TARGETS
