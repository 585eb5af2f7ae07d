"""Rotors of every signature Cl(p, q, r), n <= 5: exp closed forms, invariant decomposition, PGA screw.

Roelfs and De Keninck (2023), "Graded Symmetry Groups: Plane and Simple";
galinear.symbolic.signatures. What is proved here, exactly:
  (1) simple exponential, every signature with n <= n_max: for b = v ^ w with symbolic v, w,
      b^2 = lambda = <b b>_0 (a scalar). For any scalar functions with c' = lambda s, s' = c,
      R(t) = c(t) + s(t) b solves R' = b R (undefined functions c, s; derivatives substituted).
      The three case forms (cos/sin with lambda = -theta^2, cosh/sinh with lambda = phi^2,
      1 + t b at lambda = 0) and the analytic form cosh(t sqrt(L)), sinh(t sqrt(L))/sqrt(L) for
      a symbol L solve c' = L s, s' = c, c(0) = 1, s(0) = 0. A linear ODE with R(0) = 1 has one
      solution, exp(t b), so exp(b) = R(1). Independently the series sum_(m<=7) b^m/m! equals
      the truncated closed form (symbolic b, n <= 3; rational b for n = 4, 5), and a null simple
      bivector (n ^ w, n null, n.w = 0; or e ^ v with e^2 = 0) squares to 0, so exp = 1 + b;
  (2) k = 2 generic symbolic B (n = 4, 5; all signatures listed), modulo p(lam) = lam^2 -
      sigma_1 lam + sigma_2, so for either root, complex ones included: b(lam)^2 = lam, simple,
      the two parts commute, <b b'>_0 = 0, b + b' = B, b b' = W_2; and (c1 + s1 b1)(c2 + s2 b2)
      equals the closed form c1 c2 + s1 s2 W2 + ((l1 s1 c2 - l2 c1 s2) B - (s1 c2 - c1 s2) Y1)
      /(l1 - l2) that exp_signature evaluates, for independent symbols c_j, s_j;
  (3) the real form of (2) for a complex-conjugate pair (real symbols), and the isoclinic limit
      c^2 + c s B + s^2 W2 where B W2 = lam B; a Cl(2,2) bivector with equal roots and
      B W2 != lam B is proved not to be a sum of commuting simple parts;
  (4) rational bivectors (n = 4, 5; several per signature; exact in radicals): parts from
      signature_decomposition sum to B, commute, b1 b2 = b1 ^ b2, square to their roots;
      the product of the parts' exponentials solves R' = B R; exp_signature equals the product
      exactly for real roots (for complex pairs: 40-digit spot check, labelled);
  (5) PGA screw, generic symbolic B of Cl(3,0,1) (rational functions, valid where sigma_1 != 0):
      rotation + translation = B, they commute, translation^2 = 0, rotation^2 = sigma_1,
      rotation simple, translation = pitch * rotation * I (along the axis) and ideal (every
      blade holds the null e1), and (c + s b_r)(1 + t b_t) solves R' = B R; a pure translation
      (ideal B) squares to 0, so exp = 1 + B.
"""
import random

import sympy as sp

from galinear import blades
from galinear.symbolic import MultiVector, bivector, blade, vector
from galinear.symbolic.closed_forms import exp_series, invariants, wedge_powers
from galinear.symbolic.proof_scripts import random_rational, run_proof
from galinear.symbolic.signatures import (
    cosh_sinhc,
    exp_signature,
    exp_simple_signature,
    screw_decomposition,
    signature_decomposition,
)

IDENTITY = "rotors of every signature, n <= 5: exp cases, invariant decomposition (k = 2), PGA screw"
N_MIN = 2
N_DEFAULT = 5
TRUNCATION_ORDER = 7
SYMBOLIC_SERIES_MAX = 3
RATIONAL_PER_SIGNATURE = 2

#: (p, q, r) per n: each n <= n_max is proved for these signatures.
SIGNATURES = {
    2: [(1, 1), (1, 0, 1)],
    3: [(2, 1), (1, 2), (2, 0, 1), (1, 1, 1)],
    4: [(3, 1), (1, 3), (3, 0, 1), (2, 2), (2, 1, 1)],
    5: [(4, 1), (3, 2), (4, 0, 1)],
}
t = sp.Symbol("t", positive=True)


def name(sig):
    return "Cl(" + ",".join(map(str, sig)) + ")"


def exact_zero(c):
    return sp.expand(sp.radsimp(sp.expand(c)))


