r"""Rotor maths in Euclidean Cl(n): invariant decomposition, exp, log, rotation and sandwich matrices.

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
from galinear._numba import jit
from galinear.core.products import reorder_sign

__all__ = [
    "Decomposition",
    "skew_matrix",
    "bivector_from_skew",
    "wedge",
    "decompose_exact",
    "decompose_power",
    "check_simple",
    "rotor_from_parts",
    "rotor_log",
    "rotation_matrix",
    "sandwich_matrix",
]


# ---------------------------------------------------------------------------- skew matrices
def skew_matrix(n: int, b: np.ndarray) -> np.ndarray:
    """Skew matrices ``A[..., i, j] = b_ij = -A[..., j, i]`` from bivector coefficients (..., C(n,2))."""
    pairs = blades.bivector_pairs(n)
    A = np.zeros(b.shape[:-1] + (n, n), dtype=b.dtype)
    A[..., pairs[:, 0], pairs[:, 1]] = b
    A[..., pairs[:, 1], pairs[:, 0]] = -b
    return A


def bivector_from_skew(n: int, A: np.ndarray) -> np.ndarray:
    """Bivector coefficients (..., C(n,2)) from the upper triangle of skew matrices (..., n, n)."""
    pairs = blades.bivector_pairs(n)
    return np.ascontiguousarray(A[..., pairs[:, 0], pairs[:, 1]])


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
    """Fixed start vectors (k, n) for the power method: unit rows of a seeded Gaussian matrix."""
    k = n // 2
    v = np.random.default_rng(20250711).standard_normal((max(k, 1), max(n, 1)))[:k, :n]
    v /= np.linalg.norm(v, axis=-1, keepdims=True)
    return v.astype(dtype)


_DEFAULT_TOL = {np.dtype(np.float64): 1e-10, np.dtype(np.float32): 1e-5}


def decompose_power(n: int, b: np.ndarray, start=None, tol=None, max_iter: int = 200) -> Decomposition:
    r"""Invariant decomposition by power iteration with deflation (Pence et al. 2025, Alg. 1-2).

    For each of the first k - 1 planes: repeat (at least once, at most ``max_iter`` times, with
    the stop test per row) :math:`v \leftarrow \mathrm{normalize}((v \rfloor R) \rfloor R)
    = \mathrm{normalize}(A_R^2 v)`, stopping when :math:`|v_{new} + v| <` ``tol`` (:math:`A^2`
    is negative semi-definite, so a converged vector flips sign at every step); then
    :math:`w = v \rfloor R = -A_R v`, :math:`b = v \wedge w` and :math:`R \leftarrow R - b`.
    The remainder is the last part.

    Why the remainder is simple even before convergence (any n): the deflated skew matrix
    :math:`A' = A - A v v^T - v v^T A` annihilates v and everything A annihilates, and its range
    lies in that of A; after one step v lies in the range of A, so the null space grows by one
    and, a skew matrix having even rank, the rank drops by two. After k - 1 deflations the rank
    is at most 2k - 2(k - 1) = 2: the remainder is simple. (Its support alone, an
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
        row is used only for the single step that gives the plane vectors of the remainder.
    tol : float, optional
        Stop tolerance; default 1e-10 (float64) or 1e-5 (float32).
    max_iter : int
        Most power steps per plane (>= 1).

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
        tol = _DEFAULT_TOL[np.dtype(dtype)]
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
    tiny = (64 * np.finfo(dtype).eps) ** 2
    for level in range(k):
        last = level == k - 1
        v = V[:, level, :] / np.linalg.norm(V[:, level, :], axis=-1, keepdims=True)
        active = np.ones(rows, bool)
        restarted = np.zeros(rows, bool)
        for _ in range(1 if last else max_iter):
            idx = np.nonzero(active)[0]
            if idx.size == 0:
                break
            Ra = R[idx]
            y = np.einsum("rij,rj->ri", Ra, np.einsum("rij,rj->ri", Ra, v[idx]))
            ny = np.linalg.norm(y, axis=-1)
            vanished = ny <= tiny
            if np.any(vanished):  # restart from the largest column of R (in its range) once
                columns = np.linalg.norm(Ra, axis=-2)
                retry = vanished & (columns.max(axis=-1) > 64 * np.finfo(dtype).eps) & ~restarted[idx]
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
        if last:  # the remainder (rank <= 2, see the notes) is the last part
            parts[:, level] = bivector_from_skew(n, R)
        else:
            part = wedge(n, v, w)
            parts[:, level] = part
            R = R - skew_matrix(n, part)
        V[:, level, :] = v
    parts *= scale[:, None, :]
    angles = np.linalg.norm(parts, axis=-1)
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
    # sqrt(eps): parts split off a larger bivector carry rounding of order eps |B| / |b|, while a
    # bivector that is not simple has |b ^ b| / |b|^2 of order one.
    if err > np.sqrt(np.finfo(b.dtype).eps):
        raise ValueError(
            f"exp(method='simple') needs a simple bivector (B ^ B = 0), but |B ^ B| / |B|^2 reaches "
            f"{float(err):.3g}; use method='decompose' for a general bivector"
        )


# ---------------------------------------------------------------------------- numba kernels
@jit
def _rotor_chain(parts, pi, pj, out):  # pragma: no cover - compiled
    """out[r] = prod_j exp(parts[r, j]) (j = 0 leftmost), in bitmask order; parts (rows, k, P)."""
    rows, k, npairs = parts.shape
    dim = out.shape[1]
    for r in range(rows):
        x = np.zeros(dim, dtype=out.dtype)
        y = np.zeros(dim, dtype=out.dtype)
        x[0] = 1.0
        for j in range(k):
            sq = 0.0
            for p in range(npairs):
                sq += parts[r, j, p] * parts[r, j, p]
            theta = np.sqrt(sq)
            c = np.cos(theta)
            if theta < 1e-4:  # sin(t)/t by its series, finite at 0
                beta = 1.0 - sq / 6.0 + sq * sq / 120.0
            else:
                beta = np.sin(theta) / theta
            for m in range(dim):
                y[m] = c * x[m]
            for m in range(dim):
                xm = x[m]
                if xm == 0.0:
                    continue
                for p in range(npairs):
                    bp = parts[r, j, p]
                    if bp == 0.0:
                        continue
                    e = (1 << pi[p]) | (1 << pj[p])
                    y[m ^ e] += beta * bp * xm * reorder_sign(m, e)
            for m in range(dim):
                x[m] = y[m]
        for m in range(dim):
            out[r, m] = x[m]


@jit
def _vector_action(R, Rrev, n, out):  # pragma: no cover - compiled
    """out[r, k, i] = e_k coefficient of R e_i R~ (bitmask order inputs, Euclidean)."""
    rows, dim = R.shape
    for r in range(rows):
        x = np.empty(dim, dtype=R.dtype)
        for i in range(n):
            bi = 1 << i
            for m in range(dim):
                x[m] = R[r, m ^ bi] * reorder_sign(m ^ bi, bi)
            for kk in range(n):
                bk = 1 << kk
                acc = 0.0
                for m in range(dim):
                    xm = x[m]
                    if xm != 0.0:
                        acc += xm * Rrev[r, m ^ bk] * reorder_sign(m, m ^ bk)
                out[r, kk, i] = acc


@jit
def _multiplication_matrices(X, Y, left, right):  # pragma: no cover - compiled
    """left[r] @ v = X[r] v and right[r] @ v = v Y[r], all in bitmask order (Euclidean)."""
    rows, dim = X.shape
    for r in range(rows):
        for a in range(dim):
            for c in range(dim):
                left[r, a, c] = 0.0
                right[r, a, c] = 0.0
        for i in range(dim):
            xi = X[r, i]
            yi = Y[r, i]
            for j in range(dim):
                s = reorder_sign(i, j)
                if xi != 0.0:
                    left[r, i ^ j, j] += s * xi  # e_i e_j
                if yi != 0.0:
                    right[r, j ^ i, j] += reorder_sign(j, i) * yi  # e_j e_i


# ---------------------------------------------------------------------------- rotors
def rotor_from_parts(n: int, parts: np.ndarray) -> np.ndarray:
    r"""Rotors :math:`\prod_j \exp b_j` (j = 0 leftmost) in *bitmask* order, shape (..., 2**n)."""
    shape = parts.shape[:-2]
    k, npairs = parts.shape[-2:]
    rows = int(np.prod(shape, dtype=np.int64))
    flat = np.ascontiguousarray(parts.reshape(rows, k, npairs))
    pairs = blades.bivector_pairs(n)
    out = np.empty((rows, 2**n), dtype=parts.dtype)
    if rows:
        _rotor_chain(flat, np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1]), out)
    return out.reshape(shape + (2**n,))


