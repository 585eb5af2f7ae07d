r"""Closed forms for rotors in Euclidean Cl(n), derived and checked with sympy.

Exponential of a simple bivector
    For :math:`b = v \wedge w`, :math:`b^2 = -|b|^2` is a scalar, so the power series splits
    into even and odd powers: :math:`e^b = \cos|b| + \operatorname{sinc}|b|\, b` with
    :math:`\operatorname{sinc} x = \sin x / x` (1 at 0). See :mod:`galinear.proofs.exp_simple_bivector`.

Invariant decomposition (Roelfs & De Keninck 2021, "Graded symmetry groups: plane and simple")
    A bivector is :math:`B = \sum_{j=1}^k b_j` with k = floor(n/2) commuting simple bivectors
    on orthogonal planes, :math:`b_j^2 = \lambda_j \le 0`. With the wedge powers
    :math:`W_m = B^{\wedge m} / m!` (the elementary symmetric polynomials of the :math:`b_j`),

    - :math:`e_m = \langle W_m W_m \rangle_0` is the m-th elementary symmetric polynomial of
      the :math:`\lambda_j`, so the :math:`\lambda_j` are the roots of
      :math:`p(x) = \sum_{m=0}^{k} (-1)^m e_m x^{k-m}`;
    - :math:`Y_m = \langle W_m W_{m+1} \rangle_2 = \sum_j e_m(\lambda_{\ne j})\, b_j`, hence
      (Lagrange interpolation)

      .. math:: b_j = \frac{\sum_{m=0}^{k-1} (-1)^m \lambda_j^{k-1-m} Y_m}{\prod_{l \ne j} (\lambda_j - \lambda_l)}.

    The roots have closed forms for k <= 3 (quadratic formula, trigonometric cubic formula).
    The formula breaks where two :math:`\lambda_j` coincide (equal rotation angles, including
    two zero angles): the denominator vanishes and the planes of the repeated angle are not
    unique. There :func:`invariant_decomposition` uses the distinct roots in closed form and
    splits the isoclinic remainder :math:`B'` by deflation, :math:`u = e_i \rfloor B'`,
    :math:`b = u \wedge (u \rfloor B') / |u|^2` (every vector in the support of an isoclinic
    bivector lies in one of its invariant planes). See :mod:`galinear.proofs.invariant_decomposition`.

Rotor gadget parameter count (paper Eq. 6, paper-notes section 4)
    :func:`rotor_gadget_parameter_count` and :func:`rotor_network_parameter_count`.
"""
from __future__ import annotations

import math
import sympy as sp

from galinear import blades
from galinear.symbolic.multivector import MultiVector
from galinear.symbolic import rotor_maths

__all__ = [
    "MAX_CLOSED_FORM_K",
    "check_bivector",
    "is_simple",
    "exp_simple",
    "exp_series",
    "wedge_powers",
    "invariants",
    "characteristic_polynomial",
    "decomposition_roots",
    "invariant_decomposition",
    "closed_form_parts",
    "cubic_roots",
    "rotor_from_bivector",
    "normalize_rotor",
    "sandwich",
    "sandwich_matrix",
    "gadget_chunks",
    "rotor_gadget_parameter_count",
    "rotor_network_parameter_count",
]

#: Largest k = floor(n/2) with a closed-form invariant decomposition (roots of a cubic).
MAX_CLOSED_FORM_K = 3


# ------------------------------------------------------------------------ checks
def _require_multivector(x, what: str) -> None:
    if not isinstance(x, MultiVector):
        raise TypeError(f"{what} must be a galinear.symbolic.MultiVector, got {type(x).__name__}")


def _require_euclidean(x: MultiVector, what: str) -> None:
    _require_multivector(x, what)
    if any(m != 1 for m in x.metric):
        raise ValueError(
            f"{what}: closed forms here are for Euclidean Cl(n); got metric {x.metric}. "
            "galinear.symbolic.signatures has the closed forms of every signature (n <= 5)"
        )


def check_bivector(b: MultiVector, what: str = "b", *, euclidean: bool = True) -> MultiVector:
    """Raise ValueError unless ``b`` is a pure bivector (other grades identically zero).

    ``euclidean=False`` accepts every metric (for the formulas that hold in every signature).
    """
    if euclidean:
        _require_euclidean(b, what)
    else:
        _require_multivector(b, what)
    grades = blades.blade_grades(b.n).tolist()
    bad = sorted({g for g, c in zip(grades, b.coefficients) if g != 2 and sp.simplify(c) != 0})
    if bad:
        raise ValueError(
            f"{what} must be a bivector (grade 2 only), but it has parts of grade(s) {bad}; "
            "take b.grade_part(2) if that is what you mean"
        )
    return b


