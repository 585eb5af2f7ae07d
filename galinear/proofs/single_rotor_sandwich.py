"""The single-rotor sandwich x -> R x R~ preserves every grade and is orthogonal.

R = c + v ^ w: a scaled simple rotor with symbolic c, v, w (R R~ = rho = c^2 + |v ^ w|^2;
rho = 1 for a unit rotor). For each grade g and symbolic grade-g elements x, z:
  (1) R x R~ has no part of grade != g                               [polynomial identity];
  (2) <(R x R~)(R z R~)~>_0 = rho^2 <x z~>_0                           [polynomial identity];
  (3) in Euclidean Cl(n), <x z~>_0 = sum_i x_i z_i (the coefficient dot product),
so for a unit rotor the map is block-diagonal by grade and each block is orthogonal. Symbolic
for n <= SYMBOLIC_MAX; above that (polynomials of degree 2g+4 in up to 2 C(n,g) + 2n + 1
symbols) exact rationals: the 2**n x 2**n matrix M of the map satisfies M^T M = rho^2 I and
M[i, j] = 0 whenever grade(i) != grade(j). Products of simple rotors inherit both properties.
"""
import random

import sympy as sp

from galinear import blades
from galinear.symbolic import symbols, vector
from galinear.symbolic.closed_forms import sandwich, sandwich_matrix
from galinear.symbolic.proof_scripts import random_rational, run_proof

IDENTITY = "single-rotor sandwich R x R~ preserves grades and is orthogonal"
N_MIN = 1
N_DEFAULT = 6
SYMBOLIC_MAX = 4


def prove(n_max, log):
    c = sp.Symbol("c", real=True)
    for n in range(N_MIN, n_max + 1):
        grades = blades.blade_grades(n).tolist()
        if n <= SYMBOLIC_MAX:
            b = vector(n, "v").op(vector(n, "w")) if n >= 2 else vector(n, "v").op(vector(n, "v"))
            R = c + b
            rho = sp.expand((R * R.reverse()).grade(0))
            ok_grade, ok_orth = True, True
            for g in range(n + 1):
                x = symbols(n, "x", grades=(g,))
                z = symbols(n, "z", grades=(g,))
                y = sandwich(R, x)
                ok_grade &= (y - y.grade_part(g)).is_zero(sp.expand)
                lhs = (y * sandwich(R, z).reverse()).grade(0)
                ok_orth &= sp.expand(lhs - rho**2 * (x * z.reverse()).grade(0)) == 0
            log.record(f"n={n}: R x R~ keeps the grade of x, every grade [symbolic]", ok_grade)
            log.record(f"n={n}: <(R x R~)(R z R~)~>_0 = (R R~)^2 <x z~>_0 [symbolic]", ok_orth)
            x, z = symbols(n, "x"), symbols(n, "z")
            log.check(f"n={n}: <x z~>_0 = sum_i x_i z_i", (x * z.reverse()).grade(0) - sum(a * b for a, b in zip(x.coefficients, z.coefficients)), sp.expand)
        else:
            log.note(f"n={n}: symbolic form too large; exact rational matrix check")
            R = random_rational() + vector(n, [random_rational() for _ in range(n)]).op(
                vector(n, [random_rational() for _ in range(n)])
            )
            rho = (R * R.reverse()).grade(0)
            M = sandwich_matrix(R)
            block = all(M[i, j] == 0 for i in range(1 << n) for j in range(1 << n) if grades[i] != grades[j])
            log.record(f"n={n}: M[i, j] = 0 across grades [rational]", block)
            log.check(f"n={n}: M^T M = (R R~)^2 I [rational]", M.T * M - rho**2 * sp.eye(1 << n), sp.expand)


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
