r"""Expressions typed as text (``"M * x * ~M"``) turned into functions of multivectors, safely.

:func:`parse_expression` parses the text with :mod:`ast`, checks every node against a short list
of allowed forms *before anything runs*, and returns a function that interprets the checked
tree itself (no ``eval``, ``exec`` or ``compile`` of the text). The function works with any
multivector class: the traced multivectors of :func:`galinear.compile`, the numeric
:class:`galinear.MultiVector`, the symbolic one and the ``clifford`` adapter of
:mod:`galinear.compiler.verify`.

Allowed:

- the declared input names, blade names (``e1``, ``e12``: constants of the inputs' algebra, e.g.
  CGA's ``e4 + e5``; a declared input of the same name wins), and finite int or float literals;
- the binary operators ``* ^ | << >> & @ + - /``; the unary ``~ - +``;
- ``x ** k`` with an integer literal k (``|k| <= 64``; negative powers use the inverse);
- the functions ``exp, inv, sqrt, norm, dual, undual, reverse`` (one argument) and
  ``grade(x, k, ...)``; the call form ``x(k, ...)`` picks grade parts (integer literals).

Everything else (attribute access, subscripts, other calls, ``__import__``, lambdas,
comprehensions, strings, keywords, starred arguments, comparisons, conditionals, undeclared names)
is refused with a ValueError naming the node and its column. :func:`parse_identity` reads
``lhs == rhs`` (one top-level ``==``) into a function returning the pair, the form
:func:`galinear.prove` takes.

The command-line helpers :func:`parse_inputs` (``name=pattern``) and :func:`parse_signature`
(``p,q,r``) live here too, so ``galinear codegen --expr`` and ``galinear verify --identity``
read their arguments the same way.
"""
from __future__ import annotations

import ast
import inspect
import keyword
import math
import re

__all__ = ["parse_expression", "parse_identity", "parse_inputs", "parse_signature", "FUNCTIONS",
           "MAX_EXPRESSION_CHARS", "MAX_POWER"]

#: Functions an expression may call (one multivector argument; ``grade`` also takes grades).
FUNCTIONS = ("exp", "inv", "sqrt", "norm", "dual", "undual", "reverse", "grade")
#: Longest expression text accepted.
MAX_EXPRESSION_CHARS = 4000
#: Largest |k| of ``x ** k``.
MAX_POWER = 64

_BINARY = {ast.Mult: "*", ast.BitXor: "^", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>",
           ast.BitAnd: "&", ast.MatMult: "@", ast.Add: "+", ast.Sub: "-", ast.Div: "/", ast.Pow: "**"}
_UNARY = {ast.Invert: "~", ast.USub: "-", ast.UAdd: "+"}
#: Names an expression may use without declaring them: blades (``e1``, ``e12``, ``e1234``).
_BLADE_NAME = r"e[0-9]+"


def _where(node) -> str:
    col = getattr(node, "col_offset", None)
    line = getattr(node, "lineno", 1)
    if col is None:
        return ""
    return f" at column {col + 1}" if line == 1 else f" at line {line}, column {col + 1}"


class _Refused(ValueError):
    pass


def _refuse(node, what: str) -> None:
    raise _Refused(f"{what}{_where(node)}")


def _node_name(node) -> str:
    return type(node).__name__


def _int_literal(node):
    """The value of an integer literal (``3`` or ``-3``), else None."""
    sign = 1
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1 if isinstance(node.op, ast.USub) else 1
        node = node.operand
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return sign * node.value
    return None


