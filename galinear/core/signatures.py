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
:mod:`galinear.core.invariants`.
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
from galinear.core.rotors import Decomposition

__all__ = ["SignatureDecomposition", "invariants", "decompose", "exp", "exp_simple", "exp_series",
           "left_matrix", "log", "algebra_exp", "algebra_decompose", "algebra_log", "MERGE_TOL"]


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
def _cosh_sinhc(lam: np.ndarray):
    r""":math:`\cosh\sqrt\lambda` and :math:`\sinh\sqrt\lambda / \sqrt\lambda` for complex lambda.

    These are the rotor specification's cos and sinc of :math:`\theta` at :math:`q = \theta^2 = -\lambda`
    (:math:`\cosh x = \cos ix`, :math:`\sinh x / x = \operatorname{sinc} ix`): its float64 series
    in q where :math:`|q| <` its switch point, the closed forms elsewhere
    (:mod:`galinear._generated.rotor_spec`).
    """
    lam = np.asarray(lam, dtype=np.complex128)
    q = -lam
    small = np.abs(q) < rotor_spec.SERIES_SWITCH["float64"]
    root = np.sqrt(lam)
    safe = np.where(small, 1.0, root)
    c = np.where(small, rotor_spec.horner(rotor_spec.COS_SERIES["float64"], q), np.cosh(root))
    s = np.where(small, rotor_spec.horner(rotor_spec.SINC_SERIES["float64"], q), np.sinh(safe) / safe)
    return c, s


# ---------------------------------------------------------------------------- public functions
def exp_simple(alg, b: np.ndarray, lam: np.ndarray | None = None) -> np.ndarray:
    r""":math:`\exp b = \cosh\sqrt\lambda + \frac{\sinh\sqrt\lambda}{\sqrt\lambda} b` for simple b (real rows)."""
    if lam is None:
        lam = alg.scalar_product(b, b)
    c, s = _cosh_sinhc(np.asarray(lam, dtype=np.complex128))
    out = (s[..., None] * b).real
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
    scale, lam, parts, first, size = _parts(alg, B)
    distinct = np.all(size == 1, axis=-1)
    idx = np.nonzero(distinct)[0]
    if idx.size:
        k = alg.n // 2
        c, s = _cosh_sinhc(lam[idx])
        R = np.zeros((idx.size, alg.dim), dtype=np.complex128)
        R[:, 0] = 1.0
        for j in range(k):
            factor = s[:, j, None] * parts[idx, j]
            factor[:, 0] += c[:, j]
            R = _complex_product(alg, "gp", R, factor)
        out[idx] = R.real
    check = alg.gp(out, alg.reverse(out))
    check[:, 0] -= 1
    err = np.abs(check).max(axis=-1)
    bad = ~distinct | ~(err <= 1e-9 * np.maximum(1.0, (out * out).sum(axis=-1)))
    if np.any(bad):
        out[bad] = exp_series(alg, B[bad])
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
    from galinear.core.rotors import skew_matrix

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
        wedge = alg.op(flat, flat)
        size = np.maximum((flat * flat).sum(axis=-1), np.finfo(np.float64).tiny)
        if np.any(np.abs(wedge).max(axis=-1, initial=0.0) > np.sqrt(np.finfo(dtype).eps) * size):
            raise ValueError(
                "exp(method='simple') needs a simple bivector (B ^ B = 0); use method='decompose' for a general one"
            )
        out = exp_simple(alg, flat)
    elif method == "decompose":
        out = exp(alg, flat)
    else:
        raise ValueError(f"method must be 'decompose' or 'simple', got {method!r}")
    return out.astype(dtype).reshape(shape + (alg.dim,))


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


