"""Expression text to functions of multivectors: the checked ast, the interpreter, the cache key."""
import ast
import builtins
import inspect
import re

import numpy as np
import pytest
import sympy as sp

import galinear
from galinear.compiler.build import cache_key
from galinear.compiler.expression import (
    parse_expression,
    parse_identity,
    parse_inputs,
    parse_pattern,
    parse_signature,
)
from galinear.core.algebra import MultiVector
from galinear.symbolic import MultiVector as SymbolicMultiVector

REFUSED = [
    ("__import__('os')", "calling '__import__' is not allowed"),
    ("__import__('os').system('echo hacked')", "Attribute cannot be called (attribute access .system)"),
    ("x.__class__", "Attribute is not allowed"),
    ("x.grade(2)", "attribute access .grade; write x(k) or grade(x, k)"),
    ("lambda: 1", "Lambda is not allowed"),
    ("(lambda: 1)()", "Lambda cannot be called"),
    ("[x for x in y]", "ListComp is not allowed"),
    ("x[0]", "Subscript is not allowed"),
    ("y * x", "unknown name 'y'"),
    ("'text'", "the literal 'text' is not allowed"),
    ("x * b'1'", "the literal b'1' is not allowed"),
    ("x(*x)", "starred arguments"),
    ("exp(x=x)", "keyword arguments"),
    ("open('f')", "calling 'open' is not allowed"),
    ("x if x else x", "IfExp is not allowed"),
    ("x and x", "BoolOp is not allowed"),
    ("x == x", "Compare is not allowed"),
    ("x ** x", "the exponent of ** must be an integer literal"),
    ("x ** 10000000", "the exponent 10000000 is too large"),
    ("x(x)", "grades must be non-negative integer literals"),
    ("grade(x)", "grade(x, k, ...) needs"),
    ("exp(x, x)", "exp(...) takes exactly one argument"),
    ("exp", "the function 'exp' must be called"),
    ("(x := 1)", "NamedExpr is not allowed"),
    ("{x: x}", "Dict is not allowed"),
    ("x % x", "the operator Mod is not allowed"),
    ("not x", "the unary operator Not is not allowed"),
    ("x +", "syntax error"),
    ("", "the expression is empty"),
]


class Sentinel:
    """Records any use; an expression that is refused must never touch its inputs."""

    touched = []

    def __getattr__(self, name):
        Sentinel.touched.append(name)
        raise AttributeError(name)

    def __mul__(self, other):
        Sentinel.touched.append("*")
        return self


@pytest.mark.parametrize("text,message", REFUSED)
def test_refused_before_anything_runs(text, message, monkeypatch):
    ran = []

    def spy(name, original):
        def wrapped(*args, **kwargs):
            flags = kwargs.get("flags", args[3] if len(args) > 3 else 0)
            if not (name == "compile" and flags & ast.PyCF_ONLY_AST):  # ast.parse: a tree, no code object
                ran.append(name)
            return original(*args, **kwargs)
        return wrapped

    for name in ("eval", "exec", "compile", "open"):
        monkeypatch.setattr(builtins, name, spy(name, getattr(builtins, name)))
    Sentinel.touched = []
    with pytest.raises(ValueError, match=re.escape(message)):
        f = parse_expression(text, ["x"])
        f(Sentinel())  # never reached
    monkeypatch.undo()
    assert ran == [] and Sentinel.touched == []


def test_a_refused_import_leaves_no_trace(tmp_path):
    target = tmp_path / "hacked"
    for text in (f"__import__('os').system('touch {target}')", f"x * exp(__import__('os').system('touch {target}'))",
                 f"x.__class__.__init__.__globals__['os'].system('touch {target}')"):
        with pytest.raises(ValueError, match="is not allowed|cannot be called"):
            parse_expression(text, ["x"])
    assert not target.exists()


