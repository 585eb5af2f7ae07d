"""Rotor normalisation: R R~ = 1 for R = exp(b), b simple, and for products of such rotors.

For b = v ^ w (symbolic vectors) and symbolic scalars c, s:
  (1) (c + s b)(c + s b)~ = c^2 + s^2 |b|^2, a scalar           [polynomial identity];
  (2) with c = cos|b|, s = sinc|b|: c^2 + s^2 |b|^2 = cos^2 + sin^2 = 1, so exp(b) exp(b)~ = 1,
      checked on galinear.symbolic.closed_forms.exp_simple itself;
  (3) products: (R1 R2)(R1 R2)~ = (R1 R1~)(R2 R2~) for scaled simple rotors R1, R2 (polynomial
      identity; symbolic for n <= PRODUCT_SYMBOLIC_MAX, exact rationals above); hence a product of
      unit rotors is a unit rotor (induction on the number of factors);
  (4) normalize_rotor(c + b) has R R~ = 1 exactly.
"""
import random

import sympy as sp

from galinear.symbolic import vector
from galinear.symbolic.closed_forms import exp_simple, normalize_rotor
from galinear.symbolic.proof_scripts import random_rational, run_proof

IDENTITY = "rotor normalisation R R~ = 1 (exp of simple b, products, normalize_rotor)"
N_MIN = 2
N_DEFAULT = 6
PRODUCT_SYMBOLIC_MAX = 4


def rational_vector(n):
    return vector(n, [random_rational() for _ in range(n)])


def prove(n_max, log):
    c, s = sp.symbols("c s", real=True)
    for n in range(N_MIN, n_max + 1):
        b = vector(n, "v").op(vector(n, "w"))
        theta2 = b.norm_squared()
        R = c + s * b
        log.check(f"n={n}: (c + s b)(c + s b)~ = c^2 + s^2 |b|^2", R * R.reverse() - (c**2 + s**2 * theta2), sp.expand)
        # exp_simple(b) = cos(sqrt(q)) + sinc(sqrt(q)) b with q = |b|^2; name theta = sqrt(q)
        th = sp.Symbol("theta", positive=True)
        E = exp_simple(b).applyfunc(lambda x: x.subs(sp.sqrt(theta2), th))
        scalar = sp.cos(th) ** 2 + sp.sinc(th) ** 2 * theta2
        log.check(f"n={n}: exp_simple(b) exp_simple(b)~ = cos^2 + sinc^2 |b|^2 (theta = |b|)", E * E.reverse() - scalar, sp.expand)
        unit = sp.cos(th) ** 2 + (sp.sin(th) / th) ** 2 * th**2 - 1
        log.check(f"n={n}: ... = cos^2 theta + sin^2 theta = 1 (theta > 0; theta = 0 gives 1 + 0)", unit)
        if n <= PRODUCT_SYMBOLIC_MAX:
            b2 = vector(n, "x").op(vector(n, "y"))
            c2, s2 = sp.symbols("c2 s2", real=True)
            kind = "symbolic"
        else:
            b, b2 = (rational_vector(n).op(rational_vector(n)) for _ in range(2))
            c, s, c2, s2 = (random_rational() for _ in range(4))
            kind = "rational"
        R1, R2 = c + s * b, c2 + s2 * b2
        lhs = (R1 * R2) * (R1 * R2).reverse()
        rhs = (R1 * R1.reverse()).grade(0) * (R2 * R2.reverse()).grade(0)
        log.check(f"n={n}: (R1 R2)(R1 R2)~ = (R1 R1~)(R2 R2~) [{kind}]", lhs - rhs, sp.expand)
        c, s = sp.symbols("c s", real=True)
        cp = sp.Symbol("c", positive=True)
        Rn = normalize_rotor(cp + vector(n, "v").op(vector(n, "w")))
        log.check(f"n={n}: normalize_rotor(c + b) (...)~ = 1", (Rn * Rn.reverse() - 1).applyfunc(sp.cancel))


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
