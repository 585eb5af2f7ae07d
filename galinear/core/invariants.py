r"""Invariants of bivectors in every signature Cl(p, q, r) and the parts they determine.

With :math:`W_m = B^{\wedge m}/m!`, :math:`\sigma_m = \langle W_m W_m \rangle_0` are the
elementary symmetric polynomials of the squares :math:`\lambda_j = b_j^2` of the commuting
simple parts, and :math:`Y_m = \langle W_m W_{m+1} \rangle_2` give each part by Lagrange
interpolation, :math:`b_j = Z(\lambda_j) / Q'(\lambda_j)` (Roelfs and De Keninck, "Graded
Symmetry Groups: Plane and Simple", 2023; the derivation is in :mod:`galinear.core.signatures`,
which builds the exponential, the decomposition and the logarithm on these functions).
Arrays are rows of full multivectors (rows, 2**n), float64 in, complex128 parts out.
"""
from __future__ import annotations

from math import comb

import numpy as np

__all__ = ["invariants", "left_matrix", "MERGE_TOL"]

#: Invariants closer than this (relative to max(1, max |lambda|) of the row, after scaling the
#: bivector to largest coefficient 1) count as equal: their rows go to
#: :func:`galinear.core.signatures.exp_series`.
MERGE_TOL = 1e-6