def test_refusal_names_the_node_and_its_column():
    with pytest.raises(ValueError, match=r"Attribute is not allowed .* at column 5"):
        parse_expression("x * x.__dict__", ["x"])
    with pytest.raises(ValueError, match=r"unknown name .y. .* at line 2, column 2"):
        parse_expression("(x *\n y)", ["x"])


def test_no_eval_exec_or_compile_in_the_interpreter():
    import galinear.compiler.expression as module

    tree = ast.parse(inspect.getsource(module))
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = {node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "") for node in calls}
    assert not names & {"eval", "exec", "compile", "__import__", "import_module"}
    assert "parse" in names  # ast.parse: a tree, never a code object


def test_the_tree_is_interpreted_over_any_multivector_class():
    f = parse_expression("M * x * ~M + (x ^ M)", ["M", "x"])
    alg = galinear.Algebra(3, 0, 0)
    M = alg.multivector({"1": 0.5, "e12": 0.5})
    x = alg.multivector({"e1": 1.0, "e3": 2.0})
    assert np.allclose(f(M, x).values, (M * x * ~M + (x ^ M)).values)
    Ms = SymbolicMultiVector(3, [sp.Rational(1, 2), 0, 0, 0, sp.Rational(1, 2), 0, 0, 0])
    xs = SymbolicMultiVector(3, [0, 1, 0, 2, 0, 0, 0, 0])
    assert np.allclose([float(c) for c in f(Ms, xs).coefficients], f(M, x).values)


def test_names_and_signature():
    f = parse_expression("a ^ b", ["a", "b"])
    assert f.__name__ == "expression"
    assert list(inspect.signature(f).parameters) == ["a", "b"]
    assert f(b=2, a=3) == 6  # keyword binding; ^ of two numbers is their product, not a bit operation
    for bad in (["_x"], ["exp"], ["a", "a"], ["1x"], ["class"], []):
        with pytest.raises(ValueError):
            parse_expression("1", bad)


def _rows(n, rng, alg, positions):
    values = np.zeros(alg.dim)
    values[positions] = rng.standard_normal(len(positions))
    return MultiVector(alg, values)


EXPRESSIONS = [
    ("M * x * ~M", lambda M, x: M * x * ~M),
    ("(a << (b ^ x)) - (a | x) * 2 + a @ x / 3", lambda a, b, x: (a << (b ^ x)) - (a | x) * 2 + a @ x / 3),
    ("dual(a) & undual(x) + reverse(a) >> 2", lambda a, x: a.dual() & x.undual() + a.reverse() >> 2),
    ("x(1) + grade(x, 0, 2) - -x ** 2 + +x ** -1", lambda x: x(1) + x(0, 2) + x * x + x.inv()),
    ("exp(B) * x * ~exp(B) + norm(x) * sqrt(x(0) * x(0))",
     lambda B, x: B.exp() * x * ~B.exp() + x.norm() * abs(float(x.values[0]))),
]


@pytest.mark.parametrize("text,reference", EXPRESSIONS)
def test_numeric_evaluation_matches_python(text, reference, rng):
    names = list(inspect.signature(reference).parameters)
    f = parse_expression(text, names)
    alg = galinear.Algebra(3, 0, 0)
    args = []
    for name in names:
        if name == "B":
            args.append(_rows(3, rng, alg, [4, 5, 6]))
        else:
            args.append(_rows(3, rng, alg, list(range(alg.dim))))
    got, want = f(*args), reference(*args)
    assert np.allclose(got.values, want.values, atol=1e-12)


def test_symbolic_evaluation_is_exact():
    f = parse_expression("a * b - (a | b) - (a ^ b)", ["a", "b"])
    a = SymbolicMultiVector(3, [0, *sp.symbols("a1:4"), 0, 0, 0, 0])
    b = SymbolicMultiVector(3, [0, *sp.symbols("b1:4"), 0, 0, 0, 0])
    assert f(a, b).expand().is_zero()


