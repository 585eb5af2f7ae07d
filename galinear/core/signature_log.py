r"""Logarithm of rotors in every non-Euclidean signature Cl(p, q, r): B with exp(B) = R.

The inverse of :func:`galinear.core.signatures.exp`, from the same invariants (Roelfs and De
Keninck, "Graded Symmetry Groups: Plane and Simple", 2023): the bivector part of a rotor is the
sum of its factors' bivectors, each scaled by the product of the other factors' scalars, so the
invariants of :math:`\langle R\rangle_2` and the scalar :math:`\langle R\rangle_0` give every
factor back (:func:`log`). The Euclidean logarithm is
:func:`galinear.core.maps.rotor_log`.
"""
from __future__ import annotations

import numpy as np

from galinear.core.invariants import (
    _artanh_ratio,
    _artanh_ratio_difference,
    _complex_product,
    _log_weight,
    _parts,
    _roots,
    commuting_rotation_plane,
    invariants,
    quarter_turn_pair,
)
from galinear.core.signatures import exp

__all__ = ["log", "algebra_log", "LOG_CHECK_TOL", "QUARTER_TOL"]

#: log() accepts B when |exp(B) - R| <= this times max(1, max |R|) (a wrong branch or a failed
#: decomposition is off by order one; the round trip measures 1e-16 |R|^2 at worst, tests/core/test_log_everywhere.py).
LOG_CHECK_TOL = 1e-6

#: A factor (r + beta_j) / C_j of a rotor counts as a quarter turn (C_j = 0, no information in
#: <R>_2) when |C_j|^2 = |r^2 - mu_j| is below this squared times max(1, r^2 + |mu_j|).
QUARTER_TOL = 1e-8

def _simple_log(alg, f: np.ndarray) -> np.ndarray:
    """log(+-f) of simple unit rotors f = c + beta (rows, dim), real: the scalar of the factor made positive."""
    b = alg.grade(f, 2)
    return (_log_weight(alg.scalar_product(b, b), f[:, 0]).real)[:, None] * b


def _log_two_planes(alg, r: np.ndarray, P: np.ndarray) -> np.ndarray:
    r"""log of :math:`\operatorname{sign}(r) R` for k = 2 without a quarter turn, from r and :math:`P = \langle R\rangle_2`.

    :math:`B = \sum_j h(\mu_j)\beta_j = h(\mu_1) P + h[\mu_1, \mu_2]\,(T - \mu_1 P)` with
    :math:`T = \sum_j \mu_j\beta_j = (3\sigma_1 P - \langle P^3\rangle_2)/2`: no division by
    :math:`\mu_1 - \mu_2`, so null, nearly null and isoclinic rotors (coinciding :math:`\mu_j`) are
    as accurate as the rest. Computed on P scaled to largest coefficient 1.
    """
    s = np.abs(P).max(axis=-1)
    s = np.where(s > 0, s, 1.0)
    Ps = P / s[:, None]
    rho = r / s
    sigma, _ = invariants(alg, Ps)
    mu = _roots(sigma)
    P3 = alg.grade(alg.gp(alg.gp(Ps, Ps), Ps), 2)
    T = (3 * sigma[:, 1:2] * Ps - P3) / 2
    z = mu / rho[:, None] ** 2
    # (1 - z_1)(1 - z_2) = C_1^2 C_2^2 / r^4 = 1 / r^2: a large boost's 1 - z (near 0) from the other's
    w = 1 - z
    near = np.argmin(np.abs(w), axis=-1)
    other = np.take_along_axis(w, (1 - near)[:, None], axis=-1)[:, 0]
    use = np.abs(other) > 0.5
    rows = np.nonzero(use)[0]
    w[rows, near[rows]] = 1 / (r[rows] ** 2 * other[rows])
    z[rows, near[rows]] = 1 - w[rows, near[rows]]
    first = _artanh_ratio(z[:, 0], w[:, 0])[:, None] * Ps
    second = _artanh_ratio_difference(z[:, 0], z[:, 1], w[:, 0], w[:, 1])[:, None] * (T - mu[:, :1] * Ps) / rho[:, None] ** 2
    return ((first + second) / rho[:, None]).real


