r"""Compile any function of multivectors into straight-line kernels, and prove identities.

``galinear.compile(func, algebra, inputs, target="numba")`` traces ``func`` once with symbolic
multivectors (:mod:`galinear.symbolic.trace`), lowers it to one straight-line program with the
structural zeros removed and common subexpressions shared (:mod:`galinear.symbolic.lowering`),
prints it for the target (one module each under :mod:`galinear.compiler.targets`: numba, numpy,
torch, C, Triton, JAX; the walk over statements they share is :mod:`galinear.symbolic.emit`) and
loads it as a :class:`Kernel`. ``grad=True`` also generates the backward program by
differentiating the forward one symbolically.

``galinear.prove(func, inputs, signatures)`` decides identities ``lhs == rhs`` per signature:
numeric falsification first, then an exact proof on symbolic coefficients
(:mod:`galinear.compiler.identities`).

Docs: docs/codegen.md.
"""
from __future__ import annotations

from galinear.compiler import prove as _old_module_path  # noqa: F401 - the deprecated path, loaded first
from galinear.compiler.build import metric_of as _metric_of
from galinear.compiler.identities import ProofReport, prove  # the function takes the name
from galinear.compiler.kernel import Kernel, KernelPair
from galinear.compiler.targets import TARGETS
from galinear.symbolic.functions import blade, dual, exp, grade, inv, norm, reverse, sqrt, undual
from galinear.symbolic.trace import MAX_TRACE_TERMS, CompileTooLarge, KernelDomainError

__all__ = ["compile", "Kernel", "KernelPair", "KernelDomainError", "CompileTooLarge", "TARGETS", "prove", "ProofReport",
           "parse_expression",
           "blade", "sqrt", "norm", "exp", "inv", "dual", "undual", "reverse", "grade"]


def compile(func, algebra, inputs: dict | None = None, target: str = "numba", *, grad: bool = False,
            strategy: str = "auto", name: str | None = None, cache: bool = True,
            max_terms: int | None = MAX_TRACE_TERMS):
    """Compile ``func`` (a Python function of multivectors) for ``target``.

    As a decorator, leave out the function: ``@galinear.compile(alg, {"M": "even", "x": 1})``
    above ``def f(M, x): ...`` makes ``f`` the compiled :class:`Kernel`.

    Parameters
    ----------
    func : callable
        Written with galinear's operators (``* ^ | << >> & ~ @``, ``x(k)`` / ``x.grade(k)``,
        ``dual``, ``undual``, ``reverse``, scalar ``+ - * /``, ``inv()``, ``exp()`` of a bivector,
        :func:`sqrt` / :func:`norm` of a scalar part). It must not branch on multivector values.
    algebra : galinear.Algebra
        The algebra (any signature, n <= 8).
    inputs : dict
        Parameter name -> what it holds: a grade, a list of grades, ``"even"``, ``"odd"``,
        ``"full"`` or a list of blade names.
    target : str
        One of :data:`galinear.compiler.targets.TARGETS` (an unknown name is refused with the list).
    grad : bool
        Also generate the backward kernel; returns a :class:`KernelPair` ``(forward, backward)``.
    strategy : {"auto", "staged", "expanded"}
        Order of evaluation (``auto``: fewer multiplications).
    name : str, optional
        Name of the generated function (default: the function's name).
    cache : bool
        Reuse generated sources from galinear's private cache folder.
    max_terms : int or None
        Refuse (:class:`CompileTooLarge`, before any expansion) once the traced products hold
        more terms than this; the default is about two minutes of compiling. None: no bound.
    """
    from galinear.compiler.build import build
    from galinear.compiler.targets import target as target_module

    if inputs is None and isinstance(algebra, dict) and not callable(func):  # the decorator form
        options = dict(target=target, grad=grad, strategy=strategy, name=name, cache=cache, max_terms=max_terms)
        return lambda function: compile(function, func, algebra, **options)
    if inputs is None:
        raise TypeError("compile(func, algebra, inputs) needs the inputs: a dict {parameter: pattern}")
    if not callable(func):
        raise TypeError(f"func must be a function of multivectors, got {type(func).__name__}")
    target_module(target)  # an unknown name is refused, naming the registered targets
    metric = _metric_of(algebra)
    if name is None:
        name = getattr(func, "__name__", "kernel")
        if not name.isidentifier() or name == "<lambda>":
            name = "kernel"
    built = build(func, metric, inputs, target, strategy=strategy, grad=grad, name=name, use_cache=cache,
                  max_terms=max_terms)
    kernel = Kernel(built, func, algebra, inputs)
    return KernelPair(kernel) if grad else kernel


def parse_expression(text: str, names):
    """A function of ``names`` from an expression string (``ast``, allowed operators only)."""
    from galinear.compiler.expression import parse_expression as _parse

    return _parse(text, names)
