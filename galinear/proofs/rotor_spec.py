"""The generated rotor specification (galinear/_generated/rotor_spec.py) states true maths.

What numpy, numba and torch run is read from that module; each link is proved against it:
  (1) its series coefficients are the nearest floats of the exact Taylor coefficients in
      q = theta^2 of cos(theta), sin(theta)/theta and d(sin(theta)/theta)/dq (sympy series);
  (2) the terms of each series alternate in sign and shrink on [0, switch] (the ratio of
      consecutive terms, a closed form in m, is below 1 there for every m), so the truncation
      error is at most the first omitted term at q = switch; the generated error bound is that
      number, and it is below half an ulp (unit roundoff) of the smallest value of the function
      on the interval (lower bounds from the same alternating series), per dtype;
  (3) its ``horner`` evaluates sum_m c_m x^m exactly (symbolic x);
  (4) its ``wedge_square`` and ``factor_scalar`` give, for symbolic vectors v, w of Cl(n) and
      symbols c, s: wedge_square(|v|^2, |w|^2, v.w) = |v ^ w|^2 and
      factor_scalar(c, s, v.w) + s v w = c + s (v ^ w); with c = cos|v^w|, s = sinc|v^w| the
      right side is galinear.symbolic.closed_forms.exp_simple(v ^ w) = exp(v ^ w)
      (proved by exp_simple_bivector);
  (5) the power method's last plane (contract of the spec): for a simple B = a ^ b and any x,
      v = (x _| B) _| B (one power step, unnormalised) gives v ^ (v _| B) = (v.v) B, so after
      normalising v the part v ^ w, w = v _| B, is all of the rank-2 remainder.
Links (3)-(5) are polynomial identities with symbolic operands for n <= SYMBOLIC_MAX and exact
rationals above.
"""
import random

import sympy as sp

from galinear._generated import rotor_spec as generated
from galinear.symbolic import vector
from galinear.symbolic import rotor_spec as spec
from galinear.symbolic.closed_forms import exp_simple
from galinear.symbolic.proof_scripts import random_rational, run_proof

IDENTITY = "rotor spec: series and bounds per dtype, a + s v w = exp(v ^ w), last plane (generated module)"
N_MIN = 2
N_DEFAULT = 6
SYMBOLIC_MAX = 3

_LOWER = {  # lower bounds of |f| on [0, switch] from the first two terms of the alternating series
    "cos": lambda x: 1 - x / 2,
    "sinc": lambda x: 1 - x / 6,
    "dsinc": lambda x: sp.Rational(1, 6) - x / 60,
}


def _prove_series(log):
    q = spec.q
    m = sp.Symbol("m", integer=True, nonnegative=True)
    term = {
        "cos": (-1) ** m / sp.factorial(2 * m),
        "sinc": (-1) ** m / sp.factorial(2 * m + 1),
        "dsinc": (-1) ** (m + 1) * (m + 1) / sp.factorial(2 * m + 3),
    }
    for function in spec.FUNCTIONS:
        name = function.upper()
        ratio = sp.combsimp(term[function].subs(m, m + 1) / term[function])
        for dtype, series in spec.SERIES.items():
            exact = spec.series_terms(function, series.terms + 1)
            taylor = sp.series(spec.exact_function(function), q, 0, series.terms + 1).removeO()
            log.check(f"{function} {dtype}: spec coefficients = Taylor coefficients of the function",
                      [sp.expand(taylor).coeff(q, k) - exact[k] for k in range(series.terms + 1)])
            shipped = getattr(generated, f"{name}_SERIES")[dtype]
            log.record(f"{function} {dtype}: generated coefficients are the nearest floats ({len(shipped)} terms)",
                       len(shipped) == series.terms and all(float(e) == g for e, g in zip(exact, shipped)))
            switch = series.switch
            log.record(f"{function} {dtype}: generated switch point = {switch}",
                       generated.SERIES_SWITCH[dtype] == float(switch))
            # alternating: ratio(m) = -1/P(m) with P a polynomial of positive coefficients, so
            # |ratio(m)| <= |ratio(0)| for m >= 0 and the terms shrink on [0, switch] when |ratio(0)| switch < 1
            denominator = sp.Poly(sp.expand(-1 / ratio), m)
            worst = -ratio.subs(m, 0) * switch
            log.record(f"{function} {dtype}: ratio of terms -1/({denominator.as_expr()}), "
                       f"|ratio| switch <= {worst} < 1 for m >= 0",
                       all(coefficient > 0 for coefficient in denominator.all_coeffs()) and worst < 1)
            bound = spec.truncation_bound(function, dtype)
            log.record(f"{function} {dtype}: generated bound = first omitted term at switch = {float(bound):.3g}",
                       getattr(generated, f"{name}_ERROR_BOUND")[dtype] == float(bound)
                       and bound == sp.Abs(exact[-1]) * switch**series.terms)
            smallest = _LOWER[function](switch)
            log.record(f"{function} {dtype}: bound < unit roundoff x min |f| = {float(spec.UNIT_ROUNDOFF[dtype] * smallest):.3g}",
                       bool(bound < spec.UNIT_ROUNDOFF[dtype] * smallest))
    x = sp.Symbol("x")
    coefficients = sp.symbols("c0:5")
    log.check("horner(c, x) = sum_m c_m x^m", generated.horner(coefficients, x) - sum(c * x**k for k, c in enumerate(coefficients)),
              sp.expand)
    power = [[1.0 + (i == 2 * j) for i in range(6)] for j in range(3)]
    log.record("power_start(6) = (1, ..., 1) + e_{2j}", generated.power_start(6) == power)
    log.record("generated POWER_TOL and POWER_MAX_ITER = spec",
               generated.POWER_TOL == {d: float(t) for d, t in spec.POWER_TOL.items()}
               and generated.POWER_MAX_ITER == spec.POWER_MAX_ITER)


def _vectors(n, names):
    if n <= SYMBOLIC_MAX:
        return "symbolic", [vector(n, name) for name in names]
    return "rational", [vector(n, [random_rational() for _ in range(n)]) for _ in names]


def prove(n_max, log):
    _prove_series(log)
    c, s = sp.symbols("c s", real=True)
    for n in range(N_MIN, n_max + 1):
        kind, (v, w) = _vectors(n, "vw")
        b = v.op(w)
        vv, ww, vw = ((x * y).grade(0) for x, y in ((v, v), (w, w), (v, w)))
        log.check(f"n={n}: wedge_square(|v|^2, |w|^2, v.w) = |v ^ w|^2 [{kind}]",
                  generated.wedge_square(vv, ww, vw) - b.norm_squared(), sp.expand)
        log.check(f"n={n}: factor_scalar(c, s, v.w) + s v w = c + s (v ^ w) [{kind}]",
                  generated.factor_scalar(c, s, vw) + s * (v * w) - (c + s * b), sp.expand)
        theta = sp.sqrt(b.norm_squared())
        factor = generated.factor_scalar(sp.cos(theta), sp.sinc(theta), vw) + sp.sinc(theta) * (v * w)
        log.check(f"n={n}: a + s v w (a, s at theta = |v ^ w|) = exp_simple(v ^ w) [{kind}]",
                  factor - exp_simple(b), sp.expand)
        kind, (a, a2, x) = _vectors(n, ("a", "b", "x"))
        B = a.op(a2)
        step = x.lc(B).lc(B)
        log.check(f"n={n}: v = (x _| B) _| B gives v ^ (v _| B) = (v.v) B for simple B [{kind}]",
                  step.op(step.lc(B)) - (step * step).grade(0) * B, sp.expand)


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