# ---------------------------------------------------------------------------- helpers
def _complex_product(alg, kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Product of complex multivectors through the real kernels (4 products, 1 when both are real)."""
    product = getattr(alg, kind)
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    a_real, b_real = not np.any(ai), not np.any(bi)
    re = product(ar, br)
    if a_real and b_real:
        return re.astype(np.complex128)
    im = np.zeros_like(re)
    if not b_real:
        im = im + product(ar, bi)
    if not a_real:
        im = im + product(ai, br)
    if not (a_real or b_real):
        re = re - product(ai, bi)
    return re + 1j * im


def left_matrix(alg, x: np.ndarray) -> np.ndarray:
    """(..., 2**n, 2**n) matrix of y -> x y (column j is x times the j-th shortlex blade)."""
    eye = np.eye(alg.dim, dtype=x.dtype)
    return np.swapaxes(alg.gp(x[..., None, :], eye), -1, -2)


def _grade2(alg, x: np.ndarray) -> np.ndarray:
    n = alg.n
    return x[..., 1 + n : 1 + n + comb(n, 2)]


def _full(alg, b: np.ndarray) -> np.ndarray:
    n = alg.n
    out = np.zeros(b.shape[:-1] + (alg.dim,), dtype=b.dtype)
    out[..., 1 + n : 1 + n + comb(n, 2)] = b
    return out


# ---------------------------------------------------------------------------- invariants
def invariants(alg, B: np.ndarray):
    r"""Elementary symmetric functions and interpolation data of bivectors (rows, 2**n), float64.

    Returns ``(sigma, Y)``: :math:`\sigma_m = \langle W_m W_m\rangle_0`, shape (rows, k+1), and
    :math:`Y_m = \langle W_m W_{m+1}\rangle_2`, shape (rows, k, 2**n), with
    :math:`W_m = B^{\wedge m}/m!`.
    """
    k = alg.n // 2
    W = [np.zeros_like(B), B]
    W[0][..., 0] = 1.0
    for m in range(2, k + 2):
        W.append(alg.op(W[-1], B) / m if m <= k else np.zeros_like(B))
    sigma = np.stack([alg.scalar_product(W[m], W[m]) for m in range(k + 1)], axis=-1)
    Y = np.stack([alg.grade(alg.gp(W[m], W[m + 1]), 2) for m in range(k)], axis=-2)
    return sigma, Y


def _roots(sigma: np.ndarray) -> np.ndarray:
    """Roots (rows, k) of sum_m (-1)^m sigma_m x^(k-m) (monic), complex, via companion matrices."""
    rows, k1 = sigma.shape
    k = k1 - 1
    if k == 1:
        return sigma[:, 1:2].astype(np.complex128)
    coeffs = np.array([(-1) ** m for m in range(k + 1)]) * sigma  # x^k + c1 x^(k-1) + ...
    C = np.zeros((rows, k, k))
    C[:, 0, :] = -coeffs[:, 1:]
    C[:, np.arange(1, k), np.arange(k - 1)] = 1.0
    lam = np.linalg.eigvals(C).astype(np.complex128)
    # one Newton step on the polynomial polishes the eigenvalue rounding
    poly = coeffs.astype(np.complex128)
    p = np.zeros_like(lam)
    dp = np.zeros_like(lam)
    for c in poly.T:
        dp = dp * lam + p
        p = p * lam + c[:, None]
    step = np.where(np.abs(dp) > 1e-12 * np.maximum(1, np.abs(lam)) ** (k - 1), p / np.where(dp == 0, 1, dp), 0)
    lam = lam - step
    # real roots stay real: drop imaginary rounding below the merge scale
    scale = np.maximum(1.0, np.abs(lam).max(axis=-1, keepdims=True))
    lam = np.where(np.abs(lam.imag) <= 1e-12 * scale, lam.real + 0j, lam)
    return lam


def _merge(lam: np.ndarray):
    """Per row and root: index of the first equal root (within MERGE_TOL) and group sizes."""
    rows, k = lam.shape
    scale = np.maximum(1.0, np.abs(lam).max(axis=-1, keepdims=True))[..., None]
    close = np.abs(lam[:, :, None] - lam[:, None, :]) <= MERGE_TOL * scale
    first = np.argmax(close, axis=-1)  # (rows, k)
    size = np.stack([(first == j).sum(axis=-1) for j in range(k)], axis=-1)
    return first, size


def _parts(alg, B: np.ndarray):
    """Scaled data for rows of bivectors B (rows, dim) float64: (scale, lam, parts, first, size).

    ``parts`` (rows, k, dim) complex: b_j = Z(lam_j) / Q'(lam_j) for distinct roots; rows with a
    repeated root get their parts from the other roots and the group's sum in its first slot.
    """
    rows = B.shape[0]
    k = alg.n // 2
    scale = np.abs(B).max(axis=-1)
    scale = np.where(scale > 0, scale, 1.0)
    Bs = B / scale[:, None]
    sigma, Y = invariants(alg, Bs)
    lam = _roots(sigma)
    first, size = _merge(lam)
    parts = np.zeros((rows, k, alg.dim), dtype=np.complex128)
    for j in range(k):
        mu = lam[:, j]
        # Z(mu) = sum_m (-1)^m mu^(k-1-m) Y_m
        coef = np.stack([(-1) ** m * mu ** (k - 1 - m) for m in range(k)], axis=-1)  # (rows, k)
        Z = np.einsum("rm,rmd->rd", coef, Y.astype(np.complex128))
        # Q'(mu) over the roots not merged with mu (a group of equal roots divides by the others only)
        dQ = np.ones(rows, dtype=np.complex128)
        for l in range(k):
            other = first[:, l] != first[:, j]
            dQ = dQ * np.where(other, mu - lam[:, l], 1.0)
        lead = (first[:, j] == j) & (size[:, j] == 1)
        parts[:, j] = np.where(lead[:, None], Z / np.where(dQ == 0, 1, dQ)[:, None], 0)
    grouped = np.any(size > 1, axis=-1)
    if np.any(grouped):
        # the group's sum is what the other parts leave over
        for r in np.nonzero(grouped)[0]:
            rest = Bs[r] - parts[r].sum(axis=0)
            for j in range(k):
                if first[r, j] == j and size[r, j] > 1:
                    parts[r, j] = rest
                    break
    return scale, lam * scale[:, None] ** 2, parts * scale[:, None, None], first, size