def _log_one_quarter(alg, R: np.ndarray, r: float, mu: np.ndarray, beta: np.ndarray, j: int) -> np.ndarray:
    r"""log of :math:`\pm R` (one row) when factor j is a quarter turn (:math:`C_j = 0`): the other
    factors :math:`(r + \beta_l)/C_l` come from :math:`\langle R\rangle_2`, factor j is what they leave of R."""
    k = mu.shape[0]
    others = np.zeros((1, alg.dim), dtype=np.complex128)
    others[0, 0] = 1.0
    out = np.zeros(alg.dim)
    for l in range(k):
        if l == j:
            continue
        C = np.sqrt(np.complex128(r * r) - mu[l])
        f = beta[l] / C
        f[0] += r / C
        others = _complex_product(alg, "gp", others, f[None])
        out += _simple_log(alg, f.real[None])[0]
    rest = _complex_product(alg, "gp", others * alg._reverse_sign, R[None].astype(np.complex128))
    return out + _simple_log(alg, rest.real)[0]


def log(alg, R: np.ndarray) -> np.ndarray:
    r"""Logarithm of rotor rows (rows, 2**n), float64, in a non-Euclidean signature: B with exp B = R.

    For :math:`R = \prod_j (c_j + s_j b_j)` the bivector part is :math:`P = \langle R\rangle_2 =
    \sum_j \beta_j`, :math:`\beta_j = s_j C_j b_j`, :math:`C_j = \prod_{l \ne j} c_l`, and
    :math:`r = \langle R\rangle_0 = c_j C_j`, so :math:`C_j^2 = r^2 - \mu_j` with
    :math:`\mu_j = \beta_j^2` (the invariants of P). Taking every :math:`C_j` with the sign of r,
    the factors :math:`(r + \beta_j)/C_j` multiply to :math:`\operatorname{sign}(r) R` and
    :math:`\log = \sum_j h(\mu_j)\beta_j` (:func:`_log_weight`; for k = 2 in the divided-difference
    form of :func:`_log_two_planes`). A quarter turn (:math:`C_j = 0`) leaves no trace in P: one
    is recovered as the rest of R, two (k = 2, :math:`R = \langle R\rangle_4`) from the factors of the
    4-blade :math:`\langle R\rangle_4` (:func:`galinear.core.invariants.quarter_turn_pair`). When the
    result gives :math:`-R`, a rotation plane :math:`\hat b` (:math:`\hat b^2 = -1`) commuting
    with B moves by :math:`\pi` (:math:`e^{\pm\pi\hat b} = -1`): B's largest rotation, else a
    plane orthogonal to B (:func:`galinear.core.invariants.commuting_rotation_plane`). Every row
    is checked, :math:`|\exp B - R| \le` :data:`LOG_CHECK_TOL` :math:`\max(1, |R|)`; a ValueError
    names the rows that have no real logarithm and why.
    """
    R = np.asarray(R, dtype=np.float64)
    rows = R.shape[0]
    k = alg.n // 2
    if rows == 0:
        return np.zeros_like(R)
    r = R[:, 0]
    P = alg.grade(R, 2)
    B = np.full(R.shape, np.nan)
    reason = np.zeros(rows, dtype=np.int64)  # 0 ok, 1 no commuting rotation plane, 2 planes undetermined
    if k == 0:
        B[:] = 0.0
    elif k == 1:
        B = _log_weight(alg.scalar_product(P, P), r).real[:, None] * P
    else:
        _, mu, beta, _, _ = _parts(alg, P)
        quarter = np.abs(r[:, None] ** 2 - mu) <= QUARTER_TOL**2 * np.maximum(1.0, r[:, None] ** 2 + np.abs(mu))
        count = quarter.sum(axis=-1)
        plain = count == 0
        if k == 2:
            B[plain] = _log_two_planes(alg, r[plain], P[plain])
        else:
            # a group of equal mu has one weight: its sum (held in the group's first slot) suffices
            B[plain] = (_log_weight(mu[plain], r[plain, None])[..., None] * beta[plain]).sum(axis=-2).real
        for row in np.nonzero(count == 1)[0]:
            B[row] = _log_one_quarter(alg, R[row], r[row], mu[row], beta[row], int(np.argmax(quarter[row])))
        for row in np.nonzero(count == 2)[0] if k == 2 else ():
            pair = quarter_turn_pair(alg, alg.grade(R[row : row + 1], 4))
            if pair is not None:
                B[row] = pair
        reason[~np.isfinite(B).all(axis=-1)] = 2
    good = np.isfinite(B).all(axis=-1)
    B[~good] = 0.0
    back = exp(alg, B)
    for row in np.nonzero(good & (np.sum(back * R, axis=-1) < 0))[0]:
        plane = commuting_rotation_plane(alg, B[row])
        if plane is None:
            reason[row] = 1
            continue
        theta = -alg.scalar_product(B[row], plane)  # B's angle in that plane
        B[row] = B[row] - (np.pi if theta >= 0 else -np.pi) * plane
    return _checked_log(alg, R, B, reason)


