r"""Closed forms for rotors of every signature Cl(p, q, r), n <= 5 (k = floor(n/2) <= 2).

Roelfs and De Keninck ("Graded Symmetry Groups: Plane and Simple", 2023): a bivector is
(generically) :math:`B = \sum_j b_j` with commuting simple parts, :math:`b_j b_l = b_j \wedge b_l`
(j != l), :math:`b_j^2 = \lambda_j` a scalar. The numeric counterpart is
:mod:`galinear.core.signatures`; this module is sympy only.

Exponential of a simple bivector
    :math:`b^2 = \lambda` splits the series into even and odd powers,
    :math:`e^b = C(\lambda) + S(\lambda)\, b` with :math:`C = \cosh\sqrt\lambda`,
    :math:`S = \sinh\sqrt\lambda / \sqrt\lambda`, both even in :math:`\sqrt\lambda`:

    - :math:`\lambda < 0` (rotation): :math:`\cos\theta + (\sin\theta/\theta)\, b`, :math:`\theta = \sqrt{-\lambda}`;
    - :math:`\lambda > 0` (boost): :math:`\cosh\varphi + (\sinh\varphi/\varphi)\, b`, :math:`\varphi = \sqrt\lambda`;
    - :math:`\lambda = 0` (translation, null rotation): :math:`1 + b`.

Invariant decomposition, k = 2
    With :math:`W_m = B^{\wedge m}/m!`, :math:`\sigma_m = \langle W_m W_m\rangle_0` and
    :math:`Y_1 = \langle B W_2\rangle_2` (:mod:`galinear.symbolic.closed_forms`, whose formulas hold
    in every signature), the :math:`\lambda_j` are the roots of :math:`x^2 - \sigma_1 x + \sigma_2`
    and :math:`b_j = (\lambda_j B - Y_1)/(\lambda_j - \lambda_l)`. Since the parts enter
    :math:`e^{b_1} e^{b_2}` only through :math:`b_1 + b_2 = B` and :math:`b_1 b_2 = W_2`,

    .. math:: e^B = C_1 C_2 + S_1 S_2 W_2
              + \frac{(\lambda_1 S_1 C_2 - \lambda_2 C_1 S_2) B - (S_1 C_2 - C_1 S_2) Y_1}{\lambda_1 - \lambda_2},

    symmetric in the two roots, hence real for a complex-conjugate pair (Cl(2,2) and others with
    p, q >= 2), where it is :math:`|C|^2 + |S|^2 W_2 + (\operatorname{Im}(\lambda S \bar C) B -
    \operatorname{Im}(S \bar C) Y_1)/\operatorname{Im}\lambda`. At equal roots with
    :math:`B W_2 = \lambda B` (isoclinic) the limit is :math:`C^2 + C S B + S^2 W_2`.

Screw decomposition (PGA, n = 4 with one null basis vector)
    :math:`\sigma_2 = 0`, so the roots are :math:`\sigma_1` and 0: the rotation
    :math:`b_r = B - Y_1/\sigma_1` (:math:`b_r^2 = \sigma_1`) and the commuting translation
    :math:`b_t = Y_1/\sigma_1 = h\, b_r I` (:math:`b_t^2 = 0`) along the rotation axis, with
    pitch :math:`h = w/\sigma_1`, :math:`W_2 = w I`.

Proofs: :mod:`galinear.proofs.signature_rotors`.
"""
from __future__ import annotations

from typing import NamedTuple

import sympy as sp

from galinear.symbolic.closed_forms import _exact, check_bivector, closed_form_parts, invariants, wedge_powers
from galinear.symbolic.multivector import MultiVector

__all__ = [
    "MAX_SIGNATURE_K",
    "Part",
    "Screw",
    "cosh_sinhc",
    "simple_square",
    "exp_simple_signature",
    "signature_roots",
    "signature_decomposition",
    "exp_signature",
    "screw_decomposition",
]

#: Largest k = floor(n/2) covered here (roots of a quadratic; n <= 5).
MAX_SIGNATURE_K = 2


