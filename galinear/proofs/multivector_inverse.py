"""Closed-form inverses of general multivectors (Hitzer and Sangwine 2017) in every signature.

For a multivector x of Cl(p, q, r), n <= 5, galinear's inverse is x^-1 = N(x) / (x N(x)) with
  n <= 2: N = conj(x);  n = 3: N = conj(x) invol(x) rev(x);
  n = 4:  N = conj(x) m34(x conj(x));  n = 5: N = t m14(x t), t = conj(x) invol(x) rev(x),
m_ij negating grades i and j. The formula is right exactly when, for every x,
  (1) x N(x) is a scalar (all other grades vanish identically), and
  (2) N(x) x = x N(x) (so N/(x N) is a left and a right inverse).
Both are polynomial identities in the coefficients of x; expanding decides them. They are
checked on galinear.symbolic.MultiVector.inverse_numerator, the formula the numeric core's
galinear.core.inverses.inverse evaluates too. Symbolic for every metric in {+1, -1, 0}^n with
n <= 2 and for the metrics of SYMBOLIC_METRICS at n = 3 and 4 (about 2.5 s per metric at n = 4);
exact random rationals for more metrics at n >= 3 and for n = 5 (degree-8 polynomials in 32
symbols are too large to expand).
"""
from itertools import product

import sympy as sp

from galinear.symbolic import symbols
from galinear.symbolic.proof_scripts import rational_multivector, run_proof

IDENTITY = "closed-form multivector inverse: x N(x) scalar, N(x) x = x N(x) (n <= 5, all signatures)"
N_MIN = 1
N_DEFAULT = 4
SYMBOLIC_METRICS = {
    3: [(1, 1, 1), (1, 1, -1), (1, -1, -1), (0, 1, 1), (0, 0, 1)],
    4: [(1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1)],
}
RATIONAL_METRICS = {
    3: [(-1, -1, -1), (0, 0, 0)],
    4: [(1, 1, 1, 1), (1, 1, 1, -1), (0, 1, 1, 1), (1, 1, -1, -1), (0, 0, 1, -1)],
    5: [(1, 1, 1, 1, 1), (1, 1, 1, 1, -1), (0, 1, 1, 1, 1), (1, 1, 1, -1, -1), (0, 0, 1, 1, -1)],
}
RATIONAL_SAMPLES = 3


def _check(log, label, x):
    N = x.inverse_numerator()
    xN = x * N
    log.check(f"{label}: x N(x) has no grade above 0", [c for c in xN.coefficients[1:]], sp.expand)
    log.check(f"{label}: N(x) x = x N(x)", N * x - xN, sp.expand)


def prove(n_max, log):
    for n in range(N_MIN, min(n_max, 5) + 1):
        if n <= 2:
            for metric in product((1, -1, 0), repeat=n):
                _check(log, f"n={n} metric {metric} [symbolic]", symbols(metric, "x"))
        elif n in SYMBOLIC_METRICS:
            for metric in SYMBOLIC_METRICS[n]:
                _check(log, f"n={n} metric {metric} [symbolic]", symbols(metric, "x"))
        if n >= 3:
            log.note(f"n={n}: exact rational checks ({RATIONAL_SAMPLES} random x per metric)")
            for metric in RATIONAL_METRICS[n]:
                for _ in range(RATIONAL_SAMPLES):
                    _check(log, f"n={n} metric {metric} [rational]", rational_multivector(metric))
    if n_max > 5:
        log.note("n > 5: no closed form; inv() solves the left-multiplication matrix instead")


if __name__ == "__main__":
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