def is_simple(b: MultiVector) -> bool:
    """True if :math:`b \\wedge b` simplifies to 0 (always true for n <= 3)."""
    check_bivector(b)
    return b.op(b).is_zero()


# ------------------------------------------------------------------------ exponential
def exp_simple(b: MultiVector, *, assume_simple: bool = False) -> MultiVector:
    r""":math:`e^b = \cos\theta + \operatorname{sinc}\theta\; b`, :math:`\theta = |b|`.

    ``sympy.sinc`` is :math:`\sin x / x` with value 1 at 0, so the formula is finite at b = 0
    (where it gives 1). Raises ValueError if ``b`` is not a bivector, or if it cannot be shown
    simple (:math:`b \wedge b = 0`) unless ``assume_simple=True``; a non-simple bivector needs
    :func:`invariant_decomposition` first (the exponential is then the product of the parts').
    """
    check_bivector(b)
    if not assume_simple and not is_simple(b):
        raise ValueError(
            "b is not (provably) simple: b ^ b != 0. Split it with invariant_decomposition(b) and "
            "multiply the exponentials of the parts, or pass assume_simple=True if b ^ b = 0 holds "
            "for the values you will substitute"
        )
    theta = sp.sqrt(b.norm_squared())
    return sp.cos(theta) + sp.sinc(theta) * b


def exp_series(x: MultiVector, order: int) -> MultiVector:
    r"""Truncated exponential series :math:`\sum_{m=0}^{order} x^m / m!`."""
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ValueError(f"order must be a non-negative integer, got {order!r}")
    term = x._coerce(1)
    total = term
    for m in range(1, order + 1):
        term = (term * x).expand() / m
        total = total + term
    return total.expand()


# ------------------------------------------------------------------------ decomposition
def wedge_powers(B: MultiVector, k: int | None = None) -> list[MultiVector]:
    r""":math:`[W_0, \dots, W_k]`, :math:`W_0 = 1`, :math:`W_m = W_{m-1} \wedge B / m`."""
    k = B.n // 2 if k is None else k
    out = [B._coerce(1)]
    for m in range(1, k + 1):
        out.append((out[-1].op(B) / m).expand())
    return out


def invariants(B: MultiVector) -> list:
    r"""The scalar invariants :math:`e_m = \langle W_m W_m \rangle_0`, m = 0..k (e_0 = 1), any signature."""
    check_bivector(B, "B", euclidean=False)
    return [sp.expand(w.scalar_product(w)) for w in wedge_powers(B)]


def characteristic_polynomial(B: MultiVector, x=None) -> sp.Expr:
    r""":math:`p(x) = \sum_m (-1)^m e_m x^{k-m}`, whose roots are the squares :math:`b_j^2`."""
    x = sp.Symbol("x") if x is None else x
    e = invariants(B)
    k = len(e) - 1
    return sp.expand(sum((-1) ** m * e[m] * x ** (k - m) for m in range(k + 1)))


def _check_k(B: MultiVector) -> int:
    k = B.n // 2
    if k > MAX_CLOSED_FORM_K:
        raise ValueError(
            f"the closed-form invariant decomposition covers k = floor(n/2) <= {MAX_CLOSED_FORM_K} "
            f"(n <= 7); got n = {B.n} (k = {k}). Use the numeric decomposition of galinear.Algebra "
            "(power iteration / eigen-decomposition) for larger n"
        )
    return k


def _is_numeric(B: MultiVector) -> bool:
    return not B.free_symbols()


def _exact(B: MultiVector) -> MultiVector:
    """Every float -> the rational it holds exactly (its binary value; nothing is rounded), so the
    symbolic layer computes exactly on the numbers given."""
    return B.applyfunc(lambda c: c.xreplace({f: sp.Rational(f) for f in c.atoms(sp.Float)}))