def test_compiled_kernel_from_text_matches_the_function():
    f = parse_expression("M * x * ~M", ["M", "x"])
    kernel = galinear.compile(f, galinear.Algebra(3, 0, 1), {"M": "even", "x": 1}, target="numpy", cache=False)
    assert kernel.name == "expression"
    assert kernel.verify(n=16).ok


def test_cache_identity_follows_the_text():
    inputs, metric = {"x": 1, "y": 1}, (1, 1, 1)
    texts = ["x * y", "y * x", "x ^ y", "x*y + 0", "x * y * 2"]
    keys = {cache_key(parse_expression(t, ["x", "y"]), metric, inputs, "numpy", "auto", False) for t in texts}
    assert len(keys) == len(texts)
    again = cache_key(parse_expression("x * y", ["x", "y"]), metric, inputs, "numpy", "auto", False)
    assert again in keys
    swapped = cache_key(parse_expression("x * y", ["y", "x"]), metric, {"y": 1, "x": 1}, "numpy", "auto", False)
    assert swapped not in keys  # the argument order is part of the function
    ident = parse_identity("x * y == y * x", ["x", "y"])
    assert cache_key(ident, metric, inputs, "numpy", "auto", False) not in keys


def test_identity_is_a_pair():
    f = parse_identity("a ^ b == -(b ^ a)", ["a", "b"])
    assert f.__name__ == "identity" and f.expression == "a ^ b == -(b ^ a)"
    alg = galinear.Algebra(3, 0, 0)
    a = alg.multivector({"e1": 1.0, "e2": 2.0, "e3": 3.0})
    b = alg.multivector({"e2": 1.0, "e3": -1.0})
    lhs, rhs = f(a, b)
    assert np.allclose(lhs.values, rhs.values)
    for bad, message in [("a ^ b", "lhs == rhs"), ("a == b == a", "exactly one top-level =="),
                         ("a < b", "exactly one top-level =="), ("a == b.x", "identity .*Attribute")]:
        with pytest.raises(ValueError, match=message):
            parse_identity(bad, ["a", "b"])


def test_command_line_helpers():
    assert parse_pattern("3") == 3 and parse_pattern("0,2") == [0, 2]
    assert parse_pattern("even") == "even" and parse_pattern("Vector") == "vector"
    assert parse_pattern("e12,e13") == ["e12", "e13"] and parse_pattern("e1") == ["e1"]
    for bad in ("", "1,,2", "1,e12", "banana", "12345"):
        with pytest.raises(ValueError):
            parse_pattern(bad)
    assert parse_inputs(["M=even", "x=1"]) == {"M": "even", "x": 1}
    for bad in (["x"], ["=1"], ["x=1", "x=2"], [], ["_x=1"]):
        with pytest.raises(ValueError):
            parse_inputs(bad)
    assert parse_signature("3,0,1", 8) == (3, 0, 1)
    for bad, message in [("3,0", "three integers"), ("a,b,c", "three integers"), ("-1,0,0", "non-negative"),
                         ("\u00b2,0,0", "digits 0-9"), ("\u0663,0,0", "digits 0-9"),
                         ("9,0,0", "n = p\\+q\\+r = 9"), ("0,0,0", "n = p\\+q\\+r = 0"),
                         ("1" + "0" * 40 + ",0,0", "too large")]:
        with pytest.raises(ValueError, match=message):
            parse_signature(bad, 8)


def test_scalar_operands_keep_their_algebra_meaning():
    f = parse_expression("(2 ^ 3) + (1 << 3) + (4 >> 1) + (3 | 1) + (2 & 5) + ~7 + 2 @ 3", ["x"])
    assert f(None) == 6 + 3 + 4 + 3 + 0 + 7 + 12
    with pytest.raises(ValueError, match="ZeroDivisionError"):
        parse_expression("x / 0", ["x"])(1)
