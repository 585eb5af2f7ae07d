r"""Proving or refuting identities ``lhs == rhs`` of multivector functions, per signature.

:func:`prove` takes a function returning the pair ``(lhs, rhs)``, the input patterns (as in
:func:`galinear.compile`) and a list of signatures. For each signature:

1. **Numeric falsification.** The function runs on ``trials`` random inputs with the numeric
   :class:`galinear.MultiVector`; a difference above ``1e-6`` (relative to the size of the two
   sides) marks the identity as suspect. This is a quick look only: the verdict is exact.
2. **Exact step**, in a child process stopped at ``timeout`` seconds (a clean "undecided", never a
   hang). ``lhs - rhs`` is traced with symbolic coefficients (:func:`galinear.symbolic.trace.trace`)
   and every coefficient expanded.

   - Every coefficient expands to 0: **proved**. Non-polynomial steps (an inverse's reciprocal,
     a square root, the :math:`G_m` functions of ``exp``) take part as opaque symbols at first, so
     cancelling with them is a proof for every value they can take.
   - Otherwise the traced program is evaluated exactly at small rational inputs (integers in
     -1..1, then -2..2, -3..3, then halves), step by step; a point where a coefficient is nonzero
     and no denominator vanishes (and no square root argument is negative) refutes the identity:
     **refuted**, with that counterexample and the nonzero blades. Their values are exact sympy
     numbers (Rationals for polynomial and rational identities; with ``sqrt`` or ``exp`` they hold
     square roots and ``cosh``/``cos`` of square roots, and are decided nonzero at 50 digits).
   - No counterexample: the non-polynomial steps are replaced by their closed forms (the
     reciprocal, ``sqrt``, ``Abs``, the derivatives of :math:`\cosh\sqrt\lambda`) over real
     symbols and simplified by sympy. All zero: **proved** (where every step is defined). sympy
     may fail to decide: **undecided**, as is an exact step that runs past ``timeout``.

:class:`ProofReport` prints as a table (``str(report)``) and holds one
:class:`SignatureResult` per signature.
"""
from __future__ import annotations

import inspect
import math
import sys
import threading
import time
from dataclasses import dataclass, field

__all__ = ["prove", "ProofReport", "SignatureResult", "all_signatures", "NUMERIC_TOLERANCE", "MAX_PROVE_N",
           "MAX_TIMEOUT"]

#: Largest relative difference the numeric pass takes for agreement.
NUMERIC_TOLERANCE = 1e-6
#: Largest n = p + q + r accepted (2**n coefficients per multivector; the trace's own limit).
MAX_PROVE_N = 8
#: Largest timeout in seconds (about 116 days; the operating system's timers refuse far larger ones).
MAX_TIMEOUT = 1e7
#: Values the counterexample search draws input coefficients from, in this order.
_POINT_SCHEDULE = ((1, 1, 8), (2, 1, 16), (3, 1, 24), (3, 2, 16))  # (largest |k|, denominator, points)


@dataclass
class SignatureResult:
    """The verdict in one signature.

    ``status`` is ``"proved"``, ``"refuted"`` or ``"undecided"``; ``holds`` is True, False or
    None accordingly. ``counterexample`` maps each input to ``{blade: Rational}`` (all the
    blades of its pattern) when refuted; ``nonzero`` maps the blades of ``lhs - rhs`` that are
    nonzero there to their exact values. ``numeric`` says what the numeric pass saw and ``note``
    why a case is undecided.
    """

    signature: tuple
    status: str
    counterexample: dict | None = None
    nonzero: dict = field(default_factory=dict)
    seconds: float = 0.0
    numeric: str = ""
    note: str = ""

    @property
    def holds(self):
        return {"proved": True, "refuted": False}.get(self.status)


