"""galinear.compile: every target against the numeric MultiVector path and the clifford package,
in six signatures, float32 and float64; generated gradients against central differences."""
import numpy as np
import pytest

import galinear
from galinear.compiler import KernelDomainError, blade, exp, norm, sqrt
from galinear.testing import assert_kernel_gradient, special_points
from galinear.testing.compiled import SIGNATURE_CASES as SIGNATURES

pytest.importorskip("clifford", reason="the references need the clifford package (pip install clifford; make test installs it)")

TARGETS = ["numba", "numpy", "torch", "c", "triton"]


@pytest.fixture
def interpreted_triton(monkeypatch):
    pytest.importorskip("triton", reason="the triton target needs triton (pip install 'galinear[triton]')")
    monkeypatch.setenv("TRITON_INTERPRET", "1")


#: The clifford package compiles its products per algebra on first use (about 20 s for Cl(4,1) on
#: 2 cores), so the tests compare one target per signature with it; all compare with galinear's
#: numeric MultiVector.
CLIFFORD_TARGET = "numpy"


def _check(kernel, clifford=True, n=12):
    report = kernel.verify(n=n, clifford=clifford)
    assert report.ok, report.table()
    rows = {(r[0], r[1]) for r in report.rows if r[4] is not None}
    assert ("galinear", "float64") in rows and ("galinear", "float32") in rows
    return report


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", sorted(SIGNATURES))
def test_every_target_in_six_signatures(case, target, request):
    if target == "triton":
        request.getfixturevalue("interpreted_triton")
    signature, func = SIGNATURES[case]
    kernel = galinear.compile(func, galinear.Algebra(*signature), {"a": 1, "b": "even"}, target=target)
    report = _check(kernel, clifford=target == CLIFFORD_TARGET)
    clifford_rows = [r for r in report.rows if r[0] == "clifford"]
    assert bool(clifford_rows) == (target == CLIFFORD_TARGET)
    if case == "pga":  # the adapter has no Hodge dual: said, not hidden
        assert all(r[4] is None and "Hodge" in r[5] for r in clifford_rows)
    else:
        assert all(r[4] for r in clifford_rows)


def _motor(B, x):
    M = B.exp()
    return M * x * ~M


def _boost(B, x):
    R = exp(B)
    return R * x * ~R


def _conformal(t, x):
    ninf = blade(x, "e4") + blade(x, "e5")
    T = exp(0.5 * (t ^ ninf))
    return T * x * ~T


EXP_CASES = {
    "pga-screw": ((3, 0, 1), _motor, {"B": 2, "x": 3}),
    "sta-boost": ((3, 1, 0), _boost, {"B": ["e14", "e24", "e34"], "x": 1}),
    "cl3": ((3, 0, 0), _motor, {"B": 2, "x": 1}),
    "cga-translator": ((4, 1, 0), _conformal, {"t": ["e1", "e2", "e3"], "x": 1}),
}


@pytest.mark.parametrize("target", ["numba", "torch", "c"])
@pytest.mark.parametrize("case", sorted(EXP_CASES))
def test_exp_closed_forms_in_kernels(case, target):
    signature, func, inputs = EXP_CASES[case]
    kernel = galinear.compile(func, galinear.Algebra(*signature), inputs, target=target)
    _check(kernel, clifford=case != "cga-translator")


def test_structural_zeros_are_never_read_or_written():
    alg = galinear.Algebra(3, 0, 1)
    kernel = galinear.compile(lambda M, x: M * x * ~M, alg, {"M": "even", "x": 1}, target="numpy")
    assert kernel.input_blades == {"M": ("1", "e12", "e13", "e14", "e23", "e24", "e34", "e1234"),
                                   "x": ("e1", "e2", "e3", "e4")}
    assert kernel.output_blades == ("e1", "e2", "e3", "e4")  # the grade-3 part cancels exactly
    square = galinear.compile(lambda x: x * x, galinear.Algebra(3), {"x": 1}, target="numpy")
    assert square.output_blades == ("1",)
    assert square.operations["multiplications"] <= 3


def test_broadcasting_and_shapes():
    alg = galinear.Algebra(3)
    kernel = galinear.compile(lambda a, b: a * b, alg, {"a": 1, "b": 1}, target="numba")
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 1, 3)), rng.standard_normal((5, 3))
    out = kernel(a, b)
    assert out.shape == (4, 5, 4)
    direct = kernel(np.broadcast_to(a, (4, 5, 3)).reshape(-1, 3), np.broadcast_to(b, (4, 5, 3)).reshape(-1, 3))
    np.testing.assert_array_equal(out.reshape(-1, 4), direct)
    assert kernel(a.astype(np.float32), b.astype(np.float32)).dtype == np.float32
    with pytest.raises(ValueError, match="needs 3 coefficients"):
        kernel(a, rng.standard_normal((5, 4)))
    with pytest.raises(TypeError, match="no input"):
        kernel(a, c=b)
    with pytest.raises(ValueError, match="inf or nan"):
        kernel(np.full((2, 3), np.nan), b[:2])
    rows = np.random.default_rng(2).standard_normal((20000, 3))
    np.testing.assert_array_equal(kernel(rows, rows[::-1], parallel=True), kernel(rows, rows[::-1]))
    with pytest.raises(ValueError, match="parallel must be"):
        kernel(a, b, parallel="yes")
    buffer = np.empty((4, 5, 4))
    assert kernel(a, b, out=buffer) is buffer
    np.testing.assert_array_equal(buffer, out)
    with pytest.raises(ValueError, match="out must be"):
        kernel(a, b, out=np.empty((4, 5, 4), np.float32))