def _checked_log(alg, R, B, reason):
    back = exp(alg, B)
    err = np.abs(back - R).max(axis=-1) / np.maximum(1.0, np.abs(R).max(axis=-1))
    fail = (reason > 0) | ~(err <= LOG_CHECK_TOL)
    if np.any(fail):
        why = []
        if np.any(reason == 1):
            why.append(
                f"{int(np.sum(reason == 1))} are -exp(B) with no rotation plane (b^2 = -1) of {alg!r} commuting "
                f"with B, so no real logarithm exists (e.g. a boost or null rotation times -1 when the "
                f"directions orthogonal to it hold no plane squaring to -1, or -1 itself in Cl(0,0,r))"
            )
        if np.any(reason == 2):
            why.append(f"{int(np.sum(reason == 2))} turn two or more planes by pi/2, which leaves the planes undetermined")
        other = fail & (reason == 0)
        if np.any(other):
            why.append(f"{int(np.sum(other))} fail the check |exp(log R) - R| <= {LOG_CHECK_TOL:g} max(1, |R|) "
                       f"(largest {float(err[other].max()):.3g})")
        raise ValueError(
            f"{int(np.sum(fail))} of {fail.size} rotors have no real logarithm found in {alg!r}: " + "; ".join(why)
        )
    return B


def algebra_log(alg, R) -> np.ndarray:
    """:meth:`Algebra.log` for signatures that are not Euclidean: a bivector with exp(B) = R."""
    R = alg._mv(R, "R")
    dtype = R.dtype
    flat = R.reshape(-1, alg.dim).astype(np.float64)
    odd = np.abs(flat * (alg.grades % 2 == 1)).max(axis=-1, initial=0.0)
    peak = np.maximum(1.0, np.abs(flat).max(axis=-1, initial=0.0))
    unit = flat / peak[:, None]  # R ~R - 1 relative to |R|^2, without overflow
    check = alg.gp(unit, alg.reverse(unit))
    check[:, 0] -= (1 / peak) ** 2
    size = np.maximum((1.0 / peak) ** 2, (unit * unit).sum(axis=-1))
    tol = 1e3 * np.finfo(dtype).eps * max(1, alg.n)
    bad = (np.abs(check).max(axis=-1, initial=0.0) > tol * size) | (odd > tol * np.sqrt(size) * peak)
    if np.any(bad):
        raise ValueError(
            f"R must be a rotor (even, R ~R = 1) of {alg!r}; {int(np.sum(bad))} of {bad.size} are not. "
            f"Build rotors with alg.exp(B)"
        )
    return log(alg, flat).astype(dtype).reshape(R.shape)