# ---------------------------------------------------------------------------- logarithm
def _acosh_ratio(c: np.ndarray) -> np.ndarray:
    r""":math:`f(c) = \operatorname{arccosh}(c)/\sqrt{c^2 - 1}`, so that :math:`\log(c + \beta) = f(c)\,\beta`
    for a unit simple rotor :math:`c + \beta` (:math:`c^2 - \beta^2 = 1`): :math:`\theta/\sin\theta`
    for rotations, :math:`\varphi/\sinh\varphi` for boosts, 1 for null parts (series near c = 1)."""
    c = np.asarray(c, dtype=np.complex128)
    t = c - 1
    out = np.empty_like(c)
    small = np.abs(t) < 1e-5
    out[small] = 1 - t[small] / 3 + 2 * t[small] ** 2 / 15
    big = ~small
    cb = c[big]
    real = np.abs(cb.imag) == 0
    vals = np.empty_like(cb)
    x = cb.real[real]
    with np.errstate(invalid="ignore", divide="ignore"):
        inside = np.abs(x) < 1
        xr = np.where(inside, np.arccos(np.clip(x, -1, 1)) / np.sqrt(np.maximum(1 - x * x, 0)), 0.0)
        xb = np.where(x > 1, np.arccosh(np.maximum(x, 1)) / np.sqrt(np.maximum(x * x - 1, 0)), np.nan)
        vals[real] = np.where(inside, xr, xb)
        z = cb[~real]
        vals[~real] = np.arccosh(z) / np.sqrt(z * z - 1)
    out[big] = vals
    return out


def log(alg, R: np.ndarray) -> np.ndarray:
    r"""Logarithm of rotor rows (rows, 2**n), float64, in a non-Euclidean signature: B with exp B = R.

    For :math:`R = \prod_j (c_j + s_j b_j)` the bivector part is
    :math:`\langle R\rangle_2 = \sum_j s_j C_j b_j` with :math:`C_j = \prod_{l \ne j} c_l`: its
    invariant decomposition gives :math:`\beta_j = s_j C_j b_j`, and since
    :math:`\langle R \rangle_0 = c_j C_j`, each simple factor is
    :math:`R_j = (\langle R\rangle_0 + \beta_j)/C_j` with :math:`C_j^2 = \langle R\rangle_0^2 - \beta_j^2`.
    A factor whose :math:`C_j` vanishes (another plane turned by :math:`\pi/2`) is
    :math:`(\prod_{l\ne j} R_l)^{\sim} R`. Then :math:`\log(c + \beta) = f(c)\,\beta` with
    :math:`f(c) = \operatorname{arccosh}(c)/\sqrt{c^2-1}`. A sign left over (the factors multiply
    to :math:`-R`) moves a rotation angle by :math:`\pi`. The result is checked:
    :math:`|\exp B - R| \le` :data:`LOG_CHECK_TOL` :math:`\max(1, |R|)`; rows that fail (a boost times -1, which has no
    logarithm; rotations by :math:`\pi` whose plane R does not determine; coinciding
    invariants) raise a ValueError.
    """
    R = np.asarray(R, dtype=np.float64)
    rows = R.shape[0]
    n, k = alg.n, alg.n // 2
    if rows == 0:
        return np.zeros_like(R)
    r = R[:, 0].astype(np.complex128)
    P = alg.grade(R, 2)
    if k <= 1:
        logs = (_acosh_ratio(r)[:, None] * P).real if k == 1 else np.zeros_like(R)
        return _checked_log(alg, R, logs)
    _, mu, beta, first, size = _parts(alg, P)
    grouped = np.any(size > 1, axis=-1)
    C = np.sqrt(r[:, None] ** 2 - mu)  # (rows, k), C_j up to its sign
    # boosts and null parts need c_j = r / C_j > 0: give C_j the sign of r (rotations take either
    # sign; a leftover -1 is moved into a rotation angle below)
    real_nonneg = (np.abs(mu.imag) == 0) & (mu.real >= 0)
    C = np.where(real_nonneg & (r.real[:, None] < 0), -C, C)
    scale = np.maximum(1.0, np.abs(R).max(axis=-1))
    weak = np.abs(C) <= 1e-6 * scale[:, None]
    factors = np.zeros((rows, k, alg.dim), dtype=np.complex128)
    for j in range(k):
        f = beta[:, j].copy()
        f[:, 0] += r
        factors[:, j] = f / np.where(weak[:, j], 1.0, C[:, j])[:, None]
    # one weak factor: from R and the others
    one_weak = weak.sum(axis=-1) == 1
    for row in np.nonzero(one_weak)[0]:
        j = int(np.argmax(weak[row]))
        others = np.zeros((1, alg.dim), dtype=np.complex128)
        others[0, 0] = 1.0
        for l in range(k):
            if l != j:
                others = _complex_product(alg, "gp", others, factors[row : row + 1, l])
        rev = others.copy()
        rev *= alg._reverse_sign
        factors[row, j] = _complex_product(alg, "gp", rev, R[row : row + 1].astype(np.complex128))[0]
    parts = np.zeros((rows, alg.dim), dtype=np.complex128)
    plane_logs = np.zeros((rows, k, alg.dim), dtype=np.complex128)
    for j in range(k):
        c = factors[:, j, 0]
        b = alg.grade(factors[:, j].real, 2) + 1j * alg.grade(factors[:, j].imag, 2)
        plane_logs[:, j] = _acosh_ratio(c)[:, None] * b
        parts = parts + plane_logs[:, j]
    B = parts.real
    B = np.where(np.isfinite(B), B, 0.0)
    # a factor product of -R: move a rotation (lambda < 0) by pi
    back = exp(alg, B)
    flip = np.sum(back * R, axis=-1) < 0
    for row in np.nonzero(flip)[0]:
        lam = mu[row]
        rot = [j for j in range(k) if abs(lam[j].imag) == 0 and lam[j].real < 0]
        if rot:
            j = max(rot, key=lambda m: -lam[m].real)
            b = plane_logs[row, j].real
            size_b = np.sqrt(max(-alg.scalar_product(b, b), 0.0))
            if size_b > 0:
                B[row] = B[row] - np.pi * b / size_b
    bad = grouped | (weak.sum(axis=-1) > 1) | ~np.isfinite(parts.real).all(axis=-1)
    return _checked_log(alg, R, B, bad)


