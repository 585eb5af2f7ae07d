r"""Rotor exponential and invariant decomposition in every signature Cl(p, q, r).

Roelfs and De Keninck ("Graded Symmetry Groups: Plane and Simple", 2023) show that a bivector
of Cl(p, q, r) is (generically) a sum of k = floor(n/2) commuting simple bivectors,
:math:`B = \sum_j b_j`, :math:`b_j b_l = b_l b_j = b_j \wedge b_l`, each squaring to a scalar
:math:`b_j^2 = \lambda_j`. The sign of :math:`\lambda_j` sorts the parts: :math:`\lambda < 0` a
rotation, :math:`\lambda > 0` a boost, :math:`\lambda = 0` a translation or null rotation; in
signatures with p, q >= 2 the :math:`\lambda_j` may come as complex-conjugate pairs.

The invariants come from powers of B. With :math:`W_m = B^{\wedge m}/m!`,

* :math:`\sigma_m = \langle W_m W_m \rangle_0` is the m-th elementary symmetric polynomial of
  the :math:`\lambda_j`, so they are the roots of
  :math:`Q(x) = \sum_{m=0}^{k} (-1)^m \sigma_m x^{k-m}`;
* :math:`Y_m = \langle W_m W_{m+1} \rangle_2 = \sum_j \sigma_m(\lambda \setminus \lambda_j)\, b_j`,
  so with :math:`Z(x) = \sum_{m<k} (-1)^m x^{k-1-m} Y_m = \sum_j \frac{Q(x)}{x - \lambda_j} b_j`,
  each part is :math:`b_j = Z(\lambda_j) / Q'(\lambda_j)` (Lagrange interpolation).

Then :math:`\exp B = \prod_j \exp b_j` with
:math:`\exp b = \cosh\sqrt\lambda + \frac{\sinh\sqrt\lambda}{\sqrt\lambda}\, b`: cos / sin for
:math:`\lambda < 0`, cosh / sinh for :math:`\lambda > 0`, :math:`1 + b` for :math:`\lambda = 0`
(both functions are even in :math:`\sqrt\lambda`, so complex :math:`\lambda` needs no branch
choice; a conjugate pair multiplies to a real rotor).

Coinciding invariants (:math:`\lambda_j = \lambda_l`) make the parts non-unique and the formula
0/0: those rows (and any row whose result fails the check :math:`R \tilde R = 1`) take the
exponential by scaling and squaring of the Taylor series in the algebra instead, which needs no
decomposition (:func:`exp_series`). The Euclidean path of :class:`~galinear.core.algebra.Algebra`
is separate (:mod:`galinear.core.rotors`); the invariants and the parts are computed in
:mod:`galinear.core.invariants`; the logarithm in :mod:`galinear.core.signature_log`.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from galinear._generated import rotor_spec
from galinear.core.invariants import (  # noqa: F401  (invariants, left_matrix, MERGE_TOL: re-exported)
    MERGE_TOL,
    _complex_product,
    _full,
    _grade2,
    _parts,
    invariants,
    left_matrix,
)
from galinear.core.rotors import Decomposition, skew_matrix

__all__ = ["SignatureDecomposition", "invariants", "decompose", "exp", "exp_simple", "exp_series",
           "left_matrix", "algebra_exp", "algebra_decompose", "MERGE_TOL"]


@dataclass
class SignatureDecomposition(Decomposition):
    r"""Invariant decomposition in a general signature (a :class:`Decomposition` with more fields).

    ``bivectors`` (..., k, C(n,2)) holds the parts :math:`b_j`, complex when some
    :math:`\lambda_j` are complex (a conjugate pair of parts, which sum to a real bivector);
    ``squares`` (..., k) the :math:`\lambda_j = b_j^2` (complex dtype), ``angles`` (..., k)
    :math:`\sqrt{|\lambda_j|}` (angle, rapidity, 0 for null parts) and ``planes`` (..., k, 2, n)
    coefficient-orthonormal vectors (u, w) with :math:`b_j = s_j\, u \wedge w` for real parts
    (NaN for complex ones). ``multiplicity`` (..., k) counts equal invariants: where it exceeds 1
    the parts are not unique and the first part of the group holds their sum (the others zero).
    """

    squares: np.ndarray | None = None
    multiplicity: np.ndarray | None = None


# ---------------------------------------------------------------------------- helpers
def _cosh_sinhc(lam: np.ndarray, scale=1.0):
    r""":math:`\cosh\sqrt\lambda` and :math:`t \sinh\sqrt\lambda / \sqrt\lambda` at :math:`\lambda = t^2 \lambda_s`.

    ``lam`` holds :math:`\lambda_s` (complex) and ``scale`` t, so that bivectors scaled to
    largest coefficient 1 give :math:`\exp b = c + s\, b_s` without squaring t (no overflow for
    |b| up to the largest float). These are the rotor specification's cos and sinc of
    :math:`\theta` at :math:`q = \theta^2 = -\lambda` (:math:`\cosh x = \cos ix`,
    :math:`\sinh x / x = \operatorname{sinc} ix`): its float64 series in q where
    :math:`|q| <` its switch point, the closed forms elsewhere (:mod:`galinear._generated.rotor_spec`).
    """
    lam = np.asarray(lam, dtype=np.complex128)
    scale = np.broadcast_to(np.asarray(scale, dtype=np.float64), lam.shape)
    base = np.sqrt(lam)
    root = scale * base
    with np.errstate(over="ignore", invalid="ignore"):
        q = -(root * root)
        small = np.abs(q) < rotor_spec.SERIES_SWITCH["float64"]
        safe = np.where(small, 1.0, base)
        c = np.where(small, rotor_spec.horner(rotor_spec.COS_SERIES["float64"], q), np.cosh(root))
        s = np.where(small, rotor_spec.horner(rotor_spec.SINC_SERIES["float64"], q) * scale, np.sinh(root) / safe)
    return c, s


def _overflow_error(alg, B: np.ndarray, dtype) -> OverflowError:
    """The error for exponentials beyond the largest float: names the limit."""
    limit = float(np.log(np.finfo(dtype).max) + np.log(2.0))  # cosh(phi) ~ e^phi / 2
    return OverflowError(
        f"exp(B) overflows {np.dtype(dtype).name} in {alg!r}: a boost part of rapidity phi gives cosh(phi) and "
        f"sinh(phi), which exceed the largest {np.dtype(dtype).name} ({float(np.finfo(dtype).max):.3g}) once phi > "
        f"{limit:.2f} (the rapidities of these bivectors reach {float(_rapidity(alg, B)):.3g}); scale B down or "
        f"work in float64"
    )


def _rapidity(alg, B: np.ndarray) -> float:
    """Largest sqrt(lambda_j) over boost parts (real lambda > 0) of bivector rows, float64."""
    if alg.n < 4:
        scale = np.abs(B).max(axis=-1)
        scale = np.where(scale > 0, scale, 1.0)
        lam = alg.scalar_product(B / scale[:, None], B / scale[:, None]) + 0j
        return float(np.max(np.sqrt(np.maximum(lam.real, 0)) * scale, initial=0.0))
    scale, lam, *_ = _parts(alg, B, scaled=True)
    return float(np.max(np.sqrt(np.maximum(lam.real, 0)) * scale[:, None], initial=0.0))


# ---------------------------------------------------------------------------- public functions
def exp_simple(alg, b: np.ndarray) -> np.ndarray:
    r""":math:`\exp b = \cosh\sqrt\lambda + \frac{\sinh\sqrt\lambda}{\sqrt\lambda} b` for simple b (real rows, scaled inside)."""
    scale = np.abs(b).max(axis=-1)
    scale = np.where(scale > 0, scale, 1.0)
    bs = b / scale[:, None]
    c, s = _cosh_sinhc(alg.scalar_product(bs, bs), scale)
    with np.errstate(over="ignore", invalid="ignore"):
        out = (s[..., None] * bs).real
    out[..., 0] += c.real
    return out


def exp_series(alg, x: np.ndarray, terms: int = 18) -> np.ndarray:
    r"""Exponential of any multivectors by scaling and squaring the Taylor series (rows, dim).

    :math:`x` is divided by :math:`2^s` so that its coefficient 1-norm is at most 1/2, the series
    is summed to ``terms`` terms (error below :math:`2^{-18}/18! \approx 10^{-21}` relative) and
    squared s times. Needs no decomposition: the fallback for coinciding invariants.
    """
    x = np.asarray(x, dtype=np.float64)
    size = np.abs(x).sum(axis=-1)
    s = np.maximum(0, np.ceil(np.log2(np.maximum(size, 1e-300) / 0.5))).astype(np.int64)
    y = x / (2.0 ** s)[..., None]
    term = np.zeros_like(y)
    term[..., 0] = 1.0
    out = term.copy()
    for m in range(1, terms):
        term = alg.gp(term, y) / m
        out = out + term
    for step in range(int(s.max(initial=0))):
        square = alg.gp(out, out)
        out = np.where((s > step)[..., None], square, out)
    return out


def exp(alg, B: np.ndarray) -> np.ndarray:
    r"""Rotors :math:`\exp B` of bivector rows (rows, 2**n) in any signature, float64.

    Invariant decomposition (module notes) for rows with distinct invariants; scaling and
    squaring of the series (:func:`exp_series`) for rows with coinciding ones or whose result
    fails :math:`|R \tilde R - 1| \le 10^{-9}` relative to :math:`|R|^2`.
    """
    B = np.asarray(B, dtype=np.float64)
    rows = B.shape[0]
    out = np.zeros_like(B)
    if rows == 0:
        return out
    if alg.n < 4:  # every bivector is simple
        return exp_simple(alg, B)
    scale, lam, parts, first, size = _parts(alg, B, scaled=True)
    distinct = np.all(size == 1, axis=-1)
    idx = np.nonzero(distinct)[0]
    if idx.size:
        k = alg.n // 2
        c, s = _cosh_sinhc(lam[idx], scale[idx, None])
        huge = ~(np.isfinite(c).all(axis=-1) & np.isfinite(s).all(axis=-1))  # cosh overflows: reported by the caller
        c[huge], s[huge] = np.inf, 0.0
        R = np.zeros((idx.size, alg.dim), dtype=np.complex128)
        R[:, 0] = 1.0
        with np.errstate(over="ignore", invalid="ignore"):
            for j in range(k):
                factor = s[:, j, None] * parts[idx, j]
                factor[:, 0] += c[:, j]
                R[~huge] = _complex_product(alg, "gp", R[~huge], factor[~huge])
        R[huge] = np.inf
        out[idx] = R.real
    finite = np.isfinite(out).all(axis=-1)
    peak = np.where(finite, np.maximum(1.0, np.abs(out).max(axis=-1)), 1.0)
    unit = np.where(finite[:, None], out / peak[:, None], 0.0)  # R ~R = 1 checked without squaring |R|
    check = alg.gp(unit, alg.reverse(unit))
    check[:, 0] -= (1 / peak) ** 2
    err = np.abs(check).max(axis=-1)
    bad = ~distinct | ~(err <= 1e-9 * np.maximum((1.0 / peak) ** 2, (unit * unit).sum(axis=-1)))
    bad &= finite | ~distinct
    if np.any(bad):
        with np.errstate(over="ignore", invalid="ignore"):
            out[bad] = exp_series(alg, _reduce_turns(B[bad], scale[bad], lam[bad], parts[bad], first[bad]))
    return out


def _reduce_turns(B, scale, lam, parts, first):
    r"""B with every rotation part (or group of equal rotations) of angle above :math:`2\pi` reduced mod :math:`2\pi`.

    :math:`\exp(2\pi \hat b) = 1` for a unit rotation plane, and the parts commute, so the rotor
    is unchanged; the series then squares a bivector of size at most :math:`2\pi\sqrt k` instead
    of amplifying its rounding by :math:`|B|` (huge isoclinic rotations stay unit rotors).
    ``lam`` and ``parts`` are those of B / scale (:func:`_parts` with ``scaled=True``).
    """
    k = lam.shape[1]
    theta = scale[:, None] * np.sqrt(np.maximum(-lam.real, 0.0))
    turn = (lam.imag == 0) & (lam.real < 0) & (first == np.arange(k)) & (theta > 2 * np.pi)
    rows = np.any(turn, axis=-1)
    if not np.any(rows):
        return B
    factor = np.where(turn, np.mod(theta, 2 * np.pi) / np.where(turn, theta, 1.0), 1.0)
    out = B.copy()
    out[rows] = np.einsum("rj,rjd->rd", factor[rows] * scale[rows, None], parts[rows].real)
    return out


def decompose(alg, B: np.ndarray) -> SignatureDecomposition:
    r"""Invariant decomposition of bivector rows (rows, 2**n) in any signature (float64).

    Parts are sorted by the real part of :math:`\lambda_j` (rotations first) and returned as
    :class:`SignatureDecomposition`.
    """
    B = np.asarray(B, dtype=np.float64)
    n, k = alg.n, alg.n // 2
    rows = B.shape[0]
    npairs = comb(n, 2)
    if k == 0 or rows == 0:
        z = np.zeros((rows, k))
        return SignatureDecomposition(n, np.zeros((rows, k, npairs)), z, np.zeros((rows, k, 2, n)),
                                      _grade2(alg, B).copy(), squares=z.astype(np.complex128),
                                      multiplicity=np.ones((rows, k), np.int64))
    if k == 1:
        lam = alg.scalar_product(B, B)[:, None].astype(np.complex128)
        parts = B[:, None, :].astype(np.complex128)
        size = np.ones((rows, 1), np.int64)
    else:
        _, lam, parts, first, size = _parts(alg, B)
        lead = np.stack([first[:, j] == j for j in range(k)], axis=-1)
        size = np.where(lead, size, 0)
        order = np.argsort(np.where(lead, lam.real, np.inf), axis=-1, kind="stable")
        lam = np.take_along_axis(lam, order, axis=-1)
        size = np.take_along_axis(size, order, axis=-1)
        parts = np.take_along_axis(parts, order[..., None], axis=-2)
        lam = np.where(size > 0, lam, 0)
    biv = _grade2(alg, parts)
    real = not np.any(np.abs(biv.imag) > 0)
    if real:
        biv = biv.real.copy()
    # planes of the real parts: b = s u ^ w from the coefficient skew matrix
    planes = np.full((rows, k, 2, n), np.nan)
    realrows = np.all(np.abs(np.asarray(biv).imag) == 0, axis=-1) if not real else np.ones((rows, k), bool)
    A = skew_matrix(n, np.asarray(biv).real)
    U, sv, Vt = np.linalg.svd(A)
    u, w = Vt[..., 0, :], Vt[..., 1, :]
    sgn = np.sign(np.einsum("...i,...ij,...j->...", u, A, w))
    planes[..., 0, :] = np.where(realrows[..., None], u, np.nan)
    planes[..., 1, :] = np.where(realrows[..., None], sgn[..., None] * w, np.nan)
    residual = _grade2(alg, B) - np.asarray(biv).sum(axis=-2).real
    return SignatureDecomposition(
        n, biv, np.sqrt(np.abs(lam)), planes, residual,
        method="invariant", squares=lam, multiplicity=size.astype(np.int64),
    )


# ---------------------------------------------------------------------------- Algebra entry points
def _rows(alg, B, name="B"):
    b = alg._bivector_arg(B, name)  # validated compact coefficients (..., C(n,2))
    full = _full(alg, b)
    return b.dtype, full.shape[:-1], full.reshape(-1, alg.dim).astype(np.float64)


def algebra_exp(alg, B, method: str = "decompose") -> np.ndarray:
    """:meth:`Algebra.exp` for signatures that are not Euclidean (same arguments and checks)."""
    dtype, shape, flat = _rows(alg, B)
    if method == "simple":
        peak = np.abs(flat).max(axis=-1, initial=0.0)
        unit = flat / np.where(peak > 0, peak, 1.0)[:, None]
        wedge = alg.op(unit, unit)
        size = np.maximum((unit * unit).sum(axis=-1), np.finfo(np.float64).tiny)
        if np.any(np.abs(wedge).max(axis=-1, initial=0.0) > rotor_spec.SIMPLE_RTOL[np.dtype(dtype).name] * size):
            raise ValueError(
                "exp(method='simple') needs a simple bivector (B ^ B = 0); use method='decompose' for a general one"
            )
        out = exp_simple(alg, flat)
    elif method == "decompose":
        out = exp(alg, flat)
    else:
        raise ValueError(f"method must be 'decompose' or 'simple', got {method!r}")
    with np.errstate(over="ignore"):
        out = out.astype(dtype)
    if not np.isfinite(out).all():
        raise _overflow_error(alg, flat, dtype)
    return out.reshape(shape + (alg.dim,))


def algebra_decompose(alg, B, method: str = "exact", **options) -> SignatureDecomposition:
    """:meth:`Algebra.decompose` for signatures that are not Euclidean (the invariant method only)."""
    if method == "power":
        raise ValueError(
            f"the power iteration is for Euclidean algebras; {alg!r} uses the invariant decomposition: "
            f"call decompose(B) (method='exact')"
        )
    if method not in ("exact", "invariant"):
        raise ValueError(f"method must be 'exact' (the invariant decomposition here), got {method!r}")
    if options:
        raise TypeError(f"the invariant decomposition takes no options, got {sorted(options)}")
    dtype, shape, flat = _rows(alg, B)
    dec = decompose(alg, flat)
    k, n = alg.n // 2, alg.n

    def back(x, tail):
        x = np.asarray(x)
        if x.dtype.kind == "f":
            x = x.astype(dtype)
        return x.reshape(shape + tail)

    npairs = comb(n, 2)
    return SignatureDecomposition(
        n, back(dec.bivectors, (k, npairs)), back(dec.angles, (k,)), back(dec.planes, (k, 2, n)),
        back(dec.residual, (npairs,)), method="invariant", squares=dec.squares.reshape(shape + (k,)),
        multiplicity=dec.multiplicity.reshape(shape + (k,)),
    )