def rotation_matrix(alg, R: np.ndarray) -> np.ndarray:
    """(..., n, n) matrices of x -> R x R~ on vectors (R in shortlex order, checked by the caller)."""
    shape = R.shape[:-1]
    flat = R.reshape(-1, alg.dim)
    bits = np.ascontiguousarray(alg._to_bitmask(flat))
    rev = np.ascontiguousarray(alg._to_bitmask(alg.reverse(flat)))
    out = np.empty((flat.shape[0], alg.n, alg.n), dtype=R.dtype)
    if flat.shape[0]:
        _vector_action(bits, rev, alg.n, out)
    return out.reshape(shape + (alg.n, alg.n))


def sandwich_matrix(alg, R: np.ndarray, S: np.ndarray) -> np.ndarray:
    """(..., 2**n, 2**n) matrices of x -> R x S~ in shortlex order."""
    shape = np.broadcast_shapes(R.shape, S.shape)[:-1]
    dtype = np.result_type(R.dtype, S.dtype)
    Rf = np.ascontiguousarray(np.broadcast_to(R, shape + (alg.dim,)), dtype=dtype).reshape(-1, alg.dim)
    Sf = np.ascontiguousarray(np.broadcast_to(S, shape + (alg.dim,)), dtype=dtype).reshape(-1, alg.dim)
    rows = Rf.shape[0]
    need = 3 * rows * alg.dim**2 * np.dtype(dtype).itemsize
    if need > 8 * 2**30:
        raise ValueError(
            f"sandwich_matrix for {rows} rotors in Cl({alg.n}) would need about {need / 2**30:.1f} GiB; "
            "use fewer rotors per call or apply the rotors directly"
        )
    left = np.empty((rows, alg.dim, alg.dim), dtype)
    right = np.empty((rows, alg.dim, alg.dim), dtype)
    if rows:
        _multiplication_matrices(
            np.ascontiguousarray(alg._to_bitmask(Rf)),
            np.ascontiguousarray(alg._to_bitmask(alg.reverse(Sf))),
            left,
            right,
        )
    M = left @ right  # bitmask order
    perm = alg.bitmasks
    M = M[:, perm][:, :, perm]
    return np.ascontiguousarray(M).reshape(shape + (alg.dim, alg.dim))


