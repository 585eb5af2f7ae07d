r"""The one specification of the rotor maths every backend runs (sympy only).

Stated once here (formerly ``galinear.symbolic.rotor_spec``), printed by :func:`generate` into
``galinear/_generated/rotor_spec.py`` (``galinear codegen --all``), and read from there by numpy (:mod:`galinear.core.rotors`), numba
(:mod:`galinear.rotor_kernels.factors`) and torch (:mod:`galinear.nn.functional`). The proofs in
:mod:`galinear.proofs` check the generated numbers against the statements below.

Simple-rotor factor
    A factor pair (v, w) stands for the simple rotor
    :math:`R = \exp(v \wedge w) = \cos\theta + \operatorname{sinc}\theta\, v \wedge w
    = a + s\, v w` with :math:`\theta^2 = q = |v|^2 |w|^2 - (v\cdot w)^2`,
    :math:`s = \operatorname{sinc}\theta` and :math:`a = \cos\theta - s\,(v\cdot w)`
    (:math:`v \wedge w = v w - v\cdot w`). Backends compute q from (vv, ww, vw), never a square
    root near 0, so values and gradients are finite at :math:`\theta = 0`.
Series near 0
    :math:`\cos\theta = \sum_m (-q)^m/(2m)!`, :math:`\operatorname{sinc}\theta = \sum_m
    (-q)^m/(2m+1)!` and :math:`d\operatorname{sinc}/dq = \sum_{m\ge1} (-1)^m m\, q^{m-1}/(2m+1)!`,
    truncated to the per-dtype number of terms below :data:`SERIES` ``[dtype].switch`` (a bound on
    q) and replaced by the closed forms above it. Each series alternates with terms decreasing in
    size on [0, switch], so its truncation error is at most the first omitted term at q = switch;
    :func:`truncation_bound` states it and the proof checks it is below half an ulp of the
    smallest value of the function there.
Power decomposition contract
    Plane j starts from :math:`(1, \dots, 1) + e_{2j}` normalised unless a warm start is given;
    each step is :math:`v \leftarrow \mathrm{normalize}(A^2 v)`, at least one and at most
    :data:`POWER_MAX_ITER`; a row stops when :math:`|v_{new} + v| <` :data:`POWER_TOL` ``[dtype]``;
    then :math:`w = -A v`, the part is :math:`v \wedge w` and :math:`A \leftarrow A - (v \wedge w)`.
    The last plane is taken by :data:`POWER_LAST_PLANE_STEPS` (one) power step on the remainder
    (which has rank <= 2), so every part is exactly a wedge of two vectors. Scaling: the
    iteration runs on :math:`A / \max_{ij}|b_{ij}|` (no overflow or underflow of :math:`A^2 v`
    at any size of B); parts are scaled back. Restart: where :math:`|A^2 v|` falls to
    :math:`(\text{POWER\_VANISH}\,\epsilon)^2` or below (v orthogonal to the range of A) while
    A has a column longer than :math:`\text{POWER\_VANISH}\,\epsilon`, v restarts once from
    the longest column of A (which lies in its range; the restart counts as a step); otherwise
    the row stops and keeps v (a zero plane). Fallback: a caller that asks for the converged
    decomposition (``decompose_power(fallback=True)`` in numpy, the refresh pass of
    ``invariant_decomposition`` in torch) gets the planes of the eigen-decomposition for every
    row whose iteration met :data:`POWER_MAX_ITER` before the stop test (nearly equal angles
    converge slowly), so the factors give exp(B) there too.
Simplicity test
    A bivector counts as simple when :math:`|b \wedge b| \le` :data:`SIMPLE_RTOL` ``[dtype]``
    :math:`|b|^2`: about :math:`\sqrt\epsilon`, because parts split off a larger bivector carry
    rounding of order :math:`\epsilon |B| / |b|`, while a bivector that is not simple has
    :math:`|b \wedge b| / |b|^2` of order one.
Gadget chunk layout
    A rotor layer :math:`d_{in} \to d_{out}` works on chunks of :math:`c = 2^n` coordinates, by
    default the largest power of two no larger than both widths (:func:`chunk_layout`), with
    :math:`I = \lceil d_{in}/c\rceil` input and :math:`J = \lceil d_{out}/c\rceil` output chunks;
    chunk i of a width-d side covers the coordinates :math:`(\lfloor i d / \text{chunks}\rfloor + t)
    \bmod d`, t < c (:func:`chunk_starts`: evenly spread, overlapping or wrapping when c does not
    divide d); chunk pair p = j I + i maps input chunk i to output chunk j.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import sympy as sp

__all__ = [
    "SeriesSpec",
    "SERIES",
    "POWER_TOL",
    "POWER_MAX_ITER",
    "POWER_LAST_PLANE_STEPS",
    "POWER_VANISH",
    "SIMPLE_RTOL",
    "q",
    "series_terms",
    "exact_function",
    "truncation_bound",
    "factor_formula",
    "chunk_layout",
    "chunk_starts",
    "generate",
]

#: theta**2, the variable of every series.
q = sp.Symbol("q", nonnegative=True)

FUNCTIONS = ("cos", "sinc", "dsinc")


@dataclass(frozen=True)
class SeriesSpec:
    """Series below ``switch`` (a bound on q = theta**2) with ``terms`` terms per function."""

    switch: sp.Rational
    terms: int


#: Per dtype: where the series take over from the closed forms, and how many terms they keep.
SERIES = {
    "float32": SeriesSpec(sp.Rational(1, 100), 3),
    "float64": SeriesSpec(sp.Rational(1, 100), 5),
}

#: Stop tolerance of the power iteration on |v_new + v| (unit vectors), per dtype.
POWER_TOL = {"float32": sp.Rational(1, 10**5), "float64": sp.Rational(1, 10**10)}

#: Most power steps per plane (the stop test usually ends much earlier).
POWER_MAX_ITER = 100

#: The last plane of the power decomposition takes this many power steps (the remainder is simple).
POWER_LAST_PLANE_STEPS = 1

#: |A^2 v| <= (POWER_VANISH * eps)**2 of the scaled matrix counts as vanished (restart or stop).
POWER_VANISH = 64

#: |b ^ b| <= SIMPLE_RTOL[dtype] * |b|**2 counts as simple: sqrt(eps) rounded to a power of two.
SIMPLE_RTOL = {"float32": sp.Rational(1, 2**11), "float64": sp.Rational(1, 2**26)}

#: Unit roundoff 2**-(p) of each dtype (p = 24 or 53 significant bits).
UNIT_ROUNDOFF = {"float32": sp.Rational(1, 2**24), "float64": sp.Rational(1, 2**53)}


def series_terms(function: str, count: int) -> list[sp.Rational]:
    """The first ``count`` Taylor coefficients in q of ``cos``, ``sinc`` or ``dsinc`` (exact)."""
    if function == "cos":
        return [sp.Rational((-1) ** m, sp.factorial(2 * m)) for m in range(count)]
    if function == "sinc":
        return [sp.Rational((-1) ** m, sp.factorial(2 * m + 1)) for m in range(count)]
    if function == "dsinc":
        return [sp.Rational((-1) ** (m + 1) * (m + 1), sp.factorial(2 * m + 3)) for m in range(count)]
    raise ValueError(f"unknown series {function!r}; choose one of {', '.join(FUNCTIONS)}")


def exact_function(function: str) -> sp.Expr:
    """The function of q that the series of ``function`` approximates (q > 0)."""
    t = sp.sqrt(q)
    if function == "cos":
        return sp.cos(t)
    if function == "sinc":
        return sp.sin(t) / t
    if function == "dsinc":
        return sp.diff(sp.sin(t) / t, q)
    raise ValueError(f"unknown series {function!r}; choose one of {', '.join(FUNCTIONS)}")


def truncation_bound(function: str, dtype: str) -> sp.Rational:
    """|first omitted term| at q = switch: the truncation error bound of an alternating series."""
    spec = SERIES[dtype]
    return abs(series_terms(function, spec.terms + 1)[-1]) * spec.switch**spec.terms


def factor_formula():
    """Symbols (vv, ww, vw, c, s) and the expressions (q, a) of the simple-rotor factor."""
    vv, ww, vw, c, s = sp.symbols("vv ww vw cos_theta sinc_theta", real=True)
    return (vv, ww, vw, c, s), vv * ww - vw**2, c - s * vw


def _float(value) -> str:
    return repr(float(value))


def _tuple(values) -> str:
    items = [_float(v) for v in values]
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _table(values: dict) -> str:
    return "{" + ", ".join(f"{key!r}: {value}" for key, value in values.items()) + "}"


def chunk_layout(d_in, d_out, chunk=None):
    """(c, I, J): chunk size (the largest power of two <= both widths when None), input and output chunk counts."""
    if chunk is None:
        chunk = 1 << (min(d_in, d_out).bit_length() - 1)
    return chunk, -(-d_in // chunk), -(-d_out // chunk)


def chunk_starts(size, chunks):
    """First coordinate of each of ``chunks`` chunks of a width-``size`` side: floor(i size / chunks)."""
    return [i * size // chunks for i in range(chunks)]


#: Plain-Python functions of the specification, copied verbatim into the generated module.
LAYOUT_FUNCTIONS = (chunk_layout, chunk_starts)


def generate() -> str:
    """Source text of ``galinear/_generated/rotor_spec.py`` (deterministic, no imports)."""
    (vv, ww, vw, c, s), square, a = factor_formula()
    coefficient_tables = {
        function: _table({dtype: _tuple(series_terms(function, spec.terms)) for dtype, spec in SERIES.items()})
        for function in FUNCTIONS
    }
    bounds = {
        function: _table({dtype: _float(truncation_bound(function, dtype)) for dtype in SERIES})
        for function in FUNCTIONS
    }
    lines = [
        '"""Generated from galinear.symbolic.rotor_maths; do not edit by hand.',
        "",
        "Regenerate: galinear codegen --all (make codegen). Proved by galinear verify --only rotor_spec.",
        "Plain Python numbers and arithmetic only: numpy, numba and torch read the same values.",
        '"""',
        "",
        "#: q = theta**2 below which the series replace the closed forms, per dtype.",
        f"SERIES_SWITCH = {_table({d: _float(spec.switch) for d, spec in SERIES.items()})}",
        "",
        "#: Taylor coefficients in q (lowest first) of cos(theta), sinc(theta) = sin(theta)/theta and",
        "#: d sinc(theta)/dq, per dtype.",
        f"COS_SERIES = {coefficient_tables['cos']}",
        f"SINC_SERIES = {coefficient_tables['sinc']}",
        f"DSINC_SERIES = {coefficient_tables['dsinc']}",
        "",
        "#: Truncation error bounds of the series on [0, SERIES_SWITCH] (first omitted term).",
        f"COS_ERROR_BOUND = {bounds['cos']}",
        f"SINC_ERROR_BOUND = {bounds['sinc']}",
        f"DSINC_ERROR_BOUND = {bounds['dsinc']}",
        "",
        "#: Power iteration: stop tolerance on |v_new + v| per dtype, most steps per plane.",
        f"POWER_TOL = {_table({d: _float(t) for d, t in POWER_TOL.items()})}",
        f"POWER_MAX_ITER = {POWER_MAX_ITER}",
        "",
        "#: Power steps of the last plane (its remainder is simple), and the vanishing threshold",
        "#: (POWER_VANISH * eps)**2 of |A^2 v| on the matrix scaled by max|b| (restart or stop).",
        f"POWER_LAST_PLANE_STEPS = {POWER_LAST_PLANE_STEPS}",
        f"POWER_VANISH = {POWER_VANISH}",
        "",
        "#: |b ^ b| <= SIMPLE_RTOL[dtype] * |b|**2 counts as a simple bivector (about sqrt(eps)).",
        f"SIMPLE_RTOL = {_table({d: _float(t) for d, t in SIMPLE_RTOL.items()})}",
        "",
        "",
        "def horner(coefficients, x):",
        '    """sum_m coefficients[m] * x**m (floats, numpy arrays or torch tensors)."""',
        "    total = coefficients[-1]",
        "    for coefficient in coefficients[-2::-1]:",
        "        total = total * x + coefficient",
        "    return total",
        "",
        "",
        f"def wedge_square({vv}, {ww}, {vw}):",
        '    """theta**2 = |v ^ w|**2 from |v|**2, |w|**2 and v.w (may round below 0: clamp)."""',
        f"    return {sp.pycode(square)}",
        "",
        "",
        f"def factor_scalar({c}, {s}, {vw}):",
        '    """a of the factor R = a + s v w, s = sinc(theta), from cos(theta), sinc(theta) and v.w."""',
        f"    return {sp.pycode(a)}",
        "",
        "",
        "def power_start(n):",
        '    """Start vectors (k rows of n, not normalised): (1, ..., 1) + e_{2j} for plane j."""',
        "    return [[1.0 + (i == 2 * j) for i in range(n)] for j in range(n // 2)]",
        "",
    ]
    for function in LAYOUT_FUNCTIONS:
        lines += ["", inspect.getsource(function)]
    return "\n".join(lines).rstrip("\n") + "\n"