class Part(NamedTuple):
    """One simple part :math:`b_j` with its square :math:`\\lambda_j` and kind
    ("rotation", "boost", "null", "complex" or "symbolic" where the sign is not decided)."""

    bivector: MultiVector
    square: sp.Expr
    kind: str


class Screw(NamedTuple):
    """``rotation + translation = B``; ``translation = pitch * rotation * I``."""

    rotation: MultiVector
    translation: MultiVector
    pitch: sp.Expr


# ------------------------------------------------------------------------ helpers
def _kind(lam) -> str:
    lam = sp.sympify(lam)
    if lam.is_zero:
        return "null"
    if lam.is_extended_real is False:
        return "complex"
    if lam.is_negative:
        return "rotation"
    if lam.is_positive:
        return "boost"
    return "symbolic"


def _is_numeric(x: MultiVector) -> bool:
    return not x.free_symbols()


def _check_k(B: MultiVector) -> int:
    k = B.n // 2
    if k > MAX_SIGNATURE_K:
        raise ValueError(
            f"the symbolic closed forms of every signature cover n <= 5 (k = floor(n/2) <= {MAX_SIGNATURE_K}); "
            f"got n = {B.n}. Use galinear.Algebra(p, q, r).exp / .decompose (numeric) for larger n"
        )
    return k


def _pseudoscalar(B: MultiVector) -> MultiVector:
    return B._new([0] * ((1 << B.n) - 1) + [1])


def cosh_sinhc(lam):
    r"""The pair :math:`(\cosh\sqrt\lambda, \sinh\sqrt\lambda/\sqrt\lambda)` in the form of its case.

    Decided sign: cos / (sin x / x) for :math:`\lambda < 0`, cosh / sinh for :math:`\lambda > 0`, (1, 1) at
    0. Non-real :math:`\lambda` (or one of unknown sign that may be complex): the analytic form.
    Real :math:`\lambda` of unknown sign (a symbolic simple bivector): a two-branch
    ``Piecewise`` (cos / sinc for :math:`\lambda \le 0`, cosh / sinh otherwise), finite at 0.
    """
    lam = sp.sympify(lam)
    kind = _kind(lam)
    if kind == "null":
        return sp.S.One, sp.S.One
    if kind == "rotation":
        theta = sp.sqrt(-lam)
        return sp.cos(theta), sp.sin(theta) / theta
    if kind in ("boost", "complex") or lam.is_extended_real is not True:
        root = sp.sqrt(lam)
        return sp.cosh(root), sp.sinh(root) / root
    theta, phi = sp.sqrt(-lam), sp.sqrt(lam)
    return (sp.Piecewise((sp.cos(theta), lam <= 0), (sp.cosh(phi), True)),
            sp.Piecewise((sp.sinc(theta), lam <= 0), (sp.sinh(phi) / phi, True)))


# ------------------------------------------------------------------------ simple bivectors
def simple_square(b: MultiVector, *, assume_simple: bool = False) -> sp.Expr:
    r""":math:`\lambda = b^2` of a simple bivector (any metric), checked: :math:`b^2` must be a scalar.

    Raises ValueError for a non-bivector, or when :math:`b \wedge b` (the grade-4 part of
    :math:`b^2`) does not simplify to 0, unless ``assume_simple=True``.
    """
    check_bivector(b, euclidean=False)
    if not assume_simple and not b.op(b).is_zero():
        raise ValueError(
            "b is not (provably) simple: b ^ b != 0, so b^2 is not a scalar. Use exp_signature(b) "
            "(invariant decomposition), or pass assume_simple=True if b ^ b = 0 holds for the values "
            "you will substitute"
        )
    return sp.expand(b.scalar_product(b))


def exp_simple_signature(b: MultiVector, *, assume_simple: bool = False) -> MultiVector:
    r""":math:`e^b = \cosh\sqrt\lambda + (\sinh\sqrt\lambda/\sqrt\lambda)\, b`, :math:`\lambda = b^2`, in every signature.

    The three cases (rotation, boost, null) as in :func:`cosh_sinhc`; for Euclidean b this is
    :func:`galinear.symbolic.closed_forms.exp_simple`. Checks as :func:`simple_square`.
    """
    lam = simple_square(b, assume_simple=assume_simple)
    c, s = cosh_sinhc(lam)
    return c + s * b


