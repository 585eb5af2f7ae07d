r"""Rotor maps in Euclidean Cl(n) on plain arrays: exp from simple parts, log, rotation and sandwich matrices.

Every function takes the dimension n and coefficient arrays (no :class:`~galinear.core.Algebra`
object): rotors in shortlex order unless a name says *bitmask*. Conventions as in
:mod:`galinear.core.rotors`. The series of sinc near 0 and its switch point come from the rotor
specification (:mod:`galinear._generated.rotor_spec`).
"""
from __future__ import annotations

from math import comb

import numpy as np

from galinear import blades
from galinear._generated import rotor_spec
from galinear._numba import jit, readonly
from galinear.core.products import reorder_sign
from galinear.core.rotors import decompose_exact, wedge

__all__ = ["rotor_from_parts", "rotor_log", "rotation_matrix", "sandwich_matrix", "to_bitmask", "from_bitmask",
           "reverse"]


def to_bitmask(n: int, x: np.ndarray) -> np.ndarray:
    """Coefficients (..., 2**n) from shortlex to bitmask order."""
    out = np.empty_like(x)
    out[..., blades.shortlex_bitmasks(n)] = x
    return out


def from_bitmask(n: int, x: np.ndarray) -> np.ndarray:
    """Coefficients (..., 2**n) from bitmask to shortlex order."""
    return np.ascontiguousarray(x[..., blades.shortlex_bitmasks(n)])


def reverse(n: int, x: np.ndarray) -> np.ndarray:
    """Reversion of shortlex coefficients: grade g gets the sign (-1)**(g(g-1)/2)."""
    g = blades.blade_grades(n)
    return x * np.where((g * (g - 1) // 2) % 2 == 0, 1, -1).astype(x.dtype)


# ---------------------------------------------------------------------------- numba kernels
@jit
def _rotor_chain(parts, pi, pj, switch, sinc_series, out):  # pragma: no cover - compiled
    """out[r] = prod_j exp(parts[r, j]) (j = 0 leftmost), in bitmask order; parts (rows, k, P).

    sinc(theta) is the series ``sinc_series`` in theta**2 below ``switch``, else sin(theta)/theta.
    """
    rows, k, npairs = parts.shape
    dim = out.shape[1]
    for r in range(rows):
        x = np.zeros(dim, dtype=out.dtype)
        y = np.zeros(dim, dtype=out.dtype)
        x[0] = 1.0
        for j in range(k):
            peak = 0.0
            for p in range(npairs):
                peak = max(peak, abs(parts[r, j, p]))
            sq = 0.0
            if peak > 0.0:  # |b| = peak |b / peak|: no overflow for |b| up to the largest float
                for p in range(npairs):
                    sq += (parts[r, j, p] / peak) * (parts[r, j, p] / peak)
            theta = peak * np.sqrt(sq)
            c = np.cos(theta)
            if theta < np.sqrt(switch):  # sin(t)/t by its series, finite at 0
                sq = theta * theta
                beta = sinc_series[sinc_series.shape[0] - 1]
                for m in range(sinc_series.shape[0] - 2, -1, -1):
                    beta = beta * sq + sinc_series[m]
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
                    y[m ^ e] += beta * bp * xm * reorder_sign(m, e) if theta < 1e150 else (
                        np.sin(theta) * (bp / theta) * xm * reorder_sign(m, e))
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
    key = np.dtype(parts.dtype).name
    series = np.array(rotor_spec.SINC_SERIES[key], dtype=parts.dtype)
    switch = rotor_spec.SERIES_SWITCH[key]
    if rows:
        _rotor_chain(readonly(flat), readonly(np.ascontiguousarray(pairs[:, 0])), readonly(np.ascontiguousarray(pairs[:, 1])),
                     switch, readonly(series), out)
    return out.reshape(shape + (2**n,))


def rotation_matrix(n: int, R: np.ndarray) -> np.ndarray:
    """(..., n, n) matrices of x -> R x R~ on vectors (R in shortlex order, checked by the caller)."""
    shape = R.shape[:-1]
    flat = R.reshape(-1, 2**n)
    bits = np.ascontiguousarray(to_bitmask(n, flat))
    rev = np.ascontiguousarray(to_bitmask(n, reverse(n, flat)))
    out = np.empty((flat.shape[0], n, n), dtype=R.dtype)
    if flat.shape[0]:
        _vector_action(bits, rev, n, out)
    return out.reshape(shape + (n, n))


def sandwich_matrix(n: int, R: np.ndarray, S: np.ndarray) -> np.ndarray:
    """(..., 2**n, 2**n) matrices of x -> R x S~ in shortlex order."""
    dim = 2**n
    shape = np.broadcast_shapes(R.shape, S.shape)[:-1]
    dtype = np.result_type(R.dtype, S.dtype)
    Rf = np.ascontiguousarray(np.broadcast_to(R, shape + (dim,)), dtype=dtype).reshape(-1, dim)
    Sf = np.ascontiguousarray(np.broadcast_to(S, shape + (dim,)), dtype=dtype).reshape(-1, dim)
    rows = Rf.shape[0]
    need = 3 * rows * dim**2 * np.dtype(dtype).itemsize
    if need > 8 * 2**30:
        raise ValueError(
            f"sandwich_matrix for {rows} rotors in Cl({n}) would need about {need / 2**30:.1f} GiB; "
            "use fewer rotors per call or apply the rotors directly"
        )
    left = np.empty((rows, dim, dim), dtype)
    right = np.empty((rows, dim, dim), dtype)
    if rows:
        _multiplication_matrices(
            np.ascontiguousarray(to_bitmask(n, Rf)),
            np.ascontiguousarray(to_bitmask(n, reverse(n, Sf))),
            left,
            right,
        )
    M = left @ right  # bitmask order
    perm = blades.shortlex_bitmasks(n)
    M = M[:, perm][:, :, perm]
    return np.ascontiguousarray(M).reshape(shape + (dim, dim))


def rotor_log(n: int, R: np.ndarray) -> np.ndarray:
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
    shape = R.shape[:-1]
    flat = R.reshape(-1, 2**n)
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
    M = rotation_matrix(n, flat).astype(np.float64)
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
    R0 = from_bitmask(n, rotor_from_parts(n, plane_parts.astype(R.dtype)))
    flip = np.sum(R0 * flat, axis=-1) < 0  # <R0 ~R>_0 in a Euclidean algebra
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