def decomposition_roots(B: MultiVector) -> list:
    r"""The k roots :math:`\lambda_j = b_j^2` of the characteristic polynomial, in closed form.

    k = 1: :math:`e_1`; k = 2: :math:`(e_1 \pm \sqrt{e_1^2 - 4 e_2})/2`; k = 3: the
    trigonometric form of the three real roots of the cubic. For numeric (exact) B the roots
    are the exact real roots, with multiplicity, in increasing order (largest angle first).
    """
    check_bivector(B, "B")
    k = _check_k(B)
    if k == 0:
        return []
    x = sp.Symbol("x")
    if _is_numeric(B):
        poly = sp.Poly(characteristic_polynomial(_exact(B), x), x)
        roots = poly.real_roots()
        if len(roots) != k:  # pragma: no cover - impossible for a real bivector (p has k real roots)
            raise ValueError("the characteristic polynomial has complex roots: B is not a real Euclidean bivector")
        return list(roots)
    e = invariants(B)
    if k == 1:
        return [e[1]]
    if k == 2:
        disc = sp.sqrt(e[1] ** 2 - 4 * e[2])
        return [(e[1] - disc) / 2, (e[1] + disc) / 2]
    return list(cubic_roots(e[1], e[2], e[3]))


def cubic_roots(e1, e2, e3) -> tuple:
    r"""Trigonometric closed form of the three real roots of :math:`x^3 - e_1 x^2 + e_2 x - e_3`.

    With :math:`x = t + e_1/3`: :math:`t^3 + P t + Q = 0`, :math:`P = e_2 - e_1^2/3 \le 0`,
    :math:`Q = -2e_1^3/27 + e_1 e_2/3 - e_3`, and
    :math:`t_j = A \cos(	frac13 rccos(3Q/(PA)) - 2\pi j/3)`, :math:`A = 2\sqrt{-P/3}`.
    Returned in the order j = 2, 1, 0 (increasing). At P = 0 (a
    triple root) the formula is 0/0: the invariant decomposition then takes its fallback.
    """
    P = e2 - e1**2 / 3
    Q = -2 * e1**3 / 27 + e1 * e2 / 3 - e3
    amplitude = 2 * sp.sqrt(-P / 3)
    angle = sp.acos(3 * Q / (P * amplitude)) / 3
    return tuple(e1 / 3 + amplitude * sp.cos(angle - 2 * sp.pi * j / 3) for j in (2, 1, 0))


def closed_form_parts(B: MultiVector, roots) -> list[MultiVector]:
    r"""The Lagrange formula :math:`b_j = \sum_m (-1)^m \lambda_j^{k-1-m} Y_m / \prod_{l\ne j}(\lambda_j-\lambda_l)`.

    Valid only for pairwise distinct ``roots``; for numeric B with two equal roots it raises
    ValueError (use :func:`invariant_decomposition`, which has a fallback there). The formula
    holds in every signature (:mod:`galinear.symbolic.signatures` uses it with complex roots too).
    """
    check_bivector(B, "B", euclidean=False)
    k = len(roots)
    W = wedge_powers(B, k)
    Y = [W[m].gp(W[m + 1]).grade_part(2).expand() for m in range(k)]
    parts = []
    for j, lam in enumerate(roots):
        denominator = sp.S.One
        for l, other in enumerate(roots):
            if l != j:
                denominator *= lam - other
        if _is_numeric(B) and sp.simplify(denominator) == 0:
            raise ValueError(
                "equal roots (equal rotation angles): the closed form is 0/0 there; "
                "use invariant_decomposition(B), which falls back to deflation"
            )
        numerator = B._coerce(0)
        for m in range(k):
            numerator = numerator + (-1) ** m * lam ** (k - 1 - m) * Y[m]
        parts.append(numerator / denominator)
    return parts


def _deflate_isoclinic(rest: MultiVector, count: int) -> list[MultiVector]:
    """Split a bivector whose nonzero squares all coincide into ``count`` simple parts."""
    parts = []
    n = rest.n
    for _ in range(count - 1):
        chosen = None
        for i in range(n):
            e_i = MultiVector(rest.metric, [0] * (1 << n))
            coefficients = list(e_i.coefficients)
            coefficients[1 + i] = 1
            u = MultiVector(rest.metric, coefficients).lc(rest).applyfunc(sp.simplify)
            if not u.is_zero():
                chosen = u
                break
        if chosen is None:
            parts.append(rest._coerce(0))
            continue
        w = chosen.lc(rest)
        part = (chosen.op(w) / chosen.norm_squared()).applyfunc(sp.simplify)
        parts.append(part)
        rest = (rest - part).applyfunc(sp.simplify)
    parts.append(rest)
    return parts


