"""Invariant decomposition of a bivector in closed form for k = floor(n/2) <= 3.

Roelfs & De Keninck (2021), "Graded symmetry groups: plane and simple". For
B = b_1 + ... + b_k (commuting simple parts on orthogonal planes, b_j^2 = lambda_j), with the
wedge powers W_m = B^(^m)/m!, e_m = <W_m W_m>_0 and Y_m = <W_m W_(m+1)>_2:
  lambda_j are the roots of p(x) = sum_m (-1)^m e_m x^(k-m), and
  b_j = sum_m (-1)^m lambda_j^(k-1-m) Y_m / prod_(l != j) (lambda_j - lambda_l).

What is proved here, exactly:
  (1) canonical form, every n <= n_max: B = sum_j theta_j e_(2j-1)(2j) with symbolic theta_j:
      p(x) = prod_j (x + theta_j^2), and the formula returns theta_j e_(2j-1)(2j);
  (2) generic B, k = 2 (n = 4..GENERIC_MAX), symbolic coefficients: for a root lambda of p
      (all identities reduced modulo p(lambda), i.e. valid for either root), with
      lambda' = e_1 - lambda the other root: b(lambda)^2 = lambda, b ^ b = 0 (simple),
      b(lambda) b(lambda') = b(lambda') b(lambda), <b(lambda) b(lambda')>_0 = 0 (orthogonal
      planes), b(lambda) + b(lambda') = B. The denominator squared is e_1^2 - 4 e_2 (mod p),
      the discriminant: the formula holds exactly where the two angles differ;
  (3) the closed-form roots: the quadratic formula satisfies p = 0 for generic symbolic B
      (n = 4), and the trigonometric cubic formula satisfies its cubic for symbolic e_1, e_2, e_3;
  (4) k = 3 with generic symbolic B is out of reach of simplify (15+ symbols, degree-6
      invariants): checked exactly with rationals instead. B = sum_j theta_j (Q e) ^ (Q e) with a
      rational orthogonal Q (Cayley transform) and rational theta_j; the decomposition must
      return exactly the planted parts;
  (5) degenerate case, equal angles (isoclinic): the closed form is 0/0 (it raises); the
      documented fallback (closed form for simple roots, deflation of the isoclinic rest) returns
      parts that are simple, sum to B, commute, are orthogonal and square to the roots.
"""
import random

import sympy as sp

from galinear.symbolic import MultiVector, bivector, vector
from galinear.symbolic.closed_forms import (
    characteristic_polynomial,
    closed_form_parts,
    cubic_roots,
    decomposition_roots,
    invariant_decomposition,
    invariants,
    wedge_powers,
)
from galinear.symbolic.proof_scripts import rational_orthogonal, run_proof

IDENTITY = "invariant decomposition closed form, k <= 3 (Roelfs & De Keninck 2021)"
N_MIN = 2
N_DEFAULT = 7
GENERIC_MAX = 5


