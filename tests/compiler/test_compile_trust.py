"""galinear.compile gives the right numbers on every path, or refuses.

Each finding of the compiler's review has a test here: the input order through the cache (first
compile, warm cache, a new process, positional and keyword calls), input names that meet
generated ones, stale cache keys (closure constants, keyword-only defaults, attributes of globals),
non-finite constants, constants on the left of every operator, exact simplicity of exp's argument,
domain errors that name the operation, multivector inputs and outputs, the decorator form. The
property test draws random expressions over random input names in random parameter orders and
compares every target, called by position and by keyword, with galinear's numeric MultiVector.
"""
from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import galinear
from galinear.compiler import KernelDomainError, exp, parse_expression, sqrt
from galinear.compiler.build import CacheWarning

ROOT = Path(__file__).resolve().parents[2]
E3 = galinear.Algebra(3)


def _numeric(alg, kernel, arrays):
    """The numeric MultiVectors of the kernel's inputs (coefficients placed in their blades)."""
    out = {}
    for name, array in arrays.items():
        full = np.zeros(array.shape[:-1] + (alg.dim,))
        full[..., [alg.blade_names.index(b) for b in kernel.input_blades[name]]] = array
        out[name] = galinear.MultiVector(alg, full)
    return out


def _reference(alg, func, kernel, arrays):
    """func on numeric MultiVectors, as the kernel's output coefficients."""
    value = func(**_numeric(alg, kernel, arrays))
    values = np.broadcast_to(np.asarray(getattr(value, "values", value), float), (len(next(iter(arrays.values()))),
                                                                                  alg.dim))
    return values[..., [alg.blade_names.index(b) for b in kernel.output_blades]]


def _random_inputs(kernel, rows=6, seed=0):
    rng = np.random.default_rng(seed)
    return {name: rng.normal(size=(rows, len(blades))) for name, blades in kernel.input_blades.items()}


def _assert_right(alg, func, kernel, tol=1e-9):
    arrays = _random_inputs(kernel)
    expected = _reference(alg, func, kernel, arrays)
    names = list(kernel.input_blades)
    by_position = kernel(*[arrays[n] for n in names])
    by_keyword = kernel(**dict(reversed(list(arrays.items()))))
    for got in (by_position, by_keyword):
        got = np.asarray(got)
        assert np.allclose(got, expected, rtol=tol, atol=tol), (kernel.source, got, expected)


# ---------------------------------------------------------------------------- input order
def cga_chain(x, R, t):  # parameters out of sorted order, as in the review's CGA chain
    return R * x * ~R + t


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_input_order_is_the_parameter_order_first_compile_and_warm_cache(target):
    for cache in (True, True, False):  # first compile (or a warm cache), then the cache, then without it
        kernel = galinear.compile(cga_chain, E3, {"x": 1, "R": "even", "t": 1}, target=target, cache=cache)
        assert list(kernel.input_blades) == ["x", "R", "t"]
        _assert_right(E3, cga_chain, kernel)


def test_same_width_inputs_by_keyword():
    def reflect(p, X):
        return X * p * X

    kernel = galinear.compile(reflect, E3, {"p": 1, "X": 1}, target="numpy")
    _assert_right(E3, reflect, kernel)


_NEW_PROCESS = textwrap.dedent("""
    import json, sys
    import numpy as np
    import galinear
    alg = galinear.Algebra(3)
    def chain(x, R, t):
        return R * x * ~R + t
    k = galinear.compile(chain, alg, {"x": 1, "R": "even", "t": 1}, target="numpy")
    rng = np.random.default_rng(1)
    x, R, t = rng.normal(size=(4, 3)), rng.normal(size=(4, 4)), rng.normal(size=(4, 3))
    print(json.dumps({"cached": k._built.from_cache, "order": list(k.input_blades),
                      "pos": k(x, R, t).tolist(), "kw": k(t=t, R=R, x=x).tolist()}))
""")