def invariant_decomposition(B: MultiVector, *, method: str = "auto") -> list[MultiVector]:
    r"""Split a bivector into k = floor(n/2) <= 3 commuting simple bivectors on orthogonal planes.

    Parameters
    ----------
    B : MultiVector
        A bivector of Euclidean Cl(n), n <= 7; symbolic or numeric (each float is converted
        to the rational it holds exactly, and the computation is exact: the parts sum to B).
    method : {"auto", "closed"}
        ``"closed"``: the closed form of the module docstring (symbolic B: valid wherever the
        roots are distinct; numeric B: ValueError at equal roots). ``"auto"``: for numeric B,
        closed form for the simple roots plus deflation of the isoclinic remainder at repeated
        roots (documented fallback); for symbolic B the same as ``"closed"``.

    Returns
    -------
    list of MultiVector
        :math:`b_1, \dots, b_k` with :math:`\sum_j b_j = B`, :math:`b_j \wedge b_j = 0`,
        :math:`b_i b_j = b_j b_i`, ordered by increasing :math:`b_j^2` (largest angle first).
    """
    if method not in ("auto", "closed"):
        raise ValueError(f"method must be 'auto' or 'closed', got {method!r}")
    check_bivector(B, "B")
    k = _check_k(B)
    if k == 0:
        return []
    if k == 1:
        return [B]
    if not _is_numeric(B):
        return closed_form_parts(B, decomposition_roots(B))
    B = _exact(B)
    roots = decomposition_roots(B)
    if method == "closed":
        return [p.applyfunc(sp.simplify) for p in closed_form_parts(B, roots)]
    distinct = []
    for r in roots:
        if not any(sp.simplify(r - d) == 0 for d in distinct):
            distinct.append(r)
    if len(distinct) == k:
        return [p.applyfunc(sp.simplify) for p in closed_form_parts(B, roots)]
    # Repeated roots: a simple root lambda_j still has the closed form with the product over the
    # *distinct* other roots (the repeated group acts as one isoclinic part).
    # Repeated roots (equal angles): each simple root keeps its closed form, with the product
    # taken over the other *distinct* roots; the remainder is isoclinic and is split by deflation.
    multiplicity = {d: sum(1 for r in roots if sp.simplify(r - d) == 0) for d in distinct}
    W = wedge_powers(B, k)
    parts_by_root = {}
    rest = B
    for d in distinct:
        if multiplicity[d] == 1:
            part = _single_root_part(B, roots, d, W)
            parts_by_root[d] = [part]
            rest = (rest - part).applyfunc(sp.simplify)
    repeated = [d for d in distinct if multiplicity[d] > 1]
    if len(repeated) > 1:  # pragma: no cover - needs k >= 4, excluded by _check_k
        raise ValueError("two repeated roots need k >= 4")
    d = repeated[0]
    if sp.simplify(d) == 0:
        parts_by_root[d] = [rest] + [rest._coerce(0)] * (multiplicity[d] - 1)
    else:
        parts_by_root[d] = _deflate_isoclinic(rest, multiplicity[d])
    out = []
    for d in distinct:
        out.extend(parts_by_root[d])
    return out


def _single_root_part(B, roots, lam, W):
    """Closed-form part of a root of multiplicity one (other roots may repeat)."""
    k = len(roots)
    others = [r for r in roots if sp.simplify(r - lam) != 0]
    Y = [W[m].gp(W[m + 1]).grade_part(2).expand() for m in range(k)]
    numerator = B._coerce(0)
    for m in range(k):
        numerator = numerator + (-1) ** m * lam ** (k - 1 - m) * Y[m]
    denominator = sp.S.One
    for other in others:
        denominator *= lam - other
    return (numerator / denominator).applyfunc(sp.simplify)


# ------------------------------------------------------------------------ rotors and maps
def rotor_from_bivector(B: MultiVector) -> MultiVector:
    r""":math:`e^B = \prod_j e^{b_j}` from the invariant decomposition (parts commute)."""
    parts = invariant_decomposition(B)
    out = B._coerce(1)
    for part in parts:
        out = out * exp_simple(part, assume_simple=True)
    return out