@dataclass
class ProofReport:
    """Per-signature results of :func:`prove`; ``holds`` is True when every signature is proved,
    False when one is refuted and None otherwise."""

    identity: str
    results: list = field(default_factory=list)

    @property
    def holds(self):
        verdicts = [r.holds for r in self.results]
        if any(v is False for v in verdicts):
            return False
        return True if verdicts and all(verdicts) else None

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)

    def __iter__(self):
        return iter(self.results)

    def __len__(self):
        return len(self.results)

    def table(self) -> str:
        rows = [("signature", "n", "numeric", "result", "seconds")]
        for r in self.results:
            rows.append((",".join(map(str, r.signature)), str(sum(r.signature)), r.numeric, r.status,
                         f"{r.seconds:.2f}"))
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        lines = [f"identity: {self.identity}"]
        for i, row in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
            if i == 0:
                lines.append("  ".join("-" * w for w in widths))
        for r in self.results:
            if r.status == "refuted":
                lines.append(f"{','.join(map(str, r.signature))}: counterexample "
                             + "; ".join(f"{name} = {_format_mv(values)}"
                                         for name, values in r.counterexample.items()))
                lines.append(f"    lhs - rhs = {_format_mv(r.nonzero)}")
            elif r.note:
                lines.append(f"{','.join(map(str, r.signature))}: {r.note}")
        counts = {s: sum(r.status == s for r in self.results) for s in ("proved", "refuted", "undecided")}
        lines.append(", ".join(f"{v} {k}" for k, v in counts.items()) + f" of {len(self.results)} signatures")
        return "\n".join(lines)

    __str__ = table


def _format_mv(values: dict) -> str:
    """``{"e1": 1, "e23": -2}`` -> ``"e1 - 2*e23"`` (exact values as sympy prints them)."""
    terms = []
    for blade, value in values.items():
        if value == 0:
            continue
        text = str(value)
        if blade == "1":
            terms.append(text)
        elif text in ("1", "-1"):
            terms.append(text[:-1] + blade)
        elif any(c in text.lstrip("-") for c in "+- "):
            terms.append(f"({text})*{blade}")
        else:
            terms.append(f"{text}*{blade}")
    return " + ".join(terms).replace("+ -", "- ") if terms else "0"


# ---------------------------------------------------------------------------- arguments
def all_signatures(max_n: int) -> list[tuple[int, int, int]]:
    """Every (p, q, r) with 1 <= p + q + r <= max_n, by n then p, q."""
    return [(p, q, n - p - q) for n in range(1, max_n + 1) for p in range(n, -1, -1) for q in range(n - p, -1, -1)]


def _signatures(signatures, max_n) -> list[tuple[int, int, int]]:
    if isinstance(max_n, bool) or not isinstance(max_n, int) or not 1 <= max_n <= MAX_PROVE_N:
        raise ValueError(f"max_n must be an integer in 1..{MAX_PROVE_N}, got {max_n!r}")
    if isinstance(signatures, str):
        if signatures != "all":
            raise ValueError(f"signatures must be a list of (p, q, r), a galinear.Algebra or 'all', "
                             f"got {signatures!r}")
        return all_signatures(max_n)
    if hasattr(signatures, "signature") and hasattr(signatures, "metric"):
        signatures = [signatures]
    try:
        items = list(signatures)
    except TypeError:
        raise ValueError(f"signatures must be a list of (p, q, r), got {signatures!r}") from None
    if not items:
        raise ValueError("signatures is empty; give at least one (p, q, r)")
    out = []
    for item in items:
        if hasattr(item, "signature") and hasattr(item, "metric"):
            item = tuple(item.signature)
        try:
            p, q, r = item
        except (TypeError, ValueError):
            raise ValueError(f"a signature is (p, q, r), got {item!r}") from None
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (p, q, r)):
            raise ValueError(f"a signature holds three non-negative integers, got {item!r}")
        if not 1 <= p + q + r <= MAX_PROVE_N:
            raise ValueError(f"signature {item!r} has n = {p + q + r}; identities are proved for "
                             f"1 <= n <= {MAX_PROVE_N}")
        out.append((p, q, r))
    return out


