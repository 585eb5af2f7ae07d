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

from galinear.core.meetjoin import blade_vectors

__all__ = ["invariants", "left_matrix", "MERGE_TOL", "commuting_rotation_plane", "quarter_turn_pair"]

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


def _parts(alg, B: np.ndarray, scaled: bool = False):
    """Scaled data for rows of bivectors B (rows, dim) float64: (scale, lam, parts, first, size).

    ``scaled``: return lam and parts of B / scale (largest coefficient 1), which cannot overflow.

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
    if scaled:
        return scale, lam, parts, first, size
    return scale, lam * scale[:, None] ** 2, parts * scale[:, None, None], first, size


# ---------------------------------------------------------------------------- log weights
# F(z) = artanh(sqrt z) / sqrt z = sum_m z^m / (2m + 1), analytic off [1, inf); series for |z| < 1e-2
_F_SERIES = np.array([1.0 / (2 * m + 1) for m in range(10)])


def _artanh_ratio(z: np.ndarray, w: np.ndarray | None = None) -> np.ndarray:
    r""":math:`F(z) = \operatorname{artanh}(\sqrt z)/\sqrt z` (complex; :math:`\arctan(\sqrt{-z})/\sqrt{-z}` for z < 0).

    ``w``: :math:`1 - z` when known more accurately than z (large boosts, z near 1); then
    :math:`F = (\log(1 + \sqrt z) - \tfrac12 \log w)/\sqrt z` for real z in (1/2, 1).
    """
    z = np.asarray(z, dtype=np.complex128)
    w = 1 - z if w is None else np.asarray(w, dtype=np.complex128)
    out = np.empty_like(z)
    small = np.abs(z) < 1e-2
    out[small] = np.polynomial.polynomial.polyval(z[small], _F_SERIES)
    boost = ~small & (z.imag == 0) & (w.imag == 0) & (z.real > 0.5) & (w.real > 0)
    root = np.sqrt(z[boost].real)
    out[boost] = (np.log1p(root) - 0.5 * np.log(w[boost].real)) / root
    rest = ~small & ~boost
    root = np.sqrt(z[rest])
    out[rest] = np.arctanh(root) / root
    return out


def _artanh_ratio_slope(z: np.ndarray) -> np.ndarray:
    r""":math:`F'(z) = (1/(1 - z) - F(z)) / (2z)` (series for |z| < 1e-2)."""
    z = np.asarray(z, dtype=np.complex128)
    out = np.empty_like(z)
    small = np.abs(z) < 1e-2
    out[small] = np.polynomial.polynomial.polyval(z[small], _F_SERIES[1:] * np.arange(1, 10))
    zb = z[~small]
    out[~small] = (1 / (1 - zb) - _artanh_ratio(zb)) / (2 * zb)
    return out


_GAUSS_T, _GAUSS_W = np.polynomial.legendre.leggauss(6)


def _artanh_ratio_difference(z1: np.ndarray, z2: np.ndarray, w1=None, w2=None) -> np.ndarray:
    r"""Divided difference :math:`F[z_1, z_2] = (F(z_1) - F(z_2))/(z_1 - z_2)`, stable as :math:`z_1 \to z_2`.

    Close arguments (gap below 2% of the distance to the branch point z = 1) integrate
    :math:`F'` along the segment by 6-point Gauss-Legendre (error below 1e-16 there).
    """
    z1 = np.asarray(z1, dtype=np.complex128)
    z2 = np.asarray(z2, dtype=np.complex128)
    w1 = 1 - z1 if w1 is None else np.asarray(w1, dtype=np.complex128)
    w2 = 1 - z2 if w2 is None else np.asarray(w2, dtype=np.complex128)
    gap = w2 - w1  # = z1 - z2
    close = np.abs(gap) <= 0.02 * np.minimum(np.minimum(np.abs(w1), np.abs(w2)), 1.0)
    out = np.empty_like(z1)
    far = ~close
    out[far] = (_artanh_ratio(z1[far], w1[far]) - _artanh_ratio(z2[far], w2[far])) / gap[far]
    if np.any(close):
        a, d = z2[close], gap[close]
        nodes = a[:, None] + d[:, None] * (_GAUSS_T[None, :] + 1) / 2
        out[close] = (_artanh_ratio_slope(nodes) * _GAUSS_W[None, :]).sum(axis=-1) / 2
    return out


def _asinh_ratio(x: np.ndarray) -> np.ndarray:
    r""":math:`\operatorname{asinh}(x)/x` for x >= 0 (1 - x^2/6 + 3x^4/40 below 1e-4)."""
    x = np.asarray(x, dtype=np.float64)
    small = x < 1e-4
    safe = np.where(small, 1.0, x)
    return np.where(small, 1 - x * x / 6 + 3 * x**4 / 40, np.arcsinh(safe) / safe)


def _boost_weight(mu_s: np.ndarray, r: np.ndarray, log_C: np.ndarray, scale: np.ndarray) -> np.ndarray:
    r"""h with :math:`\log(\pm(r + \beta)/C) = h\,\beta` for a boost part :math:`\beta^2 = \mu > 0`, from |C|.

    With the factor :math:`\cosh\phi + \sinh\phi\,\hat\beta`, :math:`\sinh\phi = \sqrt\mu/|C|`, so
    :math:`h = \operatorname{sign}(r)\operatorname{asinh}(\sqrt\mu/|C|)/\sqrt\mu`: no difference of
    nearly equal numbers (:math:`\operatorname{artanh}(\sqrt\mu/r)` loses every digit once
    :math:`\tanh\phi` rounds to 1, at :math:`\phi \approx 19`). Arguments are scaled so that
    nothing overflows up to the float64 limit (:math:`\phi \approx 710`): ``mu_s`` is
    :math:`\mu/s^2`, ``log_C`` is :math:`\log|C|` and the result is :math:`s\,h`, the weight of
    :math:`\beta/s`.
    """
    root = np.sqrt(mu_s)
    log_x = np.log(np.where(root > 0, root, 1.0)) + np.log(scale) - log_C  # log(sqrt(mu) / |C|)
    x = np.exp(np.minimum(log_x, 700.0))
    # asinh(x) = log x + log(1 + sqrt(1 + 1/x^2)) above x = 1e8, where x itself may not be representable
    big = log_x > np.log(1e8)
    value = np.where(big, log_x + np.log1p(np.sqrt(1 + np.exp(-2 * np.minimum(log_x, 700.0)))),
                     _asinh_ratio(np.where(big, 1.0, x)) * np.where(big, 1.0, x))
    sign = np.where(r < 0, -1.0, 1.0)
    return sign * np.where(root > 0, value / np.where(root > 0, root, 1.0), 1.0 / np.exp(log_C) * scale)


def _log_weight(mu: np.ndarray, r: np.ndarray) -> np.ndarray:
    r"""h with :math:`\log(\pm(r + \beta)/C) = h\,\beta` for a simple part :math:`\beta^2 = \mu`, :math:`C^2 = r^2 - \mu`.

    C takes the sign of r, so the factor's scalar :math:`r/C` is positive (r = 0: a quarter turn):
    :math:`h = \operatorname{sign}(r) \arctan(\sqrt{-\mu}/|r|)/\sqrt{-\mu}` for rotations (via
    atan2, exact at r = 0), :math:`F(\mu/r^2)/r` otherwise (boosts, null parts, complex
    :math:`\mu`). NaN where no such factor exists (r = 0 with :math:`\mu \ge 0`).
    """
    mu = np.asarray(mu, dtype=np.complex128)
    r = np.broadcast_to(np.asarray(r, dtype=np.float64), mu.shape)
    out = np.full(mu.shape, np.nan, dtype=np.complex128)
    rot = (mu.imag == 0) & (mu.real < 0)
    x = np.sqrt(-mu.real[rot])
    sign = np.where(r[rot] < 0, -1.0, 1.0)
    out[rot] = sign * np.arctan2(x, np.abs(r[rot])) / x
    rest = ~rot & (r != 0)
    out[rest] = _artanh_ratio(mu[rest] / r[rest] ** 2) / r[rest]
    return out


# ---------------------------------------------------------------------------- rotation planes (for log)
def _unit_rotation_plane(alg, b: np.ndarray, B: np.ndarray, tol: float):
    """b (1, dim) scaled to b^2 = -1 if it is a simple rotation plane commuting with B, else None."""
    square = float(alg.scalar_product(b, b)[0])
    if not square < -tol * tol:
        return None
    b = b / np.sqrt(-square)
    if np.abs(alg.op(b, b)).max() > 1e-8:
        return None
    if np.abs(alg.gp(B, b) - alg.gp(b, B)).max() > tol:
        return None
    return b[0]


def commuting_rotation_plane(alg, B: np.ndarray):
    r"""A simple bivector :math:`\hat b` with :math:`\hat b^2 = -1` that commutes with B (dim,), or None.

    Since :math:`e^{\pi \hat b} = -1` and :math:`\hat b` commutes with B,
    :math:`e^{B \mp \pi \hat b} = -e^{B}`. Tried in order: B's own rotation parts
    (:math:`\lambda_j < 0`), the largest first (a group of equal rotations gives
    :math:`e_i \wedge (e_i \rfloor G)`, an invariant plane of an isoclinic group); then a plane of
    vectors u, w with :math:`u \rfloor B = w \rfloor B = 0` (then :math:`u \wedge w` commutes with B)
    on which the metric is definite, from the eigenvectors of the metric on that null space.
    """
    n = alg.n
    B = np.asarray(B, dtype=np.float64)[None]
    tol = 1e-9 * max(1.0, float(np.abs(B).max()))
    candidates = []
    _, lam, parts, first, size = _parts(alg, B)
    basis = alg.vector(np.eye(n))
    for j in range(lam.shape[1]):
        mu = lam[0, j]
        if first[0, j] != j or mu.imag != 0 or not mu.real < 0:
            continue
        if size[0, j] == 1:
            candidates.append((-mu.real, parts[0, j].real[None]))
        else:  # an isoclinic group: every vector lies in an invariant plane
            G = parts[0, j].real[None]
            for i in range(n):
                w = alg.grade(alg.lc(basis[i : i + 1], G), 1)
                candidates.append((-mu.real, alg.op(basis[i : i + 1], w)))
    for _, b in sorted(candidates, key=lambda c: -c[0]):
        plane = _unit_rotation_plane(alg, b, B, tol)
        if plane is not None:
            return plane
    # vectors u with u _| B = 0 (coefficients), and the metric on them
    M = alg.lc(basis, B)[:, 1 : 1 + n]  # row i: e_i _| B
    _, s, Vt = np.linalg.svd(M.T)
    U = Vt[np.concatenate([s, np.zeros(n - s.size)]) <= tol]
    if U.shape[0] < 2:
        return None
    g, Q = np.linalg.eigh((U * np.asarray(alg.metric, dtype=np.float64)) @ U.T)
    vectors = (Q.T @ U) / np.sqrt(np.maximum(np.abs(g), 1e-300))[:, None]
    for chosen in (np.nonzero(g > 1e-6)[0], np.nonzero(g < -1e-6)[0]):
        if chosen.size >= 2:
            two = chosen[np.argsort(-np.abs(g[chosen]), kind="stable")[:2]]
            b = alg.op(alg.vector(vectors[two[0]]), alg.vector(vectors[two[1]]))[None]
            plane = _unit_rotation_plane(alg, b, B, tol)
            if plane is not None:
                return plane
    return None


def quarter_turn_pair(alg, Q4: np.ndarray):
    r"""A bivector :math:`\tfrac{\pi}{2}(b_1 + b_2)` with :math:`\exp = b_1 b_2 = ` the 4-blade Q4 (1, dim), or None.

    The rotor of two commuting quarter turns is the 4-blade :math:`b_1 b_2` of unit rotation planes;
    the planes are not determined by it (any pair of orthogonal planes of its subspace whose
    metric is definite on each will do): take the metric-orthonormal eigenvectors of the metric on
    the blade's vectors, pair same-signed ones, and orient :math:`b_2` so that
    :math:`b_1 \wedge b_2` has the orientation of Q4.
    """
    V = blade_vectors(alg, Q4[0], tol=1e-6)
    if V is None or V.shape[0] != 4:
        return None
    g, Q = np.linalg.eigh((V * np.asarray(alg.metric, dtype=np.float64)) @ V.T)
    if np.any(np.abs(g) < 1e-6):
        return None
    order = np.concatenate([np.nonzero(g > 0)[0], np.nonzero(g < 0)[0]])
    if np.sum(g > 0) % 2:
        return None
    u = alg.vector((Q.T @ V)[order] / np.sqrt(np.abs(g[order]))[:, None])
    b1 = alg.op(u[0:1], u[1:2])
    b2 = alg.op(u[2:3], u[3:4])
    if np.sum(alg.op(b1, b2) * Q4) < 0:
        b2 = -b2
    return (np.pi / 2) * (b1 + b2)[0]