class _Checker:
    """Walks the tree once and refuses any node outside the allowed forms."""

    def __init__(self, names):
        self.names = names
        self.used = set()
        self.blades = set()

    def check(self, node) -> None:
        method = getattr(self, f"_{_node_name(node)}", None)
        if method is None:
            _refuse(node, f"{_node_name(node)} is not allowed in an expression ({_describe(node)})")
        method(node)

    def _Expression(self, node):
        self.check(node.body)

    def _Name(self, node):
        if node.id in FUNCTIONS:
            _refuse(node, f"the function {node.id!r} must be called, e.g. {node.id}(x)")
        if node.id not in self.names:
            if re.fullmatch(_BLADE_NAME, node.id):
                self.blades.add(node.id)
                return
            known = ", ".join(self.names) or "none"
            _refuse(node, f"unknown name {node.id!r} (declared inputs: {known}; blade names such as e1 or e12; "
                    f"functions: {', '.join(FUNCTIONS)})")
        self.used.add(node.id)

    def _Constant(self, node):
        if type(node.value) not in (int, float):
            _refuse(node, f"the literal {node.value!r} is not allowed (only int and float numbers)")
        if not math.isfinite(node.value):
            _refuse(node, f"the literal {node.value!r} is not finite (a float literal beyond 1.8e308 reads as inf)")

    def _BinOp(self, node):
        if type(node.op) not in _BINARY:
            _refuse(node, f"the operator {type(node.op).__name__} is not allowed (allowed: "
                    f"{' '.join(_BINARY.values())})")
        self.check(node.left)
        if isinstance(node.op, ast.Pow):
            k = _int_literal(node.right)
            if k is None:
                _refuse(node.right, "the exponent of ** must be an integer literal, e.g. x ** 2 or x ** -1")
            if abs(k) > MAX_POWER:
                _refuse(node.right, f"the exponent {k} is too large (|k| <= {MAX_POWER})")
            return
        self.check(node.right)

    def _UnaryOp(self, node):
        if type(node.op) not in _UNARY:
            _refuse(node, f"the unary operator {type(node.op).__name__} is not allowed (allowed: ~ - +)")
        self.check(node.operand)

    def _Call(self, node):
        if node.keywords:
            _refuse(node.keywords[0].value if node.keywords[0].arg is None else node,
                    "keyword arguments are not allowed in calls")
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                _refuse(arg, "starred arguments (*args) are not allowed in calls")
        func = node.func
        if isinstance(func, ast.Name) and func.id in FUNCTIONS:
            if func.id == "grade":
                if len(node.args) < 2:
                    _refuse(node, "grade(x, k, ...) needs a multivector and at least one integer grade")
                self.check(node.args[0])
                self._grades(node.args[1:])
                return
            if len(node.args) != 1:
                _refuse(node, f"{func.id}(...) takes exactly one argument, got {len(node.args)}")
            self.check(node.args[0])
            return
        if isinstance(func, ast.Name) and func.id not in self.names:
            _refuse(func, f"calling {func.id!r} is not allowed (functions: {', '.join(FUNCTIONS)}; "
                    "x(k) picks the grade-k part of an input)")
        if not isinstance(func, (ast.Name, ast.BinOp, ast.UnaryOp, ast.Call)):
            _refuse(func, f"{_node_name(func)} cannot be called ({_describe(func)})")
        if not node.args:
            _refuse(node, "x(...) needs at least one integer grade, e.g. x(2)")
        self.check(func)
        self._grades(node.args)

    def _grades(self, args):
        for arg in args:
            k = _int_literal(arg)
            if k is None or k < 0:
                _refuse(arg, "grades must be non-negative integer literals, e.g. x(2) or grade(x, 0, 2)")


def _describe(node) -> str:
    if isinstance(node, ast.Attribute):
        hint = "; write x(k) or grade(x, k)" if node.attr == "grade" else ""
        return f"attribute access .{node.attr}{hint}"
    if isinstance(node, ast.Subscript):
        return "subscript x[...]"
    if isinstance(node, ast.Lambda):
        return "lambda"
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return "comprehension"
    if isinstance(node, ast.Compare):
        return "comparison; galinear verify --identity takes one top-level =="
    if isinstance(node, (ast.BoolOp, ast.IfExp)):
        return "logic and conditionals"
    if isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        return "container literal"
    if isinstance(node, ast.NamedExpr):
        return "assignment expression"
    return "not an arithmetic expression of multivectors"


