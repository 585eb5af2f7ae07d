"""The exact gradient of a rotor map is the derivative of the exponential (galinear.nn.dexp).

For y = exp(B) x exp(C)~ and a loss with dL/dy = G, galinear.nn.dexp computes

    dL/dB = phi(ad_B)(<G y~>_2),   dL/dC = -phi(ad_C)(<y~ G>_2),   phi(z) = (1 - e^-z)/z,

with ad_B H = BH - HB, applied through the eigenvalues of the skew matrix A of B. The chain,
each link proved exactly here:
  (1) dexp: the t-coefficient of exp(B + tH) equals psi(ad_B)(H) exp(B), psi(z) = (e^z - 1)/z,
      as formal power series in non-commuting B, H (every total degree <= SERIES_DEGREE;
      the identity holds in any associative algebra);
  (2) trace identities: <G, K y> = <<G y~>_2, K> and <G, y K> = <<y~ G>_2, K> for every bivector
      K and multivectors G, y (<,> the coefficient inner product of Euclidean Cl(n)); with
      dy = K y (K = psi(ad_B) H) for B and dy = -y K (K = psi(ad_C) H) for C;
  (3) ad_B is skew-adjoint on bivectors: <ad_B P, H> = -<P, ad_B H>, so psi(ad_B)^T =
      psi(-ad_B) = phi(ad_B), which gives the two formulas above;
  (4) the matrix form used by the code: the skew matrix of BH - HB is 2 (A_B A_H - A_H A_B);
      so ad_B scales entry (a, b) of the eigenbasis form by 2 (lambda_a - lambda_b);
  (5) phi(iy) = sinc(y) - i (1 - cos y)/y with (1 - cos y)/y = sin(y/2) sinc(y/2), which is the
      formula the code evaluates (finite at y = 0, where phi = 1): no divided difference;
  (6) the tables of galinear.blades.bivector_part_tables (used by the code for <G y~>_2 and
      <y~ G>_2) equal the symbolic products.
Links (2)-(4) and (6) are polynomial identities, checked with fully symbolic operands for
every n in the range.
"""
import sympy as sp

from galinear.blades import bivector_part_tables, bivector_pairs
from galinear.symbolic import MultiVector
from galinear.symbolic.multivector import symbols
from galinear.symbolic.proof_scripts import run_proof

IDENTITY = "rotor-map gradient = phi(ad_B) <G y~>_2 (exact derivative of exp)"
N_MIN = 2
N_DEFAULT = 4
SERIES_DEGREE = 7


def inner(a: MultiVector, b: MultiVector):
    """Coefficient inner product (Euclidean Cl(n): equals the scalar product <a b~>_0)."""
    return sum(x * y for x, y in zip(a.coefficients, b.coefficients))


def skew_matrix(b: MultiVector, n: int) -> sp.Matrix:
    A = sp.zeros(n, n)
    start = 1 + n
    for index, (i, j) in enumerate(bivector_pairs(n)):
        A[int(i), int(j)] = b.coefficients[start + index]
        A[int(j), int(i)] = -b.coefficients[start + index]
    return A


def bivector_coefficients(b: MultiVector, n: int) -> list:
    m = n * (n - 1) // 2
    return list(b.coefficients[1 + n : 1 + n + m])


def prove_series(log):
    B, H = sp.symbols("B H", commutative=False)
    t = sp.Symbol("t")

    def ad_power(j):
        term = H
        for _ in range(j):
            term = sp.expand(B * term - term * B)
        return term

    for degree in range(SERIES_DEGREE):
        # t-coefficient of (B + tH)^(degree+1) / (degree+1)!: all words with one H and degree B's
        left = sp.expand((B + t * H) ** (degree + 1)).coeff(t, 1) / sp.factorial(degree + 1)
        # degree-`degree` part of psi(ad_B)(H) exp(B) = sum_{j+l=degree} ad^j(H) B^l / ((j+1)! l!)
        right = sum(ad_power(j) * B ** (degree - j) / (sp.factorial(j + 1) * sp.factorial(degree - j))
                    for j in range(degree + 1))
        log.check(f"dexp series, degree {degree} in B: d/dt exp(B+tH) = psi(ad_B)(H) exp(B)",
                  sp.expand(left - right), sp.expand)


def prove_phi(log):
    y = sp.Symbol("y", real=True, nonzero=True)
    phi = (1 - sp.exp(-sp.I * y)) / (sp.I * y)
    closed = sp.sin(y) / y - sp.I * (1 - sp.cos(y)) / y
    log.check("phi(iy) = sinc(y) - i (1 - cos y)/y", sp.simplify(sp.expand_complex(phi - closed)))
    half = sp.sin(y / 2) * (sp.sin(y / 2) / (y / 2))
    log.check("(1 - cos y)/y = sin(y/2) sinc(y/2)", sp.simplify((1 - sp.cos(y)) / y - half))
    z = sp.Symbol("z")
    log.check("phi(z) -> 1 as z -> 0 (phi is entire, phi(0) = 1)", sp.limit((1 - sp.exp(-z)) / z, z, 0) - 1)
    psi = (sp.exp(z) - 1) / z
    log.check("psi(z) = phi(-z)", sp.simplify(psi - ((1 - sp.exp(z)) / (-z))))


def prove(n_max, log):
    prove_series(log)
    prove_phi(log)
    for n in range(N_MIN, n_max + 1):
        metric = (1,) * n
        G, Y = symbols(metric, "g"), symbols(metric, "y")
        K = symbols(metric, "k", grades=(2,))
        log.check(f"n={n}: <G, K y> = <<G y~>_2, K> for bivectors K",
                  inner(G, K * Y) - inner((G * ~Y)(2), K), sp.expand)
        log.check(f"n={n}: <G, y K> = <<y~ G>_2, K> for bivectors K",
                  inner(G, Y * K) - inner((~Y * G)(2), K), sp.expand)

        Bv, P, H = (symbols(metric, name, grades=(2,)) for name in ("b", "p", "h"))
        log.check(f"n={n}: BH - HB is a bivector", (Bv * H - H * Bv) - (Bv * H - H * Bv)(2), sp.expand)
        log.check(f"n={n}: <ad_B P, H> = -<P, ad_B H> (ad_B skew-adjoint)",
                  inner(Bv * P - P * Bv, H) + inner(P, Bv * H - H * Bv), sp.expand)
        AB, AH = skew_matrix(Bv, n), skew_matrix(H, n)
        log.check(f"n={n}: skew(BH - HB) = 2 (A_B A_H - A_H A_B)",
                  (skew_matrix(Bv * H - H * Bv, n) - 2 * (AB * AH - AH * AB)).applyfunc(sp.expand), sp.expand)

        gather, left, right = bivector_part_tables(n)
        a, b = G.coefficients, Y.coefficients
        from_left = [sum(int(left[m, c]) * a[int(gather[m, c])] * b[c] for c in range(2**n)) for m in range(len(gather))]
        from_right = [sum(int(right[m, c]) * a[int(gather[m, c])] * b[c] for c in range(2**n)) for m in range(len(gather))]
        log.check(f"n={n}: tables give <a b~>_2", [x - y for x, y in zip(from_left, bivector_coefficients((G * ~Y)(2), n))],
                  sp.expand)
        log.check(f"n={n}: tables give <b~ a>_2", [x - y for x, y in zip(from_right, bivector_coefficients((~Y * G)(2), n))],
                  sp.expand)


if __name__ == "__main__":
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
