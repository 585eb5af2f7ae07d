r"""Invariant decomposition of bivectors in Euclidean Cl(n) (numpy, on arrays).

The maps built from it (exp, log, rotation and sandwich matrices) are in
:mod:`galinear.core.rotor_maps`; the power method's contract (start vectors, stop tolerance, most
steps, the last plane) comes from the rotor specification (:mod:`galinear._generated.rotor_spec`).

Conventions (as everywhere in galinear): a bivector :math:`B = \sum_{i<j} b_{ij} e_i \wedge e_j` has
the skew matrix :math:`A` with ``A[i, j] = b_ij``; the left contraction of a vector by B is
:math:`v \rfloor B = -A v`; a simple :math:`b` (:math:`b^2 = -|b|^2`) has
:math:`\exp b = \cos|b| + \frac{\sin|b|}{|b|} b`, and the vector part of
:math:`e^B x e^{-B}` is ``expm(2 A)``.

Invariant decomposition (Roelfs and De Keninck 2021): every bivector is a sum of at most
k = floor(n/2) simple bivectors on mutually orthogonal planes, which therefore commute, so
:math:`\exp B = \prod_j \exp b_j`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from math import comb

import numpy as np

from galinear import blades
from galinear._generated import rotor_spec

__all__ = [
    "Decomposition",
    "skew_matrix",
    "wedge",
    "decompose_exact",
    "decompose_power",
    "check_simple",
    "default_start",
]


# ---------------------------------------------------------------------------- skew matrices
def skew_matrix(n: int, b: np.ndarray) -> np.ndarray:
    """Skew matrices ``A[..., i, j] = b_ij = -A[..., j, i]`` from bivector coefficients (..., C(n,2))."""
    pairs = blades.bivector_pairs(n)
    A = np.zeros(b.shape[:-1] + (n, n), dtype=b.dtype)
    A[..., pairs[:, 0], pairs[:, 1]] = b
    A[..., pairs[:, 1], pairs[:, 0]] = -b
    return A


def wedge(n: int, u: np.ndarray, w: np.ndarray) -> np.ndarray:
    r"""Coefficients of :math:`u \wedge w` (always simple): :math:`u_i w_j - u_j w_i`, shape (..., C(n,2))."""
    pairs = blades.bivector_pairs(n)
    i, j = pairs[:, 0], pairs[:, 1]
    return u[..., i] * w[..., j] - u[..., j] * w[..., i]


def _scale(b: np.ndarray) -> np.ndarray:
    """Per-row scale max|b_ij| (1 for zero rows) so that the linear algebra sees entries of order one."""
    s = np.max(np.abs(b), axis=-1, keepdims=True) if b.shape[-1] else np.ones(b.shape[:-1] + (1,), b.dtype)
    return np.where(s > 0, s, 1).astype(b.dtype)


# ---------------------------------------------------------------------------- decompositions
@dataclass
class Decomposition:
    r"""Simple parts of bivectors: :math:`B = \sum_j b_j` (+ ``residual`` for the power method).

    Attributes
    ----------
    n : int
    bivectors : ndarray (..., k, C(n,2))
        The parts :math:`b_j = \theta_j\, u_j \wedge w_j`, each exactly a wedge of two vectors.
    angles : ndarray (..., k)
        :math:`\theta_j = |b_j| \ge 0`.
    planes : ndarray (..., k, 2, n)
        Orthonormal :math:`(u_j, w_j)` spanning each plane (unspecified where the angle is 0;
        for the power method the last plane comes from one power step on the remainder).
    residual : ndarray (..., C(n,2))
        :math:`B - \sum_j b_j`, zero up to rounding for both methods.
    start, iterations, converged : ndarray or None
        Power method only: final vectors (..., k, n), to pass back as ``start`` (warm start);
        the number of power steps per plane (..., k); whether the stop test was met (..., k).
    """

    n: int
    bivectors: np.ndarray
    angles: np.ndarray
    planes: np.ndarray
    residual: np.ndarray
    start: np.ndarray | None = None
    iterations: np.ndarray | None = None
    converged: np.ndarray | None = None
    method: str = field(default="exact")

    @property
    def k(self) -> int:
        return self.n // 2

    def factors(self) -> tuple[np.ndarray, np.ndarray]:
        r"""Vector pairs (V, W), each (..., k, n), with :math:`b_j = v_j \wedge w_j`.

        :math:`v_j = \theta_j u_j`, :math:`w_j = w_j`: the rotor-factor format handed to the
        sandwich maps (the rotor-factor convention of docs/nn.md).
        """
        return self.angles[..., None] * self.planes[..., 0, :], self.planes[..., 1, :].copy()

    def parts(self) -> np.ndarray:
        """The parts as full multivectors, shape (..., k, 2**n)."""
        dim = 2**self.n
        out = np.zeros(self.bivectors.shape[:-1] + (dim,), dtype=self.bivectors.dtype)
        out[..., 1 + self.n : 1 + self.n + comb(self.n, 2)] = self.bivectors
        return out


def decompose_exact(n: int, b: np.ndarray) -> Decomposition:
    r"""Invariant decomposition from the eigen-structure of the skew matrix.

    :math:`iA` is Hermitian with eigenvalues :math:`\pm\theta_j` (and 0 for odd n). A unit
    eigenvector :math:`z = x + i y` of :math:`+\theta_j` satisfies :math:`A x = \theta_j y`,
    :math:`A y = -\theta_j x`, :math:`x \perp y`, :math:`|x| = |y| = 1/\sqrt 2`, so
    :math:`u = \sqrt 2\, y`, :math:`w = \sqrt 2\, x` are orthonormal and the plane's part is
    :math:`\theta_j\, u \wedge w` (its skew matrix is :math:`A (u u^T + w w^T)`). Eigenvectors of a
    repeated eigenvalue (equal angles) are orthonormal, hence give orthogonal planes; zero angles
    give zero parts. Parts come sorted by decreasing angle.
    """
    k = n // 2
    shape = b.shape[:-1]
    if k == 0:
        empty = np.zeros(shape + (0,), b.dtype)
        return Decomposition(n, np.zeros(shape + (0, b.shape[-1]), b.dtype), empty,
                             np.zeros(shape + (0, 2, n), b.dtype), b.copy())
    scale = _scale(b)
    A = skew_matrix(n, b / scale)
    complex_dtype = np.complex64 if b.dtype == np.float32 else np.complex128
    theta, Z = np.linalg.eigh(1j * A.astype(complex_dtype))
    theta = np.maximum(theta[..., ::-1][..., :k], 0).astype(b.dtype)
    z = Z[..., :, ::-1][..., :, :k]
    root2 = np.asarray(np.sqrt(2.0), dtype=b.dtype)
    u = np.swapaxes(z.imag, -1, -2).astype(b.dtype) * root2  # (..., k, n)
    w = np.swapaxes(z.real, -1, -2).astype(b.dtype) * root2
    parts = theta[..., None] * wedge(n, u, w) * scale[..., None, :]
    angles = theta * scale
    residual = b - parts.sum(axis=-2)
    planes = np.stack([u, w], axis=-2)
    return Decomposition(n, parts, angles, planes, residual)


def default_start(n: int, dtype=np.float64) -> np.ndarray:
    """Fixed start vectors (k, n) of the rotor spec: (1, ..., 1) + e_{2j}, normalised."""
    v = np.array(rotor_spec.power_start(n), dtype=np.float64).reshape(n // 2, n)
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    return v.astype(dtype)


def decompose_power(n: int, b: np.ndarray, start=None, tol=None,
                    max_iter: int = rotor_spec.POWER_MAX_ITER, fallback: bool = True) -> Decomposition:
    r"""Invariant decomposition by power iteration with deflation (Pence et al. 2025, Alg. 1-2).

    For each of the first k - 1 planes: repeat (at least once, at most ``max_iter`` times, with
    the stop test per row) :math:`v \leftarrow \mathrm{normalize}((v \rfloor R) \rfloor R)
    = \mathrm{normalize}(A_R^2 v)`, stopping when :math:`|v_{new} + v| <` ``tol`` (:math:`A^2`
    is negative semi-definite, so a converged vector flips sign at every step); then
    :math:`w = v \rfloor R = -A_R v`, :math:`b = v \wedge w` and :math:`R \leftarrow R - b`.
    The last part is taken by one power step on the remainder, so it too is exactly a wedge
    :math:`v \wedge w` (the contract of :mod:`galinear._generated.rotor_spec`).

    Why the remainder is simple even before convergence (any n): the deflated skew matrix
    :math:`A' = A - A v v^T - v v^T A` annihilates v and everything A annihilates, and its range
    lies in that of A; after one step v lies in the range of A, so the null space grows by one
    and, a skew matrix having even rank, the rank drops by two. After k - 1 deflations the rank
    is at most 2k - 2(k - 1) = 2: the remainder is simple, and one power step recovers it. (Its support alone, an
    (n-k+1)-dimensional subspace, would not prove it for n >= 5; the rank parity does.) So the
    parts are always simple and sum to B; the product of their exponentials is a unit rotor;
    only at convergence do the parts commute and give exp(B).

    If :math:`A_R^2 v` vanishes while R does not (a start vector orthogonal to the range of R),
    the iteration restarts from the largest column of :math:`A_R`, which lies in its range.

    Parameters
    ----------
    n : int
    b : ndarray (..., C(n,2))
    start : array_like (..., k, n), optional
        Warm-start vectors (e.g. ``previous.start``); default :func:`default_start`. The last
        row is used only for the single step that takes the plane of the remainder.
    tol : float, optional
        Stop tolerance; default ``rotor_spec.POWER_TOL`` of the dtype (1e-10 float64, 1e-5 float32).
    max_iter : int
        Most power steps per plane (>= 1).
    fallback : bool
        True (the converged decomposition is wanted): rows where some plane met ``max_iter``
        before the stop test take the planes of :func:`decompose_exact` (their ``converged``
        flags stay False, so the caller can still see that the iteration did not converge).
        False: the parts of the finite iteration, whatever they are.

    Returns
    -------
    Decomposition
        ``residual`` is :math:`B - \sum_j b_j` (zero up to rounding); ``iterations`` and
        ``converged`` per plane (the last plane takes no iteration and counts as converged).
    """
    if max_iter < 1:
        raise ValueError(f"max_iter must be at least 1 (the method takes at least one step), got {max_iter}")
    dtype = b.dtype
    k = n // 2
    shape = b.shape[:-1]
    if tol is None:
        tol = rotor_spec.POWER_TOL[np.dtype(dtype).name]
    if start is None:
        start = default_start(n, dtype)
    start = np.asarray(start, dtype=dtype)
    if start.ndim < 2 or start.shape[-2:] != (k, n):
        raise ValueError(f"start must have shape (..., k, n) = (..., {k}, {n}), got {start.shape}")
    if not np.isfinite(start).all():
        raise ValueError("start contains NaN or infinity")
    if np.any(np.linalg.norm(start, axis=-1) == 0):
        raise ValueError("start vectors must be non-zero")
    start = np.broadcast_to(start, shape + (k, n))
    if k == 0:
        dec = decompose_exact(n, b)
        dec.start, dec.iterations = start.copy(), np.zeros(shape + (0,), np.int64)
        dec.converged, dec.method = np.ones(shape + (0,), bool), "power"
        return dec
    rows = int(np.prod(shape, dtype=np.int64))
    flat_b = b.reshape(rows, -1)
    scale = _scale(flat_b)
    R = skew_matrix(n, flat_b / scale)
    V = np.array(start.reshape(rows, k, n), dtype=dtype)
    parts = np.zeros((rows, k, flat_b.shape[-1]), dtype)
    planes = np.zeros((rows, k, 2, n), dtype)
    iterations = np.zeros((rows, k), np.int64)
    converged = np.ones((rows, k), bool)
    vanish = rotor_spec.POWER_VANISH * np.finfo(dtype).eps
    tiny = vanish**2
    for level in range(k):
        last = level == k - 1
        v = V[:, level, :] / np.linalg.norm(V[:, level, :], axis=-1, keepdims=True)
        active = np.ones(rows, bool)
        restarted = np.zeros(rows, bool)
        for _ in range(rotor_spec.POWER_LAST_PLANE_STEPS if last else max_iter):
            idx = np.nonzero(active)[0]
            if idx.size == 0:
                break
            Ra = R[idx]
            y = np.einsum("rij,rj->ri", Ra, np.einsum("rij,rj->ri", Ra, v[idx]))
            ny = np.linalg.norm(y, axis=-1)
            vanished = ny <= tiny
            if np.any(vanished):  # restart from the largest column of R (in its range) once
                columns = np.linalg.norm(Ra, axis=-2)
                retry = vanished & (columns.max(axis=-1) > vanish) & ~restarted[idx]
                if np.any(retry):
                    rr = idx[retry]
                    col = Ra[retry, :, np.argmax(columns[retry], axis=-1)]
                    v[rr] = col / np.linalg.norm(col, axis=-1, keepdims=True)
                    restarted[rr] = True
                    iterations[rr, level] += 1
                    vanished_rows = idx[vanished & ~retry]
                    active[vanished_rows] = False
                    keep = ~vanished
                    idx, y, ny = idx[keep], y[keep], ny[keep]
                    if idx.size == 0:
                        continue
                else:
                    active[idx[vanished]] = False
                    keep = ~vanished
                    idx, y, ny = idx[keep], y[keep], ny[keep]
                    if idx.size == 0:
                        continue
            v_new = y / ny[:, None]
            done = np.linalg.norm(v_new + v[idx], axis=-1) < tol
            v[idx] = v_new
            iterations[idx, level] += 1
            active[idx[done]] = False
        if not last:
            converged[:, level] = ~active
        w = -np.einsum("rij,rj->ri", R, v)  # v _| R
        theta = np.linalg.norm(w, axis=-1)
        planes[:, level, 0] = v
        planes[:, level, 1] = w / np.where(theta > 0, theta, 1)[:, None]
        part = wedge(n, v, w)  # the last remainder has rank <= 2 (see the notes): v ^ w is all of it
        parts[:, level] = part
        if not last:
            R = R - skew_matrix(n, part)
        V[:, level, :] = v
    if fallback and not converged.all():
        rows_left = ~converged.all(axis=-1)
        exact = decompose_exact(n, flat_b[rows_left] / scale[rows_left])
        parts[rows_left] = exact.bivectors
        planes[rows_left] = exact.planes
    angles = np.linalg.norm(parts, axis=-1) * scale  # before scaling back: no overflow of |b|^2
    parts *= scale[:, None, :]
    residual = flat_b - parts.sum(axis=-2)
    return Decomposition(
        n,
        parts.reshape(shape + parts.shape[1:]),
        angles.reshape(shape + (k,)),
        planes.reshape(shape + (k, 2, n)),
        residual.reshape(shape + residual.shape[1:]),
        start=V.reshape(shape + (k, n)),
        iterations=iterations.reshape(shape + (k,)),
        converged=converged.reshape(shape + (k,)),
        method="power",
    )


def check_simple(n: int, b: np.ndarray) -> None:
    r"""ValueError unless every bivector is simple (:math:`b \wedge b = 0`, i.e. rank(A) <= 2)."""
    if n < 4:
        return
    scale = _scale(b)
    A = skew_matrix(n, b / scale)
    # b ^ b = 0  <=>  every 4x4 Pfaffian vanishes  <=>  A_ij A_kl - A_ik A_jl + A_il A_jk = 0
    t = (
        np.einsum("...ij,...kl->...ijkl", A, A)
        - np.einsum("...ik,...jl->...ijkl", A, A)
        + np.einsum("...il,...jk->...ijkl", A, A)
    )
    err = np.max(np.abs(t)) if t.size else 0.0
    # the rotor spec's SIMPLE_RTOL (about sqrt(eps)): parts split off a larger bivector carry
    # rounding of order eps |B| / |b|, while a bivector that is not simple has |b ^ b| / |b|^2 of order one.
    if err > rotor_spec.SIMPLE_RTOL[np.dtype(b.dtype).name]:
        raise ValueError(
            f"exp(method='simple') needs a simple bivector (B ^ B = 0), but |B ^ B| / |B|^2 reaches "
            f"{float(err):.3g}; use method='decompose' for a general bivector"
        )
