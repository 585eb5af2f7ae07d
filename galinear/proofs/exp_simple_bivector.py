"""exp of a simple bivector: the power series equals cos|b| + (sin|b|/|b|) b, also at b = 0.

Proof, for b = v ^ w (every simple bivector has this form) with symbolic vectors v, w of Cl(n):
  (1) b is a pure bivector and b^2 = -|b|^2, a scalar, with |b|^2 = <b b~>_0
      = |v|^2 |w|^2 - (v.w)^2 (Lagrange's identity)            [polynomial identities];
  (2) hence, by induction with associativity, b^(2m) = (-|b|^2)^m and b^(2m+1) = (-|b|^2)^m b,
      so with theta = |b|:
      sum_m b^m/m! = sum_m (-theta^2)^m/(2m)! + [sum_m (-theta^2)^m/(2m+1)!] b;
  (3) the two scalar series sum to cos(theta) and sin(theta)/theta (sympy summation);
  (4) at b = 0 the series is 1 and sinc(0) = 1, cos(0) = 1; the limits as b -> 0 along any ray
      agree (limit of sin(t)/t is 1), so the closed form is continuous there;
  (5) galinear.symbolic.closed_forms.exp_simple implements exactly cos(theta) + sinc(theta) b;
  (6) spot check of (2): the truncated series sum_{m<=M} b^m/m! equals the truncated closed form
      as a polynomial (symbolic for n <= TRUNCATION_SYMBOLIC_MAX, exact rationals above).
"""
import random

import sympy as sp

from galinear.symbolic import vector
from galinear.symbolic.closed_forms import exp_series, exp_simple
from galinear.symbolic.proof_scripts import random_rational, run_proof

IDENTITY = "exp(b) = cos|b| + sinc|b| b for simple b (series, limit b -> 0)"
N_MIN = 2
N_DEFAULT = 6
TRUNCATION_ORDER = 7
TRUNCATION_SYMBOLIC_MAX = 3


def truncated_closed_form(b, theta2, order):
    even = sum((-theta2) ** m / sp.factorial(2 * m) for m in range(order // 2 + 1))
    odd = sum((-theta2) ** m / sp.factorial(2 * m + 1) for m in range((order - 1) // 2 + 1))
    return even + odd * b


def prove(n_max, log):
    t = sp.Symbol("theta", positive=True)
    m = sp.Symbol("m", integer=True, nonnegative=True)
    even = sp.summation((-(t**2)) ** m / sp.factorial(2 * m), (m, 0, sp.oo))
    odd = sp.summation((-(t**2)) ** m / sp.factorial(2 * m + 1), (m, 0, sp.oo))
    log.check("sum_m (-t^2)^m/(2m)! = cos t", even - sp.cos(t))
    log.check("sum_m (-t^2)^m/(2m+1)! = sin(t)/t", odd - sp.sin(t) / t)
    x = sp.Symbol("x", real=True)
    log.check("lim_{t->0} sin(t)/t = 1 and sinc(0) = 1", [sp.limit(sp.sin(x) / x, x, 0) - 1, sp.sinc(0) - 1])
    log.check("d/dt sinc(t) -> 0 as t -> 0 (closed form smooth at b = 0)", sp.limit(sp.diff(sp.sin(x) / x, x), x, 0))
    for n in range(N_MIN, n_max + 1):
        v, w = vector(n, "v"), vector(n, "w")
        b = v.op(w)
        theta2 = b.norm_squared()
        log.check(f"n={n}: v ^ w is a pure bivector", b - b.grade_part(2), sp.expand)
        log.check(f"n={n}: b^2 = -|b|^2 (a scalar)", b * b + theta2, sp.expand)
        vv, ww, vw = (v * v).grade(0), (w * w).grade(0), (v * w).grade(0)
        log.check(f"n={n}: |b|^2 = |v|^2 |w|^2 - (v.w)^2", theta2 - (vv * ww - vw**2), sp.expand)
        closed = exp_simple(b)
        theta = sp.sqrt(theta2)
        log.check(
            f"n={n}: exp_simple(b) = cos|b| + sinc|b| b",
            closed - (sp.cos(theta) + sp.sinc(theta) * b),
        )
        log.check(f"n={n}: exp_simple(0) = 1", exp_simple(0 * b) - 1)
        if n <= TRUNCATION_SYMBOLIC_MAX:
            kind, bb = "symbolic", b
        else:
            kind = "rational"
            rv = vector(n, [random_rational() for _ in range(n)])
            rw = vector(n, [random_rational() for _ in range(n)])
            bb = rv.op(rw)
        series = exp_series(bb, TRUNCATION_ORDER)
        log.check(
            f"n={n}: sum_(m<={TRUNCATION_ORDER}) b^m/m! = truncated closed form [{kind}]",
            series - truncated_closed_form(bb, bb.norm_squared(), TRUNCATION_ORDER),
            sp.expand,
        )
    eps = sp.Symbol("epsilon", positive=True)
    b2 = vector(2, [1, 0]).op(vector(2, [0, 1]))
    # for eps > 0, sinc(eps) = sin(eps)/eps, so the limit is taken on that form
    ray = exp_simple(eps * b2).applyfunc(
        lambda c: sp.limit(c.replace(sp.sinc, lambda z: sp.sin(z) / z), eps, 0)
    )
    log.check("lim_{eps->0} exp_simple(eps b) = 1 = exp_simple(0) (Cl(2), b = e12)", ray - 1)


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