def normalize_rotor(R: MultiVector) -> MultiVector:
    r""":math:`R / \sqrt{\langle R \tilde R \rangle_0}`.

    Exact for a scaled rotor (:math:`R \tilde R` a positive scalar, e.g. :math:`c + s\,b` with
    b simple, or a product of such); raises ValueError if R has odd parts or
    :math:`R\tilde R` has a part of grade > 0 that does not simplify to 0.
    """
    _require_euclidean(R, "R")
    grades = blades.blade_grades(R.n).tolist()
    if any(g % 2 and sp.simplify(c) != 0 for g, c in zip(grades, R.coefficients)):
        raise ValueError("a rotor is even: R has odd-grade parts")
    rr = R * R.reverse()
    if not (rr - rr.coefficients[0]).is_zero():
        raise ValueError(
            "R ~R is not a scalar, so R is not a scaled rotor (normalising would not give R ~R = 1)"
        )
    return R / sp.sqrt(rr.coefficients[0])


def sandwich(R: MultiVector, x: MultiVector, S: MultiVector | None = None) -> MultiVector:
    r""":math:`R x \tilde S` (:math:`S = R` if omitted)."""
    S = R if S is None else S
    return (R * x * S.reverse()).expand()


def sandwich_matrix(R: MultiVector, S: MultiVector | None = None) -> sp.Matrix:
    r"""The 2**n x 2**n matrix M with :math:`(R x \tilde S)_i = \sum_j M_{ij} x_j` (shortlex)."""
    n = R.n
    S = R if S is None else S
    columns = []
    for j in range(1 << n):
        e = [0] * (1 << n)
        e[j] = 1
        columns.append(list(sandwich(R, MultiVector(R.metric, e), S).coefficients))
    return sp.Matrix(columns).T


# ------------------------------------------------------------------------ parameter counts
def gadget_chunks(d_in: int, d_out: int, chunk: int | None = None) -> tuple[int, int, int]:
    r"""(c, I, J): chunk size :math:`c = \min(2^{\lfloor\log_2 d_{in}\rfloor}, 2^{\lfloor\log_2 d_{out}\rfloor})`
    unless given, :math:`I = \lceil d_{in}/c \rceil`, :math:`J = \lceil d_{out}/c \rceil`."""
    for name, value in (("d_in", d_in), ("d_out", d_out)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1
                              or chunk & (chunk - 1)):
        raise ValueError(f"chunk must be a power of two (the size of a multivector), got {chunk!r}")
    return rotor_maths.chunk_layout(d_in, d_out, chunk)


def rotor_gadget_parameter_count(
    d_in: int, d_out: int, *, chunk: int | None = None, double: bool = True, alpha: bool = True,
    bias: bool = False,
) -> int:
    r"""Parameters of one rotor gadget :math:`d_{in} \to d_{out}` (paper Eq. 6).

    :math:`P \binom{n}{2} (2 \text{ if double else } 1) + P [\alpha] + d_{out} [\text{bias}]`
    with :math:`P = I J` chunk pairs and :math:`n = \log_2 c`.
    """
    c, I, J = gadget_chunks(d_in, d_out, chunk)
    n = c.bit_length() - 1
    pairs = I * J
    return pairs * math.comb(n, 2) * (2 if double else 1) + (pairs if alpha else 0) + (d_out if bias else 0)


def rotor_network_parameter_count(
    d_in: int, d_out: int, *, hidden: int = 2048, hidden_layers: int = 2, breadth: int = 3,
    double: bool = True, alpha: bool = True, bias: bool = False, shared_prelu: bool = True,
) -> int:
    r"""Parameters of the replacement network of paper-notes section 5.

    Input gadget :math:`d_{in} \to H`, ``hidden_layers`` blocks of ``breadth`` gadgets
    :math:`H \to H` each with a branch weight, output gadget :math:`H \to d_{out}`, LayerNorms
    without affine parameters and one shared PReLU weight. For the paper's q/k/v networks this
    gives 895 / 1,076 (LLaMA-3.2-1B) and 1,401 / 1,493 (Qwen-2.5-1.5B).
    """
    kw = dict(double=double, alpha=alpha, bias=bias)
    total = rotor_gadget_parameter_count(d_in, hidden, **kw)
    total += hidden_layers * breadth * (rotor_gadget_parameter_count(hidden, hidden, **kw) + 1)
    total += rotor_gadget_parameter_count(hidden, d_out, **kw)
    return total + (1 if shared_prelu else 0)