def ode_residual(R, Bv, rules):
    """R'(t) - B R(t) with the derivatives of the undefined scalar functions replaced by ``rules``."""
    dR = R.applyfunc(lambda c: sp.diff(c, t).subs(rules))
    return (dR - Bv * R).applyfunc(lambda c: sp.expand(c.subs(rules)))


def prove_scalar_forms(log):
    L = sp.Symbol("L")
    theta, phi = sp.symbols("theta phi", positive=True)
    forms = {
        "rotation lambda = -theta^2: cos(t theta), sin(t theta)/theta": (-(theta**2), sp.cos(t * theta), sp.sin(t * theta) / theta),
        "boost lambda = phi^2: cosh(t phi), sinh(t phi)/phi": (phi**2, sp.cosh(t * phi), sp.sinh(t * phi) / phi),
        "null lambda = 0: 1, t": (sp.S.Zero, sp.S.One, t),
        "analytic: cosh(t sqrt L), sinh(t sqrt L)/sqrt L (any L, complex included)": (L, sp.cosh(t * sp.sqrt(L)), sp.sinh(t * sp.sqrt(L)) / sp.sqrt(L)),
    }
    for label, (lam, c, s) in forms.items():
        log.check(f"{label}: c' = lambda s, s' = c, c(0) = 1, s(0) = 0",
                  [sp.diff(c, t) - lam * s, sp.diff(s, t) - c, sp.limit(c, t, 0) - 1, sp.limit(s, t, 0)])
        taylor_c = sum(lam**j * t ** (2 * j) / sp.factorial(2 * j) for j in range(4))
        taylor_s = sum(lam**j * t ** (2 * j + 1) / sp.factorial(2 * j + 1) for j in range(4))
        log.check(f"{label}: Taylor coefficients lambda^m/(2m)!, lambda^m/(2m+1)! to t^7",
                  [sp.series(c, t, 0, 8).removeO() - taylor_c, sp.series(s, t, 0, 8).removeO() - taylor_s], sp.expand)
    x = sp.Symbol("x", real=True)
    c, s = cosh_sinhc(x)
    log.check("cosh_sinhc: Piecewise branches are cos/sinc (x <= 0) and cosh/sinh (x > 0)",
              [c.args[0][0] - sp.cos(sp.sqrt(-x)), c.args[1][0] - sp.cosh(sp.sqrt(x)),
               (s.args[0][0] - sp.sinc(sp.sqrt(-x))).rewrite(sp.sin), s.args[1][0] - sp.sinh(sp.sqrt(x)) / sp.sqrt(x),
               sp.sinc(0) - 1])