# ------------------------------------------------------------------------ decomposition
def signature_roots(B: MultiVector) -> list:
    r"""The k <= 2 squares :math:`\lambda_j` of the parts: roots of :math:`x^2 - \sigma_1 x + \sigma_2`.

    Quadratic formula (symbolic B: :math:`(\sigma_1 \mp \sqrt{\sigma_1^2 - 4\sigma_2})/2`; where
    :math:`\sigma_2 = 0`, as in PGA, exactly :math:`[\sigma_1, 0]`). Numeric B: exact roots,
    real ones in increasing order (rotations first), a complex pair with positive imaginary part first.
    """
    check_bivector(B, "B", euclidean=False)
    B = _exact(B)  # floats -> the rationals they hold: exact arithmetic
    k = _check_k(B)
    sigma = invariants(B)
    if k == 0:
        return []
    if k == 1:
        return [sigma[1]]
    s1, s2 = sigma[1], sigma[2]
    if sp.expand(s2) == 0:
        roots = [s1, sp.S.Zero]
    else:
        disc = sp.sqrt(sp.expand(s1**2 - 4 * s2))
        roots = [sp.expand((s1 - disc) / 2), sp.expand((s1 + disc) / 2)]
    if _is_numeric(B):
        roots = [r if r.is_Rational else sp.radsimp(r) for r in roots]  # a rational root is kept as it is
        if all(r.is_extended_real for r in roots):
            roots.sort(key=lambda r: sp.N(r, 30))
        else:
            roots.sort(key=lambda r: -sp.N(sp.im(r), 30))
    return roots


def signature_decomposition(B: MultiVector) -> list[Part]:
    r"""Split a bivector of Cl(p, q, r), n <= 5, into k commuting simple parts (module notes).

    Numeric B: the parts are exact (complex conjugate for a complex pair of roots); equal roots
    raise ValueError unless B is simple (then ``[B, 0]``): the parts are not unique there.
    Symbolic B: the closed form, valid wherever the discriminant :math:`\sigma_1^2 - 4\sigma_2`
    is not 0.
    """
    check_bivector(B, "B", euclidean=False)
    B = _exact(B)  # floats -> the rationals they hold: exact arithmetic
    k = _check_k(B)
    roots = signature_roots(B)
    if k == 0:
        return []
    if k == 1:
        return [Part(B, roots[0], _kind(roots[0]))]
    if _is_numeric(B) and sp.simplify(roots[0] - roots[1]) == 0:
        if B.op(B).is_zero():
            return [Part(B, roots[0], _kind(roots[0])), Part(B._coerce(0), roots[1], _kind(roots[1]))]
        raise ValueError(
            "B has equal invariants (lambda_1 = lambda_2) and is not simple: its parts are not unique "
            "(an isoclinic rotation) or do not exist; exp_signature(B) still has a closed form "
            "where B W_2 = lambda B"
        )
    parts = closed_form_parts(B, roots)
    if _is_numeric(B):
        parts = [p.applyfunc(lambda c: sp.radsimp(sp.expand(c))) for p in parts]
    return [Part(p, r, _kind(r)) for p, r in zip(parts, roots)]


def _complex_pair(lam):
    """Real and imaginary parts of cosh(mu), sinh(mu)/mu with mu = sqrt(lam), exact (real radicals)."""
    a, b = sp.re(lam), sp.im(lam)
    size = sp.sqrt(a**2 + b**2)
    x = sp.sqrt((size + a) / 2)
    y = sp.sign(b) * sp.sqrt((size - a) / 2)
    c = (sp.cosh(x) * sp.cos(y), sp.sinh(x) * sp.sin(y))
    sm = (sp.sinh(x) * sp.cos(y), sp.cosh(x) * sp.sin(y))  # sinh(mu)
    d = x**2 + y**2
    s = ((sm[0] * x + sm[1] * y) / d, (sm[1] * x - sm[0] * y) / d)  # sinh(mu) conj(mu) / |mu|^2
    return (a, b), c, s