#: log() accepts B when |exp(B) - R| <= this times max(1, max |R|) (a failed decomposition is off
#: by order one; large boosts lose digits in the decomposition of <R>_2).
LOG_CHECK_TOL = 1e-6


def _checked_log(alg, R, B, bad=None):
    back = exp(alg, B)
    err = np.abs(back - R).max(axis=-1) / np.maximum(1.0, np.abs(R).max(axis=-1))
    fail = err > LOG_CHECK_TOL
    if bad is not None:
        fail = fail | (bad & (err > 1e-12))
    if np.any(fail):
        raise ValueError(
            f"{int(np.sum(fail))} of {fail.size} rotors have no logarithm found by the invariant "
            f"decomposition in {alg!r} (largest |exp(log R) - R| = {float(err.max()):.3g}): a boost times -1 "
            f"has none, and a rotation by pi or coinciding invariants leave the planes undetermined"
        )
    return B


def algebra_log(alg, R) -> np.ndarray:
    """:meth:`Algebra.log` for signatures that are not Euclidean: a bivector with exp(B) = R."""
    R = alg._mv(R, "R")
    dtype = R.dtype
    flat = R.reshape(-1, alg.dim).astype(np.float64)
    odd = np.abs(flat * (alg.grades % 2 == 1)).max(axis=-1, initial=0.0)
    check = alg.gp(flat, alg.reverse(flat))
    check[:, 0] -= 1
    size = np.maximum(1.0, (flat * flat).sum(axis=-1))
    tol = 1e3 * np.finfo(dtype).eps * max(1, alg.n)
    bad = (np.abs(check).max(axis=-1, initial=0.0) > tol * size) | (odd > tol * np.sqrt(size))
    if np.any(bad):
        raise ValueError(
            f"R must be a rotor (even, R ~R = 1) of {alg!r}; {int(np.sum(bad))} of {bad.size} are not. "
            f"Build rotors with alg.exp(B)"
        )
    return log(alg, flat).astype(dtype).reshape(R.shape)