def _parameter_names(func, inputs: dict) -> list[str]:
    if not isinstance(inputs, dict) or not inputs:
        raise ValueError("inputs must be a dict {parameter name: pattern}, e.g. {'a': 1, 'b': 1}")
    try:
        params = [p.name for p in inspect.signature(func).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = list(inputs)
    if sorted(params) != sorted(inputs):
        raise ValueError(f"inputs must name each parameter of the function once: parameters {params}, "
                         f"inputs {list(inputs)}")
    return params


def _pair(result):
    if not isinstance(result, tuple) or len(result) != 2:
        raise ValueError(f"the function must return a pair (lhs, rhs); it returned {type(result).__name__}")
    return result


# ---------------------------------------------------------------------------- numeric pass
def _numeric(func, names, inputs, signature, trials: int, seed: int) -> tuple[bool, str]:
    """(suspect, summary): the largest relative difference of the two sides on random inputs."""
    import numpy as np

    from galinear.compiler.verify import _result_values
    from galinear.core import Algebra
    from galinear.core.algebra import MultiVector
    from galinear.symbolic.trace import input_blades

    alg = Algebra(*signature)
    positions = {name: list(input_blades(alg.metric, inputs[name], name)) for name in names}
    rng = np.random.default_rng(seed)
    worst, rows, skipped = 0.0, 0, ""
    for _ in range(trials):
        args = []
        for name in names:
            values = np.zeros(alg.dim)
            values[positions[name]] = rng.standard_normal(len(positions[name]))
            args.append(MultiVector(alg, values))
        try:
            with np.errstate(all="ignore"):
                lhs, rhs = _pair(func(*args))
                a, b = _result_values(lhs, alg.dim), _result_values(rhs, alg.dim)
        except (ArithmeticError, NotImplementedError) as error:
            skipped = f"{type(error).__name__}: {error}"
            continue
        except ValueError as error:
            if "pair (lhs, rhs)" in str(error):
                raise
            skipped = f"{type(error).__name__}: {error}"
            continue
        if not (np.isfinite(a).all() and np.isfinite(b).all()):
            continue
        scale = max(1.0, float(np.max(np.abs(a))), float(np.max(np.abs(b))))
        worst = max(worst, float(np.max(np.abs(a - b))) / scale)
        rows += 1
    if not rows:
        return False, "skipped" + (f" ({skipped.splitlines()[0][:60]})" if skipped else "")
    if worst > NUMERIC_TOLERANCE:
        return True, f"differs ({worst:.1e})"
    return False, f"agrees ({rows} rows)"


# ---------------------------------------------------------------------------- exact step
def _gm_closed(m: int, lam):
    r""":math:`G_m(\lambda) = d^m/d\lambda^m \cosh\sqrt\lambda` as a sympy expression (exact at 0)."""
    import sympy as sp

    from galinear.symbolic.trace import Gm

    if lam == 0:
        return Gm(m, sp.S.Zero)
    d = sp.Dummy("lam")
    return sp.diff(sp.cosh(sp.sqrt(d)), d, m).xreplace({d: lam})


def _barrier_value(step, arg):
    """The value of a non-polynomial step at ``arg``; None outside its domain (exact numbers)."""
    import sympy as sp

    if step.kind == "recip":
        return None if arg == 0 else 1 / arg
    if step.kind == "sqrt":
        return None if (arg.is_negative or (arg.is_number and sp.N(arg, 30) < 0)) else sp.sqrt(arg)
    if step.kind == "abs":
        return sp.Abs(arg)
    return _gm_closed(step.order, arg)


def _is_nonzero(value) -> bool:
    import sympy as sp

    if value.is_Rational:
        return value != 0
    return abs(complex(sp.N(value, 50))) > 1e-30


def _points(symbols, seed: int, cheap: bool):
    import random

    import sympy as sp

    rng = random.Random(seed)
    for largest, den, count in _POINT_SCHEDULE:
        for _ in range(count if cheap else max(2, count // 8)):
            yield {s: sp.Rational(rng.randint(-largest * den, largest * den), den) for s in symbols}


def _evaluate(graph, point) -> dict | None:
    """Every step of the traced program at ``point`` (exactly); None outside the domain."""
    values = dict(point)
    for step in graph.steps:
        value = step.expr.xreplace(values)
        if step.kind != "let":
            value = _barrier_value(step, value)
            if value is None:
                return None
        values[step.symbol] = value
    return values


def _search(graph, seed: int):
    """(counterexample, nonzero) at the first rational point where lhs - rhs is nonzero, or None."""
    import sympy as sp

    symbols = [s for _, syms, _ in graph.inputs for s in syms]
    cheap = all(step.kind in ("let", "recip", "abs") for step in graph.steps)
    for point in _points(symbols, seed, cheap):
        values = _evaluate(graph, point)
        if values is None:
            continue
        found = {}
        for blade, expr in zip(graph.output_blades, graph.outputs):
            value = sp.sympify(expr).xreplace(values)
            if _is_nonzero(value):
                found[blade] = value
        if found:
            counterexample = {name: {b: point[s] for s, b in zip(syms, names)} for name, syms, names in graph.inputs}
            return counterexample, found
    return None


def _closed_forms(graph):
    """Each output coefficient with the lets expanded and every non-polynomial step replaced by
    its closed form, over real input symbols."""
    import sympy as sp

    from galinear.symbolic.trace import substitution_map

    full = substitution_map(graph)
    real = {s: sp.Symbol(s.name, real=True) for _, syms, _ in graph.inputs for s in syms}
    closed = {}
    for step in graph.steps:
        if step.kind == "let":
            continue
        arg = sp.expand(step.expr.xreplace(full).xreplace(closed).xreplace(real))
        closed[step.symbol] = {"recip": lambda a: 1 / a, "sqrt": sp.sqrt, "abs": sp.Abs}.get(
            step.kind, lambda a, m=step.order: _gm_closed(m, a))(arg)
    return [sp.sympify(c).xreplace(full).xreplace(real).xreplace(closed) for c in graph.outputs], full


def _simplifies_to_zero(expr) -> bool:
    import sympy as sp

    together = sp.cancel(sp.together(expr))
    if together == 0:
        return True
    rational = (not together.atoms(sp.Function) and not together.has(sp.Abs)
                and all(p.exp.is_Integer for p in together.atoms(sp.Pow)))
    if rational:  # a rational function that cancels to a nonzero one is not 0
        return False
    return sp.simplify(together) == 0


def _exact(func, names, metric, inputs: dict, seed: int) -> dict:
    """The exact verdict (runs in the child process)."""
    from galinear.symbolic.trace import trace

    def difference(*args):
        lhs, rhs = _pair(func(*args))
        return lhs - rhs

    difference.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in names])
    try:
        graph = trace(difference, metric, {n: inputs[n] for n in names}, "identity", max_terms=None, exact=True)
    except (ValueError, NotImplementedError, ArithmeticError) as error:
        return {"status": "undecided", "note": f"cannot be traced exactly: {error}"}
    if not graph.outputs:
        return {"status": "proved", "note": _domain_note(graph)}
    found = _search(graph, seed)
    if found is not None:
        counterexample, nonzero = found
        return {"status": "refuted", "counterexample": counterexample, "nonzero": nonzero}
    if all(step.kind == "let" for step in graph.steps):
        return {"status": "undecided", "note": "a coefficient of lhs - rhs is a nonzero polynomial, yet no "
                "small rational input makes it nonzero"}
    coefficients, _ = _closed_forms(graph)
    for blade, expr in zip(graph.output_blades, coefficients):
        if not _simplifies_to_zero(expr):
            return {"status": "undecided", "note": f"sympy does not reduce the {blade} coefficient of lhs - rhs "
                    "to 0, and no small rational input makes it nonzero"}
    return {"status": "proved", "note": _domain_note(graph)}


def _domain_note(graph) -> str:
    kinds = {step.kind for step in graph.steps}
    where = [what for kind, what in (("recip", "every denominator is nonzero"),
                                     ("sqrt", "every square root argument is >= 0")) if kind in kinds]
    return f"proved where {' and '.join(where)}" if where else ""


def _guarded(func, names, metric, inputs, seed) -> dict:
    """:func:`_exact`, with any failure reported as undecided (and why)."""
    try:
        return _exact(func, names, metric, inputs, seed)
    except Exception as error:  # noqa: BLE001 - reported to the caller as undecided
        return {"status": "undecided", "note": f"the exact step failed: {type(error).__name__}: {error}"}


def _child(conn, func, names, metric, inputs, seed):  # pragma: no cover - runs in the child
    try:
        conn.send(_guarded(func, names, metric, inputs, seed))
    finally:
        conn.close()


def _run_limited(func, names, metric, inputs, seed, timeout: float) -> dict:
    """:func:`_exact` in a forked child stopped after ``timeout`` seconds; in a daemon thread where
    the platform cannot fork (the stop is then a return, the thread is left to finish)."""
    import multiprocessing as mp

    stopped = {"status": "undecided", "note": f"the exact step did not finish within {timeout:g} s"}
    if "fork" not in mp.get_all_start_methods():
        box = {}
        worker = threading.Thread(target=lambda: box.setdefault("r", _guarded(func, names, metric, inputs, seed)),
                                  daemon=True)
        worker.start()
        worker.join(timeout)
        return box.get("r", stopped)
    import warnings

    ctx = mp.get_context("fork")
    receive, send = ctx.Pipe(duplex=False)
    with warnings.catch_warnings():
        # forking a process that has threads: the child runs only sympy, no thread it lacks
        warnings.simplefilter("ignore", DeprecationWarning)
        process = ctx.Process(target=_child, args=(send, func, names, metric, inputs, seed), daemon=True)
        process.start()
    send.close()
    try:
        if receive.poll(timeout):
            try:
                return receive.recv()
            except EOFError:
                process.join(5)
                return {"status": "undecided",
                        "note": f"the exact step ended without an answer (exit code {process.exitcode})"}
        return stopped
    finally:
        receive.close()
        if process.is_alive():
            process.kill()
        process.join(5)


# ---------------------------------------------------------------------------- prove
def prove(func, inputs: dict, signatures, *, timeout: float = 60.0, trials: int = 32, seed: int = 0,
          max_n: int = 4) -> ProofReport:
    """Prove or refute ``lhs == rhs`` in each signature (see the module notes).

    Parameters
    ----------
    func : callable
        A function of multivectors returning the pair ``(lhs, rhs)`` (either side may be a number).
        :func:`galinear.compiler.expression.parse_identity` makes one from ``"lhs == rhs"``.
    inputs : dict
        Parameter name -> pattern, as in :func:`galinear.compile`.
    signatures : list of (p, q, r), a galinear.Algebra, or "all"
        ``"all"``: every (p, q, r) with 1 <= p + q + r <= ``max_n``.
    timeout : float
        Seconds allowed to the exact step of each signature; past it the signature is undecided.
    trials : int
        Random rows of the numeric pass.
    seed : int
        Seeds the numeric pass and the counterexample search.
    max_n : int
        The bound of ``"all"`` (default 4, at most 8).

    Returns
    -------
    ProofReport
        ``.results`` (one :class:`SignatureResult` per signature), ``.holds``, ``str()`` a table.
    """
    if not callable(func):
        raise TypeError(f"func must be a function returning (lhs, rhs), got {type(func).__name__}")
    if (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout)
            or not 0 < timeout <= MAX_TIMEOUT):
        raise ValueError(f"timeout must be a number of seconds > 0 and at most {MAX_TIMEOUT:g}, got {timeout!r}")
    if isinstance(trials, bool) or not isinstance(trials, int) or not 1 <= trials <= 100000:
        raise ValueError(f"trials must be an integer in 1..100000, got {trials!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    signatures = _signatures(signatures, max_n)
    names = _parameter_names(func, inputs)
    from galinear.blades import metric_from_signature
    from galinear.symbolic.trace import input_blades

    for signature in signatures:  # every pattern fits every signature, checked before any work
        metric = metric_from_signature(*signature)
        for name in names:
            input_blades(metric, inputs[name], name)
    identity = getattr(func, "expression", None) or getattr(func, "__name__", "identity")
    report = ProofReport(identity)
    for signature in signatures:
        start = time.perf_counter()
        suspect, numeric = _numeric(func, names, inputs, signature, trials, seed)
        verdict = _run_limited(func, names, metric_from_signature(*signature), inputs, seed, float(timeout))
        note = verdict.get("note", "")
        if suspect and verdict["status"] != "refuted" and not note:
            note = "the numeric pass saw a difference (rounding in a long computation?)"
        report.results.append(SignatureResult(
            signature=signature, status=verdict["status"], counterexample=verdict.get("counterexample"),
            nonzero=verdict.get("nonzero", {}), seconds=time.perf_counter() - start, numeric=numeric, note=note))
    return report