# ---------------------------------------------------------------------------- evaluation
def _functions():
    from galinear.symbolic import functions, trace

    table = {name: getattr(functions, name) for name in FUNCTIONS}
    helper = table["sqrt"]

    def sqrt(x):
        # The helper takes traced, numeric galinear and plain numbers; other classes (the
        # clifford adapter, symbolic multivectors) bring their own sqrt().
        if isinstance(x, trace.Traced) or hasattr(x, "values") or not hasattr(x, "sqrt"):
            return helper(x)
        return x.sqrt()

    table["sqrt"] = sqrt
    return table


class _Evaluator:
    """Interprets a checked tree over the argument values (any multivector class)."""

    def __init__(self, text: str, env: dict):
        self.text, self.env = text, env
        self.functions = _functions()

    def run(self, node):
        return getattr(self, f"_{_node_name(node)}")(node)

    def _fail(self, node, error):
        raise ValueError(f"expression {self.text!r}: {type(error).__name__}: {error}{_where(node)}") from error

    def _Expression(self, node):
        return self.run(node.body)

    def _Name(self, node):
        if node.id in self.env:
            return self.env[node.id]
        return self._blade(node.id, node)

    def _blade(self, name: str, node):
        """The blade ``name`` in the algebra (and multivector kind) of the inputs."""
        from galinear.symbolic.functions import blade

        like = next(iter(self.env.values()))
        try:
            return blade(like, name)
        except (ValueError, KeyError, IndexError) as error:
            raise ValueError(f"expression {self.text!r}: {name!r} is not a blade of this algebra "
                             f"({error}){_where(node)}") from None

    def _Constant(self, node):
        return node.value

    def _BinOp(self, node):
        left = self.run(node.left)
        try:
            if isinstance(node.op, ast.Pow):
                return left ** _int_literal(node.right)
            right = self.run(node.right)
            op = node.op
            if _is_number(left) and _is_number(right) and not isinstance(op, (ast.Add, ast.Sub, ast.Div)):
                return _scalar_product(op, left, right)
            if isinstance(op, ast.Mult):
                return left * right
            if isinstance(op, ast.BitXor):
                return left ^ right
            if isinstance(op, ast.BitOr):
                return left | right
            if isinstance(op, ast.LShift):
                return left << right
            if isinstance(op, ast.RShift):
                return left >> right
            if isinstance(op, ast.BitAnd):
                return left & right
            if isinstance(op, ast.MatMult):
                return left @ right
            if isinstance(op, ast.Add):
                return left + right
            if isinstance(op, ast.Sub):
                return left - right
            return left / right
        except (TypeError, ZeroDivisionError, OverflowError, ArithmeticError) as error:
            self._fail(node, error)

    def _UnaryOp(self, node):
        value = self.run(node.operand)
        try:
            if isinstance(node.op, ast.Invert):
                if _is_number(value):
                    return value  # the reverse of a scalar (Python's ~ would flip the bits of an int)
                return ~value
            return -value if isinstance(node.op, ast.USub) else +value
        except TypeError as error:
            self._fail(node, error)

    def _Call(self, node):
        func = node.func
        try:
            if isinstance(func, ast.Name) and func.id in FUNCTIONS:
                arg = self.run(node.args[0])
                if _is_number(arg):  # a function of a plain number: of the scalar of the inputs' algebra
                    arg = self._blade("1", node) * arg
                if func.id == "grade":
                    return self.functions["grade"](arg, *(_int_literal(a) for a in node.args[1:]))
                return self.functions[func.id](arg)
            value = self.run(func)
            grades = tuple(_int_literal(a) for a in node.args)
            if _is_number(value):
                if all(g != 0 for g in grades):
                    return 0
                return value
            return value(*grades)
        except (TypeError, AttributeError, ZeroDivisionError, OverflowError, ArithmeticError) as error:
            self._fail(node, error)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _scalar_product(op, a, b):
    """A product of two plain numbers with the multivector meaning of ``op`` (Python's ``^ << >> | &``
    on ints are bit operations)."""
    if isinstance(op, ast.BitAnd):
        return 0  # the regressive product of two scalars vanishes for n >= 1
    if isinstance(op, ast.MatMult):
        return a * b * a
    return a * b