def _python(code: str, cache: Path, *args) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_input_order_in_a_new_process(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    first, second = _python(_NEW_PROCESS, cache), _python(_NEW_PROCESS, cache)
    assert not first["cached"] and second["cached"]
    for run in (first, second):
        assert run["order"] == ["x", "R", "t"] and np.allclose(run["pos"], run["kw"])
    assert np.allclose(first["pos"], second["pos"])


# ---------------------------------------------------------------------------- names
@pytest.mark.parametrize("target", ["numpy", "torch", "numba", "c"])
def test_input_names_never_meet_generated_names(target):
    if target == "torch":
        pytest.importorskip("torch", reason="the torch target needs torch (pip install 'galinear[torch]')")

    def collide(x, x_e1):
        return x * x_e1

    kernel = galinear.compile(collide, E3, {"x": 1, "x_e1": 1}, target=target)
    _assert_right(E3, collide, kernel)
    for name in ("out", "consts", "status", "np", "math", "torch", "row", "nrows", "bad", "grad", "int", "real"):
        func = parse_expression(f"{name} * y + y({0})", [name, "y"])
        kernel = galinear.compile(func, E3, {name: 1, "y": "even"}, target=target, grad=target != "c")
        forward = kernel[0] if isinstance(kernel, tuple) else kernel
        _assert_right(E3, func, forward)
        if target != "c":
            assert list(forward.backward.input_blades) == [name, "y", "grad" if name != "grad" else "grad_output"]


# ---------------------------------------------------------------------------- stale keys
_STALE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import galinear
    alg = galinear.Algebra(3)
    c, d = float(sys.argv[1]), int(sys.argv[2])
    C = 1 + c * alg.multivector(e1=1.0)
    class Settings:
        pass
    settings = Settings()
    settings.scale = d
    def f(x, *, k=d):
        return C * x * k + x * settings.scale
    kernel = galinear.compile(f, alg, {"x": 1}, target="numpy")
    x = np.array([[1.0, 2.0, 3.0]])
    mv = galinear.MultiVector(alg, np.r_[0.0, x[0], np.zeros(4)])
    ref = f(mv)
    expected = [ref[b] for b in kernel.output_blades]
    print(json.dumps({"cached": kernel._built.from_cache, "error": float(np.abs(kernel(x)[0] - expected).max())}))
""")


def test_the_cache_keys_on_values_not_their_repr(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    runs = [_python(_STALE, cache, c, d) for c, d in
            [("1000000.1", 2), ("1000000.4", 2), ("1000000.4", 3), ("1000000.4", 3)]]
    assert [r["cached"] for r in runs] == [False, False, False, True]
    assert all(r["error"] < 1e-6 for r in runs), runs


def test_an_object_that_cannot_be_keyed_is_built_without_the_cache():
    class Slotted:
        __slots__ = ("value",)

    holder = Slotted()
    holder.value = 2.5

    def scaled(x):
        return x * holder.value

    with pytest.warns(CacheWarning, match="built without the cache"):
        kernel = galinear.compile(scaled, E3, {"x": 1}, target="numpy")
    _assert_right(E3, scaled, kernel)
    assert not kernel._built.from_cache


# ---------------------------------------------------------------------------- constants
def test_non_finite_constants_are_refused():
    with pytest.raises(ValueError, match="not finite"):
        parse_expression("1e999 * x", ["x"])
    for value in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="not finite"):
            galinear.compile(lambda x: value * x, E3, {"x": 1}, target="numpy", cache=False)
    import sympy

    with pytest.raises(ValueError, match="not finite"):
        galinear.compile(lambda x: x * sympy.oo, E3, {"x": 1}, target="numpy", cache=False)


def test_cli_refuses_a_non_finite_literal(capsys):
    from galinear.cli import main

    assert main(["codegen", "--expr", "1e999 * x", "--input", "x=1", "--n", "3", "--print"]) == 2
    assert "not finite" in capsys.readouterr().err


OPERATORS = {
    "gp": lambda C, x: C * x, "op": lambda C, x: C ^ x, "inner": lambda C, x: C | x,
    "lc": lambda C, x: C << x, "rc": lambda C, x: C >> x, "regressive": lambda C, x: C & x,
    "sandwich": lambda C, x: C @ x, "add": lambda C, x: C + x, "sub": lambda C, x: C - x,
    "div": lambda C, x: C / x,
}


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_a_constant_multivector_on_either_side(op):
    C = E3.multivector({"1": 0.5, "e1": 1.25, "e23": -0.75})
    apply = OPERATORS[op]

    def left(x):
        return apply(C, x)

    def right(x):
        return apply(x, C)

    for func in (left, right):
        kernel = galinear.compile(func, E3, {"x": [0, 1, 2]}, target="numpy")
        _assert_right(E3, func, kernel, tol=1e-7)


# ---------------------------------------------------------------------------- exact facts, messages
@pytest.mark.parametrize("signature", [(5, 0, 0), (4, 1, 0)])
def test_exp_of_a_wedge_is_simple_in_every_signature(signature):
    alg = galinear.Algebra(*signature)

    def rotor(a, b):
        return exp((a ^ b) * 0.3)

    kernel = galinear.compile(rotor, alg, {"a": 1, "b": 1}, target="numpy")
    arrays = _random_inputs(kernel, seed=3)
    arrays = {k: v * 0.5 for k, v in arrays.items()}
    got = kernel(**arrays)
    expected = _reference(alg, rotor, kernel, arrays)
    assert np.allclose(got, expected, rtol=1e-9, atol=1e-9)


def test_a_domain_error_names_the_operation_its_line_and_the_rows():
    def normalise(x):
        return x / sqrt((x * ~x)(0))

    kernel = galinear.compile(normalise, E3, {"x": 1}, target="numpy")
    x = np.zeros((4, 3))
    x[1] = [1.0, 2.0, 3.0]
    with pytest.raises(KernelDomainError) as error:
        kernel(x)
    message = str(error.value)
    assert "test_compile_trust.py" in message and "sqrt((x * ~x)(0))" in message
    assert "rows 0, 2, 3" in message and "3 of 4 rows" in message
    func = parse_expression("x / norm(x)", ["x"])
    kernel = galinear.compile(func, E3, {"x": 1}, target="numpy")
    with pytest.raises(KernelDomainError, match="'x / norm\\(x\\)' at column 1"):
        kernel(np.zeros((2, 3)))


def test_cli_expressions_name_blades_and_refuse_unused_inputs(capsys):
    from galinear.cli import main

    assert main(["codegen", "--expr", "x + e4 + 0.5 * e5", "--input", "x=1", "--signature", "4,1,0", "--print"]) == 0
    assert "def kernel_serial" in capsys.readouterr().out
    assert main(["codegen", "--expr", "x * 2", "--input", "x=1", "--input", "z=2", "--n", "3", "--print"]) == 2
    assert "--input z is not used" in capsys.readouterr().err
    assert main(["codegen", "--expr", "x + e9", "--input", "x=1", "--n", "3", "--print"]) == 2
    assert "'e9' is not a blade" in capsys.readouterr().err
    assert main(["codegen", "--expr", "sqrt(x)", "--input", "x=1", "--n", "3", "--print"]) == 2
    assert "x(0), or grade(x, 0)" in capsys.readouterr().err


def test_signature_values_that_look_like_options_get_the_check_message(capsys):
    from galinear.cli import main

    assert main(["codegen", "--expr", "x", "--input", "x=1", "--signature", "-1,0,0", "--print"]) == 2
    assert "non-negative" in capsys.readouterr().err


# ---------------------------------------------------------------------------- multivectors in and out
def test_multivector_inputs_give_a_multivector():
    def sandwich(M, x):
        return M * x * ~M

    kernel = galinear.compile(sandwich, E3, {"M": "even", "x": 1}, target="numpy")
    M = E3.multivector({"1": 0.8, "e12": 0.6})
    x = E3.multivector(e1=1.0, e3=2.0)
    y = kernel(M, x)
    assert isinstance(y, galinear.MultiVector)
    assert np.allclose(y.values, (M * x * ~M).values)
    with pytest.raises(ValueError, match="outside its compiled pattern"):
        kernel(M + E3.multivector(e1=1.0), x)


def test_the_decorator_form():
    @galinear.compile(E3, {"M": "even", "x": 1}, target="numpy")
    def rotate(M, x):
        return M * x * ~M

    assert isinstance(rotate, galinear.compiler.Kernel) and rotate.name == "rotate"
    M = E3.multivector({"1": 0.8, "e12": 0.6})
    assert np.allclose(rotate(M, E3.multivector(e2=1.0)).values, (M * E3.multivector(e2=1.0) * ~M).values)


# ---------------------------------------------------------------------------- the property
#: Input names chosen to meet generated ones: prefixes of one another, the names of the printers'
#: own variables and modules, soft keywords and blade-like names.
NAMES = ["x", "x_e1", "x_e12", "xs", "out", "consts", "status", "np", "torch", "math", "grad", "row", "match",
         "case", "type", "real", "int", "kernel", "e7"]
PATTERNS = [1, 2, "even", [0, 1], "odd"]


def _expression(rnd: random.Random, names, depth=0) -> str:
    if depth >= 2 or rnd.random() < 0.3:
        leaf = rnd.choice(names + ["e1", "e23", "0.25"])
        return leaf
    kind = rnd.randrange(6)
    a, b = _expression(rnd, names, depth + 1), _expression(rnd, names, depth + 1)
    if kind == 0:
        return f"({a} {rnd.choice(['*', '^', '|', '<<', '>>', '+', '-'])} {b})"
    if kind == 1:
        return f"~{a}"
    if kind == 2:
        return f"grade({a}, {rnd.randrange(3)}, {rnd.randrange(3, 4)})"
    if kind == 3:
        return f"({rnd.choice(['1.5', '-2', '1e-3'])} * {a})"
    if kind == 4:
        return f"({a} & {b})"
    return f"({a} * {b} * {a})"


# each example compiles a kernel: half the CI profile's count; make test-thorough keeps its 500
@settings(max_examples=max(10, settings.default.max_examples // 2) if settings.default.max_examples <= 40
          else settings.default.max_examples)
@given(st.integers(0, 2**32 - 1))
def test_random_expressions_over_random_names_are_right_or_refused(seed):
    rnd = random.Random(seed)
    names = rnd.sample(NAMES, rnd.randrange(1, 4))
    text = _expression(rnd, names)
    used = list(parse_expression(text, names).used_inputs)
    if not used:
        text, used = f"({text}) + {names[0]}", names[:1]
    order = list(used)
    rnd.shuffle(order)
    func = parse_expression(text, order)
    inputs = {n: rnd.choice(PATTERNS) for n in order}
    target = rnd.choice(["numpy", "numba"])
    try:
        kernel = galinear.compile(func, E3, inputs, target=target)
    except ValueError as refused:  # e.g. identically zero: a refusal is an answer, a wrong number is not
        assert "identically zero" in str(refused) or "not a blade" in str(refused), refused
        return
    assert list(kernel.input_blades) == order
    _assert_right(E3, func, kernel)


_WARM = textwrap.dedent("""
    import json, random, sys
    import numpy as np
    import galinear
    from galinear.compiler import parse_expression
    sys.path.insert(0, sys.argv[1])
    from test_compile_trust import E3, NAMES, PATTERNS, _expression, _random_inputs, _reference
    out = []
    for seed in range(int(sys.argv[2])):
        rnd = random.Random(seed)
        names = rnd.sample(NAMES, 2)
        text = f"({_expression(rnd, names)}) + {names[0]} * {names[1]}"
        order = names[::-1] if seed % 2 else names
        func = parse_expression(text, order)
        inputs = {n: rnd.choice(PATTERNS) for n in order}
        target = ["numpy", "c", "numba"][seed % 3]
        try:
            k = galinear.compile(func, E3, inputs, target=target)
        except ValueError:
            continue
        arrays = _random_inputs(k, seed=seed)
        expected = _reference(E3, func, k, arrays)
        pos = k(*[arrays[n] for n in k.input_blades])
        kw = k(**dict(reversed(list(arrays.items()))))
        out.append([text, k._built.from_cache, list(k.input_blades) == order,
                    float(max(np.abs(pos - expected).max(), np.abs(kw - expected).max()))])
    print(json.dumps(out))
""")


def test_random_expressions_through_the_cache_in_a_new_process(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    here = Path(__file__).resolve().parent
    cold = _python(_WARM, cache, here, 6)
    warm = _python(_WARM, cache, here, 6)
    assert len(cold) >= 4 and [r[0] for r in cold] == [r[0] for r in warm]
    assert not any(r[1] for r in cold) and all(r[1] for r in warm)
    for text, _, ordered, error in cold + warm:
        assert ordered and error < 1e-9, text


# ---------------------------------------------------------------------------- kingdon's layout
def test_kernel_arrays_to_and_from_kingdon_layout():
    kingdon = pytest.importorskip("kingdon", reason="the layout test compares with kingdon (make test installs it)")
    from galinear.compiler.layouts import from_kingdon, kingdon_keys, to_kingdon

    pga = galinear.Algebra(3, 0, 1)
    assert kingdon_keys(pga, ["e1", "e12", "e234"]) == ((1, 3, 14), ("e0", "e01", "e123"))

    def motor_on_point(M, x):
        return M * x * ~M

    kernel = galinear.compile(motor_on_point, pga, {"M": "even", "x": 3}, target="numpy")
    arrays = _random_inputs(kernel, rows=5, seed=4)
    kalg = kingdon.Algebra(3, 0, 1)
    kmvs = []
    for name, array in arrays.items():
        keys, values = to_kingdon(array, pga, kernel.input_blades[name])
        assert values.shape == (len(keys), 5)
        kmvs.append(kalg.multivector(values=values, keys=keys))
    product = kmvs[0] * kmvs[1] * ~kmvs[0]
    theirs = from_kingdon(product.values(), product.keys(), pga, kernel.output_blades)
    assert np.allclose(theirs, kernel(**arrays), atol=1e-12)


# ---------------------------------------------------------------------------- simplification and bounds
def cga_motor_chain(x, R, t):
    """Up-project x, move it by the motor (1 - t n_inf / 2) R, project down."""
    from galinear.compiler import blade

    n_inf = blade(x, "e4") + blade(x, "e5")
    n_o = 0.5 * (blade(x, "e5") - blade(x, "e4"))
    X = x + 0.5 * x * x * n_inf + n_o
    M = (1 - 0.5 * t * n_inf) * R
    Y = M * X * ~M
    Y = Y / (-(Y | n_inf))
    return (Y ^ (n_inf ^ n_o)) * (n_inf ^ n_o)


def test_the_cga_chain_cancels_to_its_rational_form():
    cga = galinear.Algebra(4, 1, 0)
    inputs = {"x": ["e1", "e2", "e3"], "R": ["1", "e12", "e13", "e23"], "t": ["e1", "e2", "e3"]}
    kernel = galinear.compile(cga_motor_chain, cga, inputs, target="numpy")
    assert kernel.strategy == "rational" and kernel.output_blades == ("e1", "e2", "e3")
    assert kernel.operations["multiplications"] <= 29  # kingdon's simplify(expand()) program: 29
    assert kernel.operations["divisions"] == 1  # one reciprocal of |R|^2 shared by the outputs
    _assert_right(cga, cga_motor_chain, kernel)
    arrays = _random_inputs(kernel)
    arrays["R"][2] = 0.0  # |R|^2 = 0: the function as written divides by zero there
    with pytest.raises(KernelDomainError, match="rows 2"):
        kernel(**arrays)


def test_a_cancelled_division_keeps_its_guard():
    def unit(x):
        return x * x.inv()

    kernel = galinear.compile(unit, E3, {"x": 1}, target="numpy")
    assert np.allclose(kernel(np.ones((2, 3))), 1.0)
    with pytest.raises(KernelDomainError):
        kernel(np.zeros((1, 3)))


@pytest.mark.parametrize("case", ["ab", "abc", "V"])
def test_versor_inverses_in_cl41_compile_quickly_and_right(case):
    import time

    from galinear.compiler import inv

    cga = galinear.Algebra(4, 1, 0)
    func, inputs = {"ab": (lambda a, b: inv(a * b), {"a": 1, "b": 1}),
                    "abc": (lambda a, b, c: inv(a * b * c), {"a": 1, "b": 1, "c": 1}),
                    "V": (lambda V: ~V / (V * ~V), {"V": "even"})}[case]
    start = time.perf_counter()
    kernel = galinear.compile(func, cga, inputs, target="numpy", cache=False)
    assert time.perf_counter() - start < 60
    _assert_right(cga, func, kernel, tol=1e-7)


def test_an_unbounded_compile_is_refused_up_front(capsys):
    import time

    from galinear.cli import main
    from galinear.compiler import CompileTooLarge

    start = time.perf_counter()
    with pytest.raises(CompileTooLarge, match="max_terms=None") as error:
        galinear.compile(lambda x: x * x * x, galinear.Algebra(8), {"x": "full"}, target="numpy", cache=False)
    assert "65,536 terms" in str(error.value) and "galinear.MultiVector" in str(error.value)
    assert main(["codegen", "--expr", "x*x*x", "--input", "x=full", "--n", "8", "--print"]) == 2
    assert "--max-terms 0" in capsys.readouterr().err
    assert time.perf_counter() - start < 20


def test_a_long_product_of_vectors_compiles_in_linear_form():
    names = ["a", "b", "c"]
    func = parse_expression(" * ".join(names[i % 3] for i in range(450)), names)
    kernel = galinear.compile(func, E3, {n: 1 for n in names}, target="numpy", cache=False)
    arrays = {n: v / np.linalg.norm(v, axis=-1, keepdims=True) for n, v in _random_inputs(kernel).items()}
    expected = _reference(E3, func, kernel, arrays)
    assert np.allclose(kernel(**arrays), expected, atol=1e-9)


def test_operations_count_what_the_code_computes():
    import ast

    def rotor_between(a, b):
        r = 1 + b * a
        return r / sqrt((r * ~r)(0))

    kernel = galinear.compile(rotor_between, E3, {"a": 1, "b": 1}, target="numba")
    body = next(n for n in ast.walk(ast.parse(kernel.source)) if isinstance(n, ast.FunctionDef)
                and n.name == "kernel_serial")
    products = sum(1 for n in ast.walk(body) if isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mult))
    assert products == kernel.operations["multiplications"]
    sqrt_lines = [line for line in kernel.source.splitlines() if "math.sqrt(" in line]
    assert len(sqrt_lines) == 2 and all("math.sqrt(_" in line for line in sqrt_lines)  # an argument, once


@pytest.mark.parametrize("op", sorted(OPERATORS))
def test_a_symbolic_constant_on_the_left_equals_its_numeric_twin(op):
    import sympy

    from galinear.symbolic import MultiVector as SymbolicMultiVector

    half, three_quarters = sympy.Rational(1, 2), sympy.Rational(3, 4)
    S = SymbolicMultiVector(E3.metric, [half, 1, 0, 0, 0, 0, -three_quarters, 0])
    C = E3.multivector({"1": 0.5, "e1": 1.0, "e23": -0.75})
    apply = OPERATORS[op]
    symbolic = galinear.compile(lambda x: apply(S, x), E3, {"x": [0, 1, 2]}, target="numpy", cache=False)
    numeric = galinear.compile(lambda x: apply(C, x), E3, {"x": [0, 1, 2]}, target="numpy", cache=False)
    x = _random_inputs(numeric)["x"]
    assert np.allclose(symbolic(x), numeric(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("target", ["numpy", "numba"])
def test_gradients_of_the_rational_and_versor_orders(target):
    from galinear.compiler import inv
    from galinear.testing import assert_kernel_gradient, special_points

    cga = galinear.Algebra(4, 1, 0)
    cases = [(cga_motor_chain, {"x": ["e1", "e2", "e3"], "R": ["1", "e12", "e13", "e23"], "t": ["e1", "e2", "e3"]}),
             (lambda a, b: inv(a * b), {"a": 1, "b": 1})]
    rng = np.random.default_rng(7)
    for func, inputs in cases:
        pair = galinear.compile(func, cga, inputs, target=target, grad=True)
        widths = [len(v) for v in pair.forward.input_blades.values()]
        points = special_points(widths, rng)
        for name in ("random", "large"):  # zero and tiny are outside the domain of the division
            arrays = [a + 0.5 * np.sign(a) for a in points[name]]  # away from |R| = 0 and a, b null
            assert_kernel_gradient(pair, arrays, rtol=1e-6)


def test_the_key_reads_arrays_of_other_libraries_by_content():
    torch = pytest.importorskip("torch", reason="the case is a torch tensor read by the function")
    from galinear.compiler.build import cache_key

    weights = torch.tensor([1.0, 2.0])

    def scaled(x):
        return x * float(weights[0])

    before = cache_key(scaled, E3.metric, {"x": 1}, "numpy", "auto", False)
    weights[0] = 3.0
    assert cache_key(scaled, E3.metric, {"x": 1}, "numpy", "auto", False) != before


def test_exact_tracing_for_proofs_never_drops_on_the_probe_alone(monkeypatch):
    from galinear.symbolic import polynomials
    from galinear.symbolic.trace import trace

    monkeypatch.setattr(polynomials.Probe, "is_zero", lambda self, expr: True)  # a probe that is always wrong
    commutator = trace(lambda a, b: a * b - b * a, E3.metric, {"a": 1, "b": 1}, exact=True)
    assert commutator.output_blades == ("e12", "e13", "e23")  # the expansion decides, not the probe
    associator = trace(lambda a, b, c: (a * b) * c - a * (b * c), E3.metric, {"a": 2, "b": 2, "c": 1}, exact=True)
    assert not associator.outputs