def rotor_log(alg, R: np.ndarray) -> np.ndarray:
    r"""Bivector coefficients (..., C(n,2)) of a logarithm of unit rotors R (shortlex, checked).

    From the rotation :math:`M` of :math:`x \mapsto R x \tilde R`: the eigenspaces of
    :math:`(M + M^T)/2` (eigenvalues :math:`\cos\varphi`, grouped when closer than a tolerance) are
    split into planes by the exact decomposition of :math:`(M - M^T)/2` restricted to each; an
    eigenspace of :math:`\cos\varphi = -1` without a distinguished plane is paired arbitrarily
    (:math:`\varphi = \pi`). With :math:`M u = \cos\varphi\, u + \sin\varphi\, w`, the plane
    contributes :math:`\tfrac{\varphi}{2}\, w \wedge u`. The result :math:`B_0` satisfies
    :math:`\exp B_0 = \pm R`; when it is :math:`-R`, the largest plane's angle is moved by
    :math:`\pi` (:math:`\exp(\pi \hat b) = -1`). All angles end in [0, pi].
    """
    n = alg.n
    shape = R.shape[:-1]
    flat = R.reshape(-1, alg.dim)
    rows = flat.shape[0]
    npairs = comb(n, 2)
    out = np.zeros((rows, npairs), dtype=np.float64)
    k = n // 2
    plane_parts = np.zeros((rows, k, npairs))
    if n < 2:
        bad = flat[:, 0] < 0
        if np.any(bad):
            raise ValueError(f"the rotor -1 has no logarithm in Cl({n}) (there are no bivectors)")
        return out.astype(R.dtype).reshape(shape + (npairs,))
    M = rotation_matrix(alg, flat).astype(np.float64)
    sym = (M + np.swapaxes(M, -1, -2)) / 2
    skew = (M - np.swapaxes(M, -1, -2)) / 2
    cos_values, Q = np.linalg.eigh(sym)
    group_tol = 1e-7
    for r in range(rows):
        planes = []  # (u, w, phi)
        c = cos_values[r]
        start = 0
        while start < n:
            stop = start + 1
            while stop < n and c[stop] - c[stop - 1] <= group_tol:
                stop += 1
            E = Q[r][:, start:stop]  # orthonormal basis of the eigenspace, (n, d)
            d = stop - start
            c_mean = float(np.mean(c[start:stop]))
            start = stop
            if c_mean > 1 - 1e-9 and d == 1:
                continue
            K = E.T @ skew[r] @ E
            s_vals, Z = np.linalg.eigh(1j * K)
            found = []
            for idx in range(d - 1, d - 1 - d // 2, -1):
                z = Z[:, idx]
                x, y = np.sqrt(2) * z.real, np.sqrt(2) * z.imag
                if abs(x @ y) < 1e-6 and abs(x @ x - 1) < 1e-6 and abs(y @ y - 1) < 1e-6 and s_vals[idx] > 1e-12:
                    found.append((E @ y, E @ x))
            for u_c, w_c in found:
                cu = u_c @ M[r] @ u_c
                su = w_c @ M[r] @ u_c
                planes.append((u_c, w_c, float(np.arctan2(su, cu))))
            if c_mean < 0:
                # the part of the eigenspace not covered by a found plane rotates by pi
                used = np.array([v for pr in found for v in pr[:2]]).reshape(-1, n)
                P = np.eye(n) - used.T @ used
                rest = P @ E
                U, sv, _ = np.linalg.svd(rest, full_matrices=False)
                rest_basis = U[:, sv > 0.5]
                for m in range(0, rest_basis.shape[1] - 1, 2):
                    planes.append((rest_basis[:, m], rest_basis[:, m + 1], float(np.pi)))
        for j, (u_c, w_c, phi) in enumerate(planes[:k]):
            plane_parts[r, j] = (phi / 2) * wedge(n, w_c, u_c)
    R0 = alg._from_bitmask(rotor_from_parts(n, plane_parts.astype(R.dtype)))
    flip = alg.scalar_product(R0, alg.reverse(flat)) < 0
    for r in np.nonzero(flip)[0]:
        sizes = np.linalg.norm(plane_parts[r], axis=-1)
        j = int(np.argmax(sizes))
        if sizes[j] > 0:
            unit = plane_parts[r, j] / sizes[j]
        else:  # R = -1: any plane, e.g. e12
            unit = np.zeros(npairs)
            unit[0] = 1.0
        # this plane's angle theta becomes theta - pi (magnitude pi - theta <= pi)
        plane_parts[r, j] = plane_parts[r, j] - np.pi * unit
    out = plane_parts.sum(axis=1)
    # M = I + O(phi) holds each angle to an absolute ~eps only, so small angles lose relative
    # accuracy. When every angle is below 1 rad, <R>_2 / <R>_0 = sum_j tan(phi_j) b_j (b_j the
    # unit planes; products of distinct planes have grade >= 4): decomposing it and mapping each
    # magnitude t to atan(t) keeps the relative accuracy down to the smallest normal numbers
    # (decompose_exact scales each row by its largest entry, so no square underflows).
    small = np.sqrt(np.sum(plane_parts**2, axis=-1)).max(axis=-1, initial=0.0) < 1.0
    if np.any(small):
        near = flat[small].astype(np.float64)
        tangent = decompose_exact(n, near[:, 1 + n : 1 + n + npairs] / near[:, :1])
        t = tangent.angles
        ratio = np.arctan(t) / np.where(t > 0, t, 1.0) + (t == 0)
        out[small] = (tangent.bivectors * ratio[..., None]).sum(axis=-2)
    return out.astype(R.dtype).reshape(shape + (npairs,))