def canonical(n, thetas):
    values = [0] * (n * (n - 1) // 2)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    for j, theta in enumerate(thetas):
        values[pairs.index((2 * j, 2 * j + 1))] = theta
    return bivector(n, values)


def planted(n, thetas, Q):
    parts = []
    for j, theta in enumerate(thetas):
        u = vector(n, list(Q[:, 2 * j]))
        w = vector(n, list(Q[:, 2 * j + 1]))
        parts.append(theta * u.op(w))
    return parts


def parts_are_valid(B, parts, roots):
    ok = (sum(parts[1:], parts[0]) - B).is_zero()
    for i, b in enumerate(parts):
        ok &= b.op(b).is_zero()
        ok &= (b * b - roots[i]).is_zero()
        for c in parts[i + 1 :]:
            ok &= (b * c - c * b).is_zero()
            ok &= sp.simplify((b * c).grade(0)) == 0
    return ok


def prove_generic_k2(n, log):
    lam = sp.Symbol("lam")
    B = bivector(n, "b")
    e = invariants(B)
    p = sp.Poly(lam**2 - e[1] * lam + e[2], lam)
    W = wedge_powers(B, 2)
    Y1 = (W[1] * W[2]).grade_part(2).expand()
    other = e[1] - lam

    def numerator(root):
        return (root * B - Y1).expand()

    def mod_p(value):
        coefficients = value.coefficients if isinstance(value, MultiVector) else [value]
        return [sp.Poly(sp.expand(c), lam).rem(p).as_expr() for c in coefficients]

    N, N2 = numerator(lam), numerator(other)
    D = 2 * lam - e[1]
    log.check(f"n={n} generic: b(lam)^2 = lam  (N^2 - lam D^2 = 0 mod p)", mod_p(N * N - lam * D**2), sp.expand)
    log.check(f"n={n} generic: b(lam) ^ b(lam) = 0 mod p (simple)", mod_p(N.op(N)), sp.expand)
    log.check(f"n={n} generic: b(lam) b(lam') = b(lam') b(lam) mod p", mod_p(N * N2 - N2 * N), sp.expand)
    log.check(f"n={n} generic: <b(lam) b(lam')>_0 = 0 mod p (orthogonal planes)", mod_p((N * N2).grade(0)), sp.expand)
    log.check(f"n={n} generic: b(lam) + b(lam') = B  (N - N' = D B)", (N - N2) - D * B, sp.expand)
    log.check(f"n={n} generic: D^2 = e1^2 - 4 e2 mod p (the discriminant)", mod_p(D**2 - (e[1] ** 2 - 4 * e[2])), sp.expand)


def prove(n_max, log):
    # (3b) trigonometric cubic formula
    e1, e2, e3, y = sp.symbols("e1 e2 e3 y", real=True)
    P = e2 - e1**2 / 3
    Q = -2 * e1**3 / 27 + e1 * e2 / 3 - e3
    t = sp.Symbol("t")
    cubic = lambda x: x**3 - e1 * x**2 + e2 * x - e3  # noqa: E731
    log.check("cubic: p(t + e1/3) = t^3 + P t + Q", cubic(t + e1 / 3) - (t**3 + P * t + Q), sp.expand)
    Pn = sp.Symbol("P", negative=True)
    Qs = sp.Symbol("Q", real=True)
    A = 2 * sp.sqrt(-Pn / 3)
    C = 3 * Qs / (Pn * A)
    # t = A cos(phi) with cos(3 phi) = C; cos^3 = (cos 3phi + 3 cos phi)/4 (Chebyshev)
    log.check("cubic: cos^3 phi = (cos 3phi + 3 cos phi)/4", sp.expand_trig(sp.cos(3 * sp.Symbol("phi"))) - (4 * sp.cos(sp.Symbol("phi")) ** 3 - 3 * sp.cos(sp.Symbol("phi"))))
    log.check("cubic: t = A cos(phi), cos 3phi = 3Q/(PA) solves t^3 + P t + Q = 0", A**3 * (C + 3 * y) / 4 + Pn * A * y + Qs)
    log.check(
        "cubic: phi_j = acos(C)/3 - 2 pi j/3 has cos(3 phi_j) = C, j = 0, 1, 2",
        [sp.cos(3 * (sp.acos(C) / 3 - 2 * sp.pi * j / 3)) - C for j in range(3)],
    )
    roots = cubic_roots(sp.Integer(-14), sp.Integer(49), sp.Integer(-36))  # roots -1, -4, -9
    log.record(
        "cubic_roots(-14, 49, -36) = (-9, -4, -1) to 40 digits [numeric spot check, not a proof]",
        all(abs(sp.N(r, 50) - v) < sp.Float("1e-40") for r, v in zip(roots, (-9, -4, -1))),
    )
    rng = random.Random(0)
    for n in range(N_MIN, n_max + 1):
        k = n // 2
        thetas = sp.symbols(f"theta1:{k + 1}", positive=True)
        B = canonical(n, thetas)
        x = sp.Symbol("x")
        target = sp.prod([x + th**2 for th in thetas])
        log.check(f"n={n}: canonical p(x) = prod (x + theta_j^2)", characteristic_polynomial(B, x) - target, sp.expand)
        if k >= 2:
            parts = closed_form_parts(B, [-(th**2) for th in thetas])
            expected = [canonical(n, [th if i == j else 0 for i, th in enumerate(thetas)]) for j in range(k)]
            log.check(
                f"n={n}: canonical closed form returns theta_j e_(2j-1)(2j)",
                [(a - b).applyfunc(sp.cancel) for a, b in zip(parts, expected)],
            )
        if n == 4:
            Bg = bivector(4, "b")
            ev = invariants(Bg)
            log.check(
                "n=4 generic: both quadratic-formula roots solve p",
                [r**2 - ev[1] * r + ev[2] for r in decomposition_roots(Bg)],
                sp.expand,
            )
        if 4 <= n <= GENERIC_MAX:
            prove_generic_k2(n, log)
        elif n > GENERIC_MAX:
            log.note(f"n={n}: generic symbolic B out of reach; exact rational checks below")
        # (4) planted parts under a rational rotation
        Qm = rational_orthogonal(n, rng)
        values = [sp.Rational(rng.randint(1, 9), rng.randint(1, 3)) for _ in range(k)]
        while len(set(values)) < k:
            values = [sp.Rational(rng.randint(1, 9), rng.randint(1, 3)) for _ in range(k)]
        plant = planted(n, values, Qm)
        Bq = sum(plant[1:], plant[0]) if k > 1 else plant[0]
        got = invariant_decomposition(Bq)
        order = sorted(range(k), key=lambda j: -values[j])  # largest angle first
        log.check(
            f"n={n}: rotated rational B (distinct angles {sorted(values, reverse=True)}) -> planted parts [rational]",
            [g - plant[j] for g, j in zip(got, order)],
        )
        # (5) equal angles
        if k >= 2:
            equal = [values[0]] * 2 + values[2:]
            plant = planted(n, equal, Qm)
            Be = sum(plant[1:], plant[0])
            try:
                closed_form_parts(Be, decomposition_roots(Be))
                raised = False
            except ValueError:
                raised = True
            log.record(f"n={n}: equal angles: the closed form is 0/0 and refuses (ValueError)", raised)
            parts = invariant_decomposition(Be)
            log.record(
                f"n={n}: equal angles {equal}: fallback parts simple, orthogonal, commuting, sum to B [rational]",
                parts_are_valid(Be, parts, decomposition_roots(Be)),
            )
        if k == 3:
            for equal in ([values[0]] * 3, [values[0], values[1], 0], [values[0], 0, 0]):
                plant = planted(n, equal, Qm)
                Be = sum(plant[1:], plant[0])
                parts = invariant_decomposition(Be)
                log.record(
                    f"n={n}: angles {equal}: fallback parts valid [rational]",
                    parts_are_valid(Be, parts, decomposition_roots(Be)),
                )


if __name__ == "__main__":
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
