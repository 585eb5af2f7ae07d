"""Product rules of galinear.symbolic agree with the axioms of a Clifford algebra.

Identities, for symbolic multivectors a, b, c of Cl(n):
  (1) generators: e_i e_j + e_j e_i = 2 m_i delta_ij, for every metric m in {+1, -1, 0}^n;
  (2) associativity (a b) c = a (b c);
  (3) reversion is an anti-automorphism: (a b)~ = b~ a~;
  (4) for vectors u, v: u v = u _| v + u ^ v, and u _| v = v |_ u = <u v>_0;
  (5) the outer product is associative: (a ^ b) ^ c = a ^ (b ^ c).
All are polynomial identities in the coefficients; expanding to the canonical polynomial
form and comparing with 0 decides them exactly. Symbolic for n <= SYMBOLIC_MAX; above that
(the polynomials grow as 8**n) the script says so and checks exactly with random rationals.
"""
from itertools import product

import sympy as sp

from galinear.symbolic import MultiVector, basis, symbols, vector
from galinear.symbolic.proof_scripts import rational_multivector, run_proof

IDENTITY = "Clifford axioms: generators, associativity, reversion, u v = u_|v + u^v"
N_MIN = 1
N_DEFAULT = 5
SYMBOLIC_MAX = 4


def prove(n_max, log):
    for n in range(N_MIN, n_max + 1):
        if n <= 3:
            ok = True
            for metric in product((1, -1, 0), repeat=n):
                e = basis(metric)[1 : n + 1]
                for i in range(n):
                    for j in range(n):
                        lhs = e[i] * e[j] + e[j] * e[i]
                        rhs = MultiVector(metric, [2 * metric[i] if i == j else 0] + [0] * ((1 << n) - 1))
                        ok &= (lhs - rhs).is_zero(sp.expand)
            log.record(f"n={n}: e_i e_j + e_j e_i = 2 m_i delta_ij for all {3 ** n} metrics", ok)
        else:
            e = basis(n)[1 : n + 1]
            ok = all(
                (e[i] * e[j] + e[j] * e[i] - (2 if i == j else 0)).is_zero(sp.expand)
                for i in range(n) for j in range(n)
            )
            log.record(f"n={n}: e_i e_j + e_j e_i = 2 delta_ij (Euclidean)", ok)
        if n <= SYMBOLIC_MAX:
            a, b, c = symbols(n, "a"), symbols(n, "b"), symbols(n, "c")
            kind = "symbolic"
        else:
            log.note(f"n={n}: symbolic expansion too large (8**n terms); exact rational check instead")
            a, b, c = (rational_multivector(n) for _ in range(3))
            kind = "rational"
        log.check(f"n={n}: (a b) c = a (b c) [{kind}]", (a * b) * c - a * (b * c), sp.expand)
        log.check(f"n={n}: (a b)~ = b~ a~ [{kind}]", (a * b).reverse() - b.reverse() * a.reverse(), sp.expand)
        log.check(f"n={n}: (a ^ b) ^ c = a ^ (b ^ c) [{kind}]", a.op(b).op(c) - a.op(b.op(c)), sp.expand)
        u, v = vector(n, "u"), vector(n, "v")
        log.check(f"n={n}: u v = u _| v + u ^ v [symbolic]", u * v - (u.lc(v) + u.op(v)), sp.expand)
        log.check(
            f"n={n}: u _| v = v |_ u = <u v>_0 [symbolic]",
            [u.lc(v) - v.rc(u), u.lc(v) - (u * v).grade(0)],
            sp.expand,
        )


if __name__ == "__main__":
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