def prove_simple(sig, log):
    metric = blades.metric_from_signature(*sig)
    n = len(metric)
    v, w = vector(metric, "v"), vector(metric, "w")
    b = v.op(w)
    lam = sp.expand(b.scalar_product(b))
    log.check(f"{name(sig)}: b = v ^ w is a bivector with b^2 = <b b>_0 (a scalar)", [b - b.grade_part(2), b * b - lam], sp.expand)
    c, s = sp.Function("c")(t), sp.Function("s")(t)
    rules = {sp.Derivative(c, t): lam * s, sp.Derivative(s, t): c}
    log.check(f"{name(sig)}: c' = lambda s, s' = c  =>  (c + s b)' = b (c + s b)", ode_residual(c + s * b, b, rules))
    closed = exp_simple_signature(b)
    cs, ss = cosh_sinhc(lam)
    log.check(f"{name(sig)}: exp_simple_signature(v ^ w) = cosh sqrt(lambda) + sinh sqrt(lambda)/sqrt(lambda) b", closed - (cs + ss * b))
    if n <= SYMBOLIC_SERIES_MAX:
        kind, bb = "symbolic", b
    else:
        kind = "rational"
        bb = vector(metric, [random_rational() for _ in range(n)]).op(vector(metric, [random_rational() for _ in range(n)]))
    lb = sp.expand(bb.scalar_product(bb))
    even = sum(lb**j / sp.factorial(2 * j) for j in range(TRUNCATION_ORDER // 2 + 1))
    odd = sum(lb**j / sp.factorial(2 * j + 1) for j in range((TRUNCATION_ORDER - 1) // 2 + 1))
    log.check(f"{name(sig)}: sum_(m<={TRUNCATION_ORDER}) b^m/m! = truncated closed form [{kind}]",
              exp_series(bb, TRUNCATION_ORDER) - (even + odd * bb), sp.expand)
    null_vectors = [i for i, m in enumerate(metric) if m == 0]
    plus = [i for i, m in enumerate(metric) if m == 1]
    minus = [i for i, m in enumerate(metric) if m == -1]
    if null_vectors:
        e = [0] * n
        e[null_vectors[0]] = 1
        u = vector(metric, [0 if i == null_vectors[0] else sp.Symbol(f"u{i + 1}") for i in range(n)])
        nb = vector(metric, e).op(u)
    elif plus and minus and n >= 3:
        e = [0] * n
        e[plus[0]], e[minus[0]] = 1, 1
        rest = [i for i in range(n) if i not in (plus[0], minus[0])]
        u = vector(metric, [sp.Symbol(f"u{i + 1}") if i in rest else 0 for i in range(n)])
        nb = vector(metric, e).op(u)
    else:
        return
    log.check(f"{name(sig)}: null simple bivector n ^ u squares to 0, exp_simple_signature = 1 + b",
              [nb * nb, exp_simple_signature(nb) - 1 - nb], sp.expand)


def prove_generic_k2(sig, log):
    metric = blades.metric_from_signature(*sig)
    lam = sp.Symbol("lam")
    B = bivector(metric, "b")
    sigma = invariants(B)
    p = sp.Poly(lam**2 - sigma[1] * lam + sigma[2], lam)
    W2 = wedge_powers(B, 2)[2]
    Y1 = (B * W2).grade_part(2).expand()
    other = sigma[1] - lam
    N, N2 = (lam * B - Y1).expand(), (other * B - Y1).expand()
    D = 2 * lam - sigma[1]  # lam - lam'; b = N / D, b' = N2 / (-D)

    def mod_p(value):
        coefficients = value.coefficients if isinstance(value, MultiVector) else [value]
        return [sp.Poly(sp.expand(c), lam).rem(p).as_expr() for c in coefficients]

    label = f"{name(sig)} generic B"
    log.check(f"{label}: b(lam)^2 = lam, b ^ b = 0 (mod p)", mod_p(N * N - lam * D**2) + mod_p(N.op(N)), sp.expand)
    log.check(f"{label}: b b' = b' b, <b b'>_0 = 0 (mod p)", mod_p(N * N2 - N2 * N) + mod_p((N * N2).grade(0)), sp.expand)
    log.check(f"{label}: b + b' = B, b b' = W_2 (mod p)", [(N - N2) - D * B] + mod_p(N * N2 + D**2 * W2), sp.expand)
    c1, s1, c2, s2 = sp.symbols("c1 s1 c2 s2")
    # D^2 (c1 + s1 N/D)(c2 - s2 N2/D) against D^2 times the closed form of exp_signature
    lhs = (c1 * D + s1 * N) * (c2 * D - s2 * N2)
    rhs = D**2 * (c1 * c2 + s1 * s2 * W2) + D * ((lam * s1 * c2 - other * c1 * s2) * B - (s1 * c2 - c1 * s2) * Y1)
    log.check(f"{label}: (c1 + s1 b1)(c2 + s2 b2) = exp_signature's closed form in B, W2, Y1 (mod p)", mod_p(lhs - rhs), sp.expand)


def prove_pair_forms(log):
    a, b = sp.symbols("a b", real=True, nonzero=True)
    cr, ci, sr, si, Bs, Ws, Ys = sp.symbols("cr ci sr si B W Y", real=True)
    l1, l2 = a + sp.I * b, a - sp.I * b
    C1, C2, S1, S2 = cr + sp.I * ci, cr - sp.I * ci, sr + sp.I * si, sr - sp.I * si
    general = C1 * C2 + S1 * S2 * Ws + ((l1 * S1 * C2 - l2 * C1 * S2) * Bs - (S1 * C2 - C1 * S2) * Ys) / (l1 - l2)
    im_sc = si * cr - sr * ci
    real = (cr**2 + ci**2) + (sr**2 + si**2) * Ws + ((a * im_sc + b * (sr * cr + si * ci)) * Bs - im_sc * Ys) / b
    log.check("complex pair: the closed form is real, |C|^2 + |S|^2 W2 + (Im(lam S C*) B - Im(S C*) Y1)/Im lam",
              sp.simplify(sp.expand(general - real)))
    m = blades.metric_from_signature(4, 1)
    B = blade(m, "e12", 2) + blade(m, "e34", 2)
    W2 = wedge_powers(B, 2)[2]
    c, s = cosh_sinhc(-4)
    log.check("CGA isoclinic 2(e12 + e34): B W2 = lam B and exp_signature = c^2 + c s B + s^2 W2 = exp(2 e12) exp(2 e34)",
              [B * W2 + 4 * B, exp_signature(B) - (c * c + c * s * B + s * s * W2),
               exp_signature(B) - exp_simple_signature(blade(m, "e12", 2)) * exp_simple_signature(blade(m, "e34", 2))])
    m = blades.metric_from_signature(2, 2)
    J = bivector(m, [-1] * 6)
    sigma = invariants(J)
    W2 = wedge_powers(J, 2)[2]
    log.record("Cl(2,2) B = -(sum e_ij): equal roots (disc 0) and B W2 != lam B, so no commuting simple parts exist",
               sp.expand(sigma[1] ** 2 - 4 * sigma[2]) == 0 and not (J * W2 - sigma[1] / 2 * J).is_zero())


def prove_rational(sig, log, rng):
    metric = blades.metric_from_signature(*sig)
    n = len(metric)
    for trial in range(RATIONAL_PER_SIGNATURE):
        B = bivector(metric, [random_rational(rng, 2, 3) for _ in range(n * (n - 1) // 2)])
        parts = signature_decomposition(B)
        (b1, l1, k1), (b2, l2, k2) = parts
        label = f"{name(sig)} rational #{trial + 1} ({k1}, {k2})"
        log.check(f"{label}: parts sum to B, commute, b1 b2 = b1 ^ b2, b_j^2 = lambda_j",
                  [b1 + b2 - B, b1 * b2 - b2 * b1, (b1 * b2).grade(0), b1 * b1 - l1, b2 * b2 - l2], exact_zero)
        c1, s1, c2, s2 = (sp.Function(f)(t) for f in ("c1", "s1", "c2", "s2"))
        rules = {sp.Derivative(c1, t): l1 * s1, sp.Derivative(s1, t): c1,
                 sp.Derivative(c2, t): l2 * s2, sp.Derivative(s2, t): c2}
        R = (c1 + s1 * b1) * (c2 + s2 * b2)
        log.check(f"{label}: product of the parts' exponentials solves R' = B R", ode_residual(R, B, rules), exact_zero)
        product = exp_simple_signature(b1, assume_simple=True) * exp_simple_signature(b2, assume_simple=True)
        closed = exp_signature(B)
        if k1 == "complex":
            diff = max(abs(sp.N(c, 50)) for c in (closed - product).coefficients)
            log.record(f"{label}: exp_signature (real form) = product of complex parts' exps to 40 digits "
                       "[numeric spot check, not a proof]", diff < sp.Float("1e-40"))
        else:
            log.check(f"{label}: exp_signature(B) = exp(b1) exp(b2)", closed - product, exact_zero)


def prove_screw(log):
    metric = blades.metric_from_signature(3, 0, 1)
    B = bivector(metric, "b")
    screw = screw_decomposition(B)
    r, tr = screw.rotation, screw.translation
    sigma = invariants(B)
    I = blade(metric, "e1234")
    log.check("PGA screw: rotation + translation = B, they commute, translation^2 = 0",
              [r + tr - B, r * tr - tr * r, tr * tr], sp.cancel)
    log.check("PGA screw: rotation^2 = sigma_1 (scalar), rotation ^ rotation = 0",
              [r * r - sigma[1], r.op(r)], sp.cancel)
    log.check("PGA screw: translation = pitch * rotation * I (along the rotation axis)", tr - screw.pitch * r * I, sp.cancel)
    names = blades.blade_names(4)
    log.check("PGA screw: translation is ideal (only blades holding the null e1)",
              [c for c, nm in zip(tr.coefficients, names) if "1" not in nm[1:]], sp.cancel)
    c, s = sp.Function("c")(t), sp.Function("s")(t)
    rules = {sp.Derivative(c, t): sigma[1] * s, sp.Derivative(s, t): c}
    R = (c + s * r) * (1 + t * tr)
    log.check("PGA screw: (c + s b_r)(1 + t b_t) solves R' = B R, so exp(B) = exp(b_r)(1 + b_t)",
              ode_residual(R, B, rules), sp.cancel)
    ideal = bivector(metric, [sp.Symbol("d2"), sp.Symbol("d3"), sp.Symbol("d4"), 0, 0, 0])
    log.check("PGA translation: an ideal bivector squares to 0, exp_signature = 1 + B",
              [ideal * ideal, exp_signature(ideal) - 1 - ideal], sp.expand)


def prove(n_max, log):
    rng = random.Random(0)
    prove_scalar_forms(log)
    for n in range(N_MIN, n_max + 1):
        for sig in SIGNATURES.get(n, []):
            prove_simple(sig, log)
    if n_max >= 4:
        prove_pair_forms(log)
        prove_screw(log)
    for n in range(4, n_max + 1):
        for sig in SIGNATURES[n]:
            prove_generic_k2(sig, log)
            prove_rational(sig, log, rng)


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(run_proof(IDENTITY, N_MIN, N_DEFAULT, prove))