def _check_names(names) -> tuple[str, ...]:
    if isinstance(names, str):
        names = [names]
    names = tuple(names)
    if not names:
        raise ValueError("an expression needs at least one declared input name")
    for name in names:
        if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise ValueError(f"input name {name!r} must be a Python identifier that does not start with '_'")
        if name in FUNCTIONS:
            raise ValueError(f"input name {name!r} is the name of a function ({', '.join(FUNCTIONS)}); rename it")
    if len(set(names)) != len(names):
        raise ValueError(f"input names must be distinct, got {list(names)}")
    return names


def _parse(text: str) -> ast.Expression:
    if not isinstance(text, str):
        raise ValueError(f"an expression is a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ValueError(f"the expression has {len(text)} characters; at most {MAX_EXPRESSION_CHARS} are accepted")
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        where = f" at column {error.offset}" if error.offset else ""
        raise ValueError(f"expression {text!r}: syntax error ({error.msg}){where}") from None
    except (ValueError, RecursionError, MemoryError) as error:
        raise ValueError(f"expression {text!r} cannot be parsed ({type(error).__name__}: {error})") from None


def _check(tree, text: str, names, kind: str = "expression") -> set:
    """The input names ``tree`` reads, after checking every node (ValueError naming a refused one)."""
    checker = _Checker(names)
    try:
        checker.check(tree)
        return checker.used
    except _Refused as error:
        raise ValueError(f"{kind} {text!r}: {error}") from None
    except RecursionError:
        raise ValueError(f"{kind} {text!r} is nested too deeply") from None


def _make_function(names, text: str, evaluate, kind: str, used=()):
    """A function with one named parameter per input whose cache identity is ``text``; ``used``
    (the inputs the text reads) becomes its ``used_inputs``."""
    signature = inspect.Signature([inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        return evaluate(dict(bound.arguments))

    function.__signature__ = signature
    function.__name__ = function.__qualname__ = kind
    function.__doc__ = f"{kind} {text!r} of ({', '.join(names)})"
    function.__galinear_source__ = f"{kind} text, inputs ({', '.join(names)}): {text}"
    function.expression = text
    function.used_inputs = tuple(n for n in names if n in set(used))
    return function


def parse_expression(text: str, names):
    """A function of the multivector arguments ``names`` that evaluates ``text``.

    The text is parsed with :mod:`ast` and every node is checked before anything runs (see the
    module notes for what is allowed); a refused node raises ValueError naming it and its column.
    The returned function (``__name__`` ``"expression"``) takes one argument per name, in the
    order of ``names``, and works with any multivector class.

    >>> f = parse_expression("M * x * ~M", ["M", "x"])
    >>> f.__name__
    'expression'
    """
    names = _check_names(names)
    tree = _parse(text)
    used = _check(tree, text, names)
    canonical = text.strip()
    return _make_function(names, canonical, lambda env: _Evaluator(canonical, env).run(tree), "expression", used)


def parse_identity(text: str, names):
    """A function of ``names`` returning ``(lhs, rhs)`` from ``"lhs == rhs"`` (one top-level ``==``),
    checked like :func:`parse_expression`; the form :func:`galinear.prove` takes."""
    names = _check_names(names)
    tree = _parse(text)
    body = tree.body
    if not isinstance(body, ast.Compare):
        raise ValueError(f"identity {text!r}: write it as lhs == rhs (one top-level ==)")
    if len(body.ops) != 1 or not isinstance(body.ops[0], ast.Eq):
        ops = ", ".join(type(op).__name__ for op in body.ops)
        raise ValueError(f"identity {text!r}: needs exactly one top-level == between two expressions, got {ops}")
    sides = (ast.Expression(body=body.left), ast.Expression(body=body.comparators[0]))
    used = set()
    for side in sides:
        used |= _check(side, text, names, "identity")
    canonical = text.strip()

    def evaluate(env):
        evaluator = _Evaluator(canonical, env)
        return evaluator.run(sides[0]), evaluator.run(sides[1])

    return _make_function(names, canonical, evaluate, "identity", used)


# ---------------------------------------------------------------------------- command-line helpers
_PATTERN_WORDS = ("even", "odd", "full", "scalar", "vector", "bivector", "trivector", "pseudoscalar")


def parse_pattern(text: str):
    """An input pattern from its command-line spelling: ``3`` (a grade), ``0,2`` (grades),
    ``even`` / ``odd`` / ``full`` (and the other words of the trace patterns) or blade names
    ``e12,e13``."""
    items = [t.strip() for t in str(text).split(",")]
    if not text or not all(items):
        raise ValueError(f"pattern {text!r} is empty or has an empty item; give a grade (2), grades (0,2), "
                         "even, odd, full or blade names (e12,e13)")
    if all(re.fullmatch(r"-?[0-9]+", t) for t in items):
        if any(len(t) > 3 for t in items):
            raise ValueError(f"grade {text!r} is out of range; grades are 0..8")
        grades = [int(t) for t in items]
        return grades[0] if len(grades) == 1 else grades
    if len(items) == 1 and items[0].lower() in _PATTERN_WORDS:
        return items[0].lower()
    if all(t.lower().startswith("e") and t[1:].isalnum() for t in items):
        return items
    raise ValueError(f"pattern {text!r} is not a grade (2), grades (0,2), one of {', '.join(_PATTERN_WORDS)} "
                     "or blade names (e12,e13)")


def parse_inputs(items) -> dict:
    """``["M=even", "x=1"]`` -> ``{"M": "even", "x": 1}`` (order kept; see :func:`parse_pattern`)."""
    out = {}
    for item in items or ():
        name, sep, pattern = str(item).partition("=")
        name = name.strip()
        if not sep or not name:
            raise ValueError(f"--input {item!r} must look like name=pattern, e.g. x=1, M=even, B=e12,e13")
        if name in out:
            raise ValueError(f"--input {name} is given twice")
        _check_names([name])
        out[name] = parse_pattern(pattern.strip())
    if not out:
        raise ValueError("give at least one --input name=pattern (e.g. --input x=1)")
    return out


def parse_signature(text: str, max_n: int, label: str = "signature") -> tuple[int, int, int]:
    """``"3,0,1"`` -> ``(3, 0, 1)``, checked (non-negative, ``1 <= p+q+r <= max_n``) before anything
    is built from it; ``label`` names the option in the messages."""
    parts = [part.strip() for part in str(text).split(",")]
    if len(parts) != 3 or not all(re.fullmatch(r"-?[0-9]+", part) for part in parts):
        raise ValueError(f"{label} must be three integers p,q,r written with the digits 0-9, e.g. 3,0,1; "
                         f"got {text!r}")
    if any(part.startswith("-") for part in parts):
        raise ValueError(f"{label} {text!r}: p, q and r must be non-negative")
    if any(len(part) > 4 for part in parts):
        raise ValueError(f"{label} {text!r} is too large; give n = p+q+r with 1 <= n <= {max_n}")
    p, q, r = (int(part) for part in parts)
    if not 1 <= p + q + r <= max_n:
        raise ValueError(f"{label} {text!r} has n = p+q+r = {p + q + r}; give 1 <= n <= {max_n}")
    return p, q, r