def exp_signature(B: MultiVector) -> MultiVector:
    r""":math:`e^B` of a bivector of Cl(p, q, r), n <= 5, in closed form (module notes).

    Simple B (every B for n <= 3): :func:`exp_simple_signature`. Otherwise the formula in
    :math:`B, W_2, Y_1` and the roots; its real form for a complex-conjugate pair; the isoclinic
    limit :math:`C^2 + CS B + S^2 W_2` at equal roots where :math:`B W_2 = \lambda B`. Equal roots
    without that (B is then not a sum of commuting simple parts) raise ValueError.
    """
    check_bivector(B, "B", euclidean=False)
    B = _exact(B)  # floats -> the rationals they hold: exact arithmetic
    k = _check_k(B)
    if k <= 1 or B.op(B).is_zero():
        return exp_simple_signature(B, assume_simple=True)
    l1, l2 = signature_roots(B)
    W = wedge_powers(B, 2)
    W2 = W[2]
    Y1 = B.gp(W2).grade_part(2).expand()
    if _is_numeric(B) and sp.simplify(l1 - l2) == 0:
        lam = sp.radsimp(l1)
        if not (B.gp(W2) - lam * B).is_zero():
            raise ValueError(
                "B has equal invariants but B W_2 != lambda B: it is not a sum of commuting simple parts "
                "(a non-diagonalisable bivector); use closed_forms.exp_series(B, order) or "
                "galinear.Algebra(p, q, r).exp(B) (scaling and squaring of the series)"
            )
        c, s = cosh_sinhc(lam)
        return (c * c + c * s * B + s * s * W2).expand()
    if _is_numeric(B) and _kind(l1) == "complex":
        (a, b), (cr, ci), (sr, si) = _complex_pair(l1)
        im_sc = si * cr - sr * ci  # Im(S conj(C))
        re_sc = sr * cr + si * ci
        im_lsc = a * im_sc + b * re_sc  # Im(lambda S conj(C))
        return (cr**2 + ci**2) + (sr**2 + si**2) * W2 + (im_lsc * B - im_sc * Y1) / b
    (c1, s1), (c2, s2) = cosh_sinhc(l1), cosh_sinhc(l2)
    return c1 * c2 + s1 * s2 * W2 + ((l1 * s1 * c2 - l2 * c1 * s2) * B - (s1 * c2 - c1 * s2) * Y1) / (l1 - l2)


# ------------------------------------------------------------------------ screw decomposition
def screw_decomposition(B: MultiVector) -> Screw:
    r"""PGA screw: :math:`B = b_r + b_t`, rotation :math:`b_r` and translation :math:`b_t` along its axis.

    For n = 4 with exactly one null basis vector (Cl(3,0,1); the numeric core's e1 is the null
    one): :math:`b_t = Y_1/\sigma_1`, :math:`b_r = B - b_t`, :math:`b_t = h\, b_r I`,
    :math:`h = w/\sigma_1` with :math:`W_2 = w I`. A pure translation (:math:`\sigma_1 = 0`,
    numeric B) gives :math:`b_r = 0, b_t = B, h = 0`. Symbolic B: valid where :math:`\sigma_1 \ne 0`.
    Then :math:`e^B = e^{b_r}(1 + b_t)`.
    """
    check_bivector(B, "B", euclidean=False)
    B = _exact(B)  # floats -> the rationals they hold: exact arithmetic
    if B.n != 4 or B.metric.count(0) != 1:
        raise ValueError(
            f"the screw decomposition is for 3D PGA: n = 4 with one null basis vector (Cl(3,0,1)); "
            f"got metric {B.metric}. Use signature_decomposition(B) for other signatures"
        )
    sigma = invariants(B)
    W2 = wedge_powers(B, 2)[2]
    w = W2.coefficients[-1]
    if _is_numeric(B) and sp.simplify(sigma[1]) == 0:
        return Screw(B._coerce(0), B, sp.S.Zero)
    Y1 = B.gp(W2).grade_part(2).expand()
    translation = Y1 / sigma[1]
    rotation = B - translation
    if _is_numeric(B):
        translation, rotation = translation.simplify(), rotation.simplify()
    return Screw(rotation, translation, w / sigma[1])
