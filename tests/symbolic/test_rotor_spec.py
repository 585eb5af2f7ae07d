"""The rotor specification: generated module up to date, its series accurate, every backend reading it."""
import mpmath
import numpy as np
import pytest

from galinear._generated import rotor_spec as generated
from galinear.symbolic import rotor_maths as rotor_spec
from galinear.symbolic.codegen import GENERATED_ROOT, write_rotor_spec


def test_generated_module_is_up_to_date_byte_for_byte():
    assert (GENERATED_ROOT / "rotor_spec.py").read_text(encoding="utf-8") == rotor_spec.generate()


def test_generation_is_deterministic_and_writes_only_on_change(tmp_path):
    path = write_rotor_spec(tmp_path)
    stamp = path.stat().st_mtime_ns
    assert write_rotor_spec(tmp_path).stat().st_mtime_ns == stamp
    assert path.read_text(encoding="utf-8") == rotor_spec.generate()


def _reference(function, q):
    mpmath.mp.dps = 40
    t = mpmath.sqrt(mpmath.mpf(q))
    if q == 0:
        return {"cos": 1.0, "sinc": 1.0, "dsinc": -1.0 / 6}[function]
    value = {"cos": mpmath.cos(t), "sinc": mpmath.sin(t) / t,
             "dsinc": (t * mpmath.cos(t) - mpmath.sin(t)) / (2 * t**3)}[function]
    return float(value)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("function", ["cos", "sinc", "dsinc"])
def test_series_meet_their_bound_on_the_interval(function, dtype):
    """Evaluated in float64, the series differ from the function by at most bound + rounding."""
    coefficients = getattr(generated, f"{function.upper()}_SERIES")[dtype]
    bound = getattr(generated, f"{function.upper()}_ERROR_BOUND")[dtype]
    switch = generated.SERIES_SWITCH[dtype]
    qs = np.concatenate([np.linspace(0.0, switch, 201), [switch * (1 - 1e-12)]])
    got = generated.horner(coefficients, qs)
    want = np.array([_reference(function, q) for q in qs])
    error = np.abs(got - want)
    assert error.max() <= bound + 4 * np.finfo(np.float64).eps * np.abs(want).max()
    # the bound is tight enough to matter: below half an ulp of the dtype
    assert bound < float(rotor_spec.UNIT_ROUNDOFF[dtype]) * np.abs(want).min()


def test_numpy_torch_and_numba_coefficients_agree_at_the_switch(rng=np.random.default_rng(0)):
    """Backends built on the spec agree with each other on both sides of the switch point."""
    torch = pytest.importorskip("torch")
    from galinear.rotor_kernels.factors import factor_coefficients
    from galinear.nn.functional.rotors import simple_rotor_coefficients

    switch = generated.SERIES_SWITCH["float64"]
    V = rng.standard_normal((8, 1, 4))
    W = rng.standard_normal((8, 1, 4))
    # scale each pair so that theta**2 lands just below / above the switch, at 0 and far away
    targets = np.array([0.0, switch * 0.999, switch * 1.001, 1e-20, 2.0, 9.0, switch, 1e-3])
    from galinear.rotor_kernels.factors import _wedge_norm_sq

    ratio = np.sqrt(np.where(targets > 0, targets, 1) / _wedge_norm_sq(V, W)[:, 0]) * (targets > 0)
    V *= ratio[:, None, None]
    a, s = factor_coefficients(V, W)
    c, sinc = simple_rotor_coefficients(torch.tensor(V), torch.tensor(W))
    vw = (V * W).sum(-1)
    np.testing.assert_allclose(s, sinc.numpy(), rtol=1e-13, atol=1e-15)  # q rounds differently
    np.testing.assert_allclose(a, c.numpy() - sinc.numpy() * vw, rtol=1e-13, atol=1e-14)
    theta = np.sqrt(np.maximum(_wedge_norm_sq(V, W), 0))
    np.testing.assert_allclose(s, np.sinc(theta / np.pi), rtol=1e-14)


def test_core_power_method_follows_the_contract():
    from galinear.core import rotors

    start = rotors.default_start(6)
    expected = np.array(generated.power_start(6))
    np.testing.assert_allclose(start, expected / np.linalg.norm(expected, axis=-1, keepdims=True))
    import inspect

    assert inspect.signature(rotors.decompose_power).parameters["max_iter"].default == generated.POWER_MAX_ITER


def test_chunk_layout_is_the_one_every_layer_uses():
    """The generated layout functions are the specification's, and RotorLinear, the parameter
    count of the symbolic layer and the size check all read them."""
    torch = pytest.importorskip("torch")

    from galinear._limits import rotor_linear_size
    from galinear.nn import RotorLinear
    from galinear.symbolic.closed_forms import gadget_chunks

    for d_in, d_out, chunk in [(576, 576, None), (576, 192, None), (784, 1024, 128), (12, 10, 8), (7, 5, 2)]:
        c, I, J = rotor_spec.chunk_layout(d_in, d_out, chunk)
        assert (c, I, J) == generated.chunk_layout(d_in, d_out, chunk) == gadget_chunks(d_in, d_out, chunk)
        assert c & (c - 1) == 0 and c <= min(d_in, d_out) and I * c >= d_in and J * c >= d_out
        layer = RotorLinear(d_in, d_out, chunk_size=chunk)
        assert (layer.chunk_size, layer.input_chunks, layer.output_chunks) == (c, I, J)
        starts = generated.chunk_starts(d_in, I)
        want = (torch.tensor(starts)[:, None] + torch.arange(c)) % d_in
        assert torch.equal(layer.input_index, want)
        assert set(want.reshape(-1).tolist()) == set(range(d_in))  # every coordinate is read
        assert rotor_linear_size(d_in, d_out, c)[0] > 0