@pytest.mark.parametrize("target", ["numba", "numpy", "torch", "c"])
def test_a_zero_denominator_raises_at_run_time(target):
    kernel = galinear.compile(lambda a: a.inv(), galinear.Algebra(3), {"a": 1}, target=target)
    x = np.zeros((3, 3))
    x[1] = [1.0, 2.0, 0.0]
    with pytest.raises(KernelDomainError, match="denominator is 0 at 2 of 3 rows"):
        kernel(x)
    root = galinear.compile(lambda a: sqrt(a * a), galinear.Algebra(2, 1), {"a": 1}, target=target)
    with pytest.raises(KernelDomainError, match="negative"):
        root(np.array([[0.0, 0.0, 2.0]]))  # e3**2 = -1 in Cl(2,1)
    np.testing.assert_allclose(np.asarray(root(np.array([[3.0, 4.0, 0.0]]))), [[5.0]])


def test_bad_requests_are_refused_before_work():
    alg = galinear.Algebra(3)
    with pytest.raises(ValueError, match="inputs must name each parameter"):
        galinear.compile(lambda a, b: a * b, alg, {"a": 1})
    with pytest.raises(ValueError, match="unknown pattern"):
        galinear.compile(lambda a: a, alg, {"a": "evn"})
    with pytest.raises(ValueError, match="outside 0..3"):
        galinear.compile(lambda a: a, alg, {"a": 4})
    with pytest.raises(ValueError, match="unknown target"):
        galinear.compile(lambda a: a, alg, {"a": 1}, target="fortran")
    with pytest.raises(ValueError, match="identically zero"):
        galinear.compile(lambda a: a ^ a, alg, {"a": 1})
    with pytest.raises(TypeError, match="no truth value"):
        galinear.compile(lambda a: a if a else a, alg, {"a": 1})
    with pytest.raises(ValueError, match="bivectors only"):
        galinear.compile(lambda a: exp(a), alg, {"a": 1})


def test_the_cache_is_keyed_on_source_and_checked(tmp_path, monkeypatch):
    from galinear.compiler import build

    monkeypatch.setattr(build, "cache_folder", lambda: tmp_path)
    alg = galinear.Algebra(3)
    def mul(a, b):  # one definition: the key holds its code and where it is (guards name the line)
        return a * b

    first = build.build(mul, alg.metric, {"a": 1, "b": 1}, "numpy")
    again = build.build(mul, alg.metric, {"a": 1, "b": 1}, "numpy")
    assert not first.from_cache and again.from_cache and again.source == first.source
    other = build.build(lambda a, b: a ^ b, alg.metric, {"a": 1, "b": 1}, "numpy")
    assert not other.from_cache and other.key != first.key
    from galinear._numba import file_stem

    entry = tmp_path / f"{file_stem('compiled', first.key)}.json"  # one checked file per key, named by it
    assert sorted(tmp_path.iterdir()) == sorted(tmp_path.glob("compiled_*.json"))
    text = entry.read_text()
    entry.write_text(text.replace("def kernel(", "import os\ndef kernel("))
    tampered = build.build(mul, alg.metric, {"a": 1, "b": 1}, "numpy")
    assert not tampered.from_cache and tampered.source == first.source and entry.read_text() == text
    assert not list(tmp_path.glob("*.pkl"))


def test_cache_entries_of_the_older_layout_are_left_unused(tmp_path, monkeypatch):
    """Layout 2 kept a JSON file and one file per source, named by the key itself; such files are
    neither read nor trusted, whatever they hold."""
    import json

    from galinear.compiler import build

    monkeypatch.setattr(build, "cache_folder", lambda: tmp_path)
    alg = galinear.Algebra(3)

    def mul(a, b):
        return a * b

    key = build.cache_key(mul, alg.metric, {"a": 1, "b": 1}, "numpy", "auto", False)
    (tmp_path / f"{key}.source").write_text("raise SystemExit('an old entry ran')\n")
    (tmp_path / f"{key}.json").write_text(json.dumps({"key": key, "source_sha256": "0" * 64}))
    built = build.build(mul, alg.metric, {"a": 1, "b": 1}, "numpy")
    assert not built.from_cache and "an old entry" not in built.source
    assert build.build(mul, alg.metric, {"a": 1, "b": 1}, "numpy").from_cache


