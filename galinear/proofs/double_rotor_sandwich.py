"""The double-rotor sandwich x -> R x S~ preserves parity and is orthogonal (not grade).

R = c1 + v1 ^ w1 and S = c2 + v2 ^ w2, scaled simple rotors with symbolic entries
(R R~ = rho_R, S S~ = rho_S; both 1 for unit rotors). For symbolic x, z:
  (1) x even => R x S~ even; x odd => R x S~ odd                        [polynomial identity];
  (2) <(R x S~)(R z S~)~>_0 = rho_R rho_S <x z~>_0                      [polynomial identity],
      (proof idea: <R x S~ S z~ R~>_0 = rho_S <R x z~ R~>_0 = rho_R rho_S <x z~>_0);
so for unit rotors the map is orthogonal with two blocks of size 2**(n-1). It does not preserve
grade in general: R = 1 + e12, S = 1 maps 1 to 1 + e12 (checked). Symbolic for
n <= SYMBOLIC_MAX, exact rational matrices (parity blocks, M^T M = rho_R rho_S I) above.
"""
import random

import sympy as sp

from galinear import blades
from galinear.symbolic import blade, symbols, vector
from galinear.symbolic.closed_forms import sandwich, sandwich_matrix
from galinear.symbolic.proof_scripts import random_rational, run_proof

IDENTITY = "double-rotor sandwich R x S~ preserves parity and is orthogonal"
N_MIN = 1
N_DEFAULT = 6
SYMBOLIC_MAX = 3


def simple_rotor(n, c, v, w):
    if n == 1:
        return c + vector(n, v).op(vector(n, v))  # Cl(1) has no bivectors: R = c
    return c + vector(n, v).op(vector(n, w))


def rational_rotor(n):
    vals = lambda: [random_rational() for _ in range(n)]  # noqa: E731
    return random_rational() + vector(n, vals()).op(vector(n, vals()))


def prove(n_max, log):
    c1, c2 = sp.symbols("c1 c2", real=True)
    for n in range(N_MIN, n_max + 1):
        grades = blades.blade_grades(n).tolist()
        if n <= SYMBOLIC_MAX:
            R, S = simple_rotor(n, c1, "v", "w"), simple_rotor(n, c2, "p", "q")
            rho = (R * R.reverse()).grade(0) * (S * S.reverse()).grade(0)
            ok = True
            for parity in (0, 1):
                kept = tuple(g for g in range(n + 1) if g % 2 == parity)
                y = sandwich(R, symbols(n, "x", grades=kept), S)
                ok &= all(sp.expand(cf) == 0 for cf, g in zip(y.coefficients, grades) if g % 2 != parity)
            log.record(f"n={n}: R x S~ keeps the parity of x [symbolic]", ok)
            x, z = symbols(n, "x"), symbols(n, "z")
            lhs = (sandwich(R, x, S) * sandwich(R, z, S).reverse()).grade(0)
            log.check(f"n={n}: <(R x S~)(R z S~)~>_0 = rho_R rho_S <x z~>_0 [symbolic]", lhs - rho * (x * z.reverse()).grade(0), sp.expand)
        else:
            log.note(f"n={n}: symbolic form too large; exact rational matrix check")
            R, S = rational_rotor(n), rational_rotor(n)
            rho = (R * R.reverse()).grade(0) * (S * S.reverse()).grade(0)
            M = sandwich_matrix(R, S)
            block = all(M[i, j] == 0 for i in range(1 << n) for j in range(1 << n) if (grades[i] - grades[j]) % 2)
            log.record(f"n={n}: M[i, j] = 0 across parities [rational]", block)
            log.check(f"n={n}: M^T M = rho_R rho_S I [rational]", M.T * M - rho * sp.eye(1 << n), sp.expand)
    if n_max >= 2:
        y = sandwich(1 + blade(2, "e12"), blade(2, "1"), blade(2, "1"))
        log.check("counterexample: (1 + e12) 1 1~ = 1 + e12 (grade 0 -> grades 0 and 2)", y - (1 + blade(2, "e12")), sp.expand)


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