GRADIENT_CASES = {
    "pga-motor": ((3, 0, 1), _motor, {"B": 2, "x": 3}),
    "sta-boost": ((3, 1, 0), _boost, {"B": ["e14", "e24", "e34"], "x": 1}),
    "inverse": ((3, 0, 0), lambda a, b: a.inv() * b, {"a": "even", "b": 1}),
    "norm": ((3, 0, 0), lambda a, b: norm(a) * b, {"a": 2, "b": 1}),
}


@pytest.mark.parametrize("target", ["numba", "c"])
@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_generated_backward_matches_central_differences(case, target):
    signature, func, inputs = GRADIENT_CASES[case]
    pair = galinear.compile(func, galinear.Algebra(*signature), inputs, target=target, grad=True)
    widths = [len(b) for b in pair.forward.input_blades.values()]
    points = special_points(widths, np.random.default_rng(3))
    if case in ("inverse", "norm"):  # not differentiable at 0: keep away from it
        points = {k: v for k, v in points.items() if k not in ("zero", "tiny")}
    if case == "pga-motor":  # equal angles: a pure rotation with zero pitch, and a pure translation
        points["rotation"] = [np.array([[0.0, 0.0, 0.0, 0.7, 0.0, 0.0]]), np.ones((1, 4))]
        points["translation"] = [np.array([[0.3, -0.2, 0.5, 0.0, 0.0, 0.0]]), np.ones((1, 4))]
    for name, arrays in points.items():
        step = 1e-6 if name == "tiny" else 1e-4
        assert_kernel_gradient(pair, arrays, rtol=1e-6, step=step), name


def test_torch_function_uses_the_generated_backward():
    torch = pytest.importorskip("torch")
    pair = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="numba", grad=True)
    f = pair.torch_function()
    B = torch.randn(6, 6, dtype=torch.float64, requires_grad=True)
    x = torch.randn(6, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(f, (B, x))
    torch_kernel = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="torch")
    (f(B, x) ** 2).sum().backward()
    gB = B.grad.clone()
    B.grad = None
    (torch_kernel(B, x) ** 2).sum().backward()
    torch.testing.assert_close(gB, B.grad, rtol=1e-10, atol=1e-12)


def test_a_one_input_backward_returns_one_gradient_per_input():
    torch = pytest.importorskip("torch")
    pair = galinear.compile(lambda B: B.exp(), galinear.Algebra(3, 0, 1), {"B": 2}, target="numba", grad=True)
    grads = pair.backward(np.ones((3, 6)), np.ones((3, 8)))
    assert isinstance(grads, tuple) and len(grads) == 1 and grads[0].shape == (3, 6)
    B = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(pair.torch_function(), (B,))


def test_torch_target_under_func_transforms_and_compile():
    torch = pytest.importorskip("torch")
    kernel = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="torch")
    B, x = torch.randn(5, 6, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    per_row = torch.func.vmap(torch.func.grad(lambda b, y: kernel(b, y).sum()))(B, x)
    B1 = B.clone().requires_grad_(True)
    kernel(B1, x).sum().backward()
    torch.testing.assert_close(per_row, B1.grad)
    compiled = torch.compile(lambda b, y: kernel(b, y), fullgraph=True, backend="eager")
    torch.testing.assert_close(compiled(B, x), kernel(B, x))
    inverse = galinear.compile(lambda a: a.inv(), galinear.Algebra(3), {"a": 1}, target="torch")
    compiled = torch.compile(lambda a: inverse(a), fullgraph=True, backend="eager")
    a = torch.randn(4, 3, dtype=torch.float64)
    torch.testing.assert_close(compiled(a), inverse(a))


def test_triton_backward_in_the_interpreter(interpreted_triton):
    pair = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="triton", grad=True)
    reference = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="numpy", grad=True)
    rng = np.random.default_rng(5)
    B, x, g = rng.standard_normal((7, 6)), rng.standard_normal((7, 4)), rng.standard_normal((7, 4))
    for got, want in zip(pair.backward(B, x, g), reference.backward(B, x, g)):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert_kernel_gradient(pair, [B[:2], x[:2]], rtol=1e-6)


def test_c_sources_compile_alone(tmp_path):
    import shutil
    import subprocess

    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler on this machine (apt install gcc)")
    kernel = galinear.compile(_motor, galinear.Algebra(3, 0, 1), {"B": 2, "x": 3}, target="c")
    (tmp_path / "kernel.c").write_text(kernel.source.replace('#include "_motor.h"', '#include "kernel.h"'))
    (tmp_path / "kernel.h").write_text(kernel.header)
    result = subprocess.run([compiler, "-std=c99", "-Wall", "-Werror", "-pedantic", "-c", "kernel.c"],
                            cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
