r"""Logarithm of rotors in every non-Euclidean signature Cl(p, q, r): B with exp(B) = R.

The inverse of :func:`galinear.core.signatures.exp`, from the same invariants (Roelfs and De
Keninck, "Graded Symmetry Groups: Plane and Simple", 2023): the bivector part of a rotor is the
sum of its factors' bivectors, each scaled by the product of the other factors' scalars, so the
invariants of :math:`\langle R\rangle_2` and the scalar :math:`\langle R\rangle_0` give every
factor back (:func:`log`). The Euclidean logarithm is
:func:`galinear.core.rotor_maps.rotor_log`.
"""
from __future__ import annotations

import numpy as np

from galinear.core.invariants import (
    _artanh_ratio,
    _artanh_ratio_difference,
    _boost_weight,
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
#: <R>_2) when |C_j|^2 = |r^2 - mu_j| is below this squared times max(1, r^2 + max_l |mu_l|).
QUARTER_TOL = 1e-8

#: A part whose :math:`C_j^2 = r^2 - \mu_j` is below this fraction of :math:`r^2` is a large boost
#: (:math:`1/\cosh^2\phi`): its C_j comes from the other parts' (:func:`_boosted_rows`).
BOOST_CANCELLATION = 1e-2


def _simple_log(alg, f: np.ndarray) -> np.ndarray:
    """log(+-f) of simple unit rotors f = c + beta (rows, dim), real: the scalar of the factor made positive.

    A unit factor has C = 1, so a boost's weight is asinh(|beta|)/|beta| (:func:`_boost_weight`),
    exact for every rapidity; b is scaled to largest coefficient 1 first, so |beta|^2 cannot overflow.
    """
    b = alg.grade(f, 2)
    scale = np.abs(b).max(axis=-1)
    scale = np.where(scale > 0, scale, 1.0)
    bs = b / scale[:, None]
    mu_s = alg.scalar_product(bs, bs)
    boost = mu_s > 0
    weight = np.empty(f.shape[0])
    rest = ~boost  # rotations and null parts: |b| is at most about 1 (times a null part's size)
    weight[rest] = _log_weight(mu_s[rest] * scale[rest] ** 2, f[rest, 0]).real * scale[rest]  # of b / scale
    weight[boost] = _boost_weight(mu_s[boost], f[boost, 0], np.zeros(int(boost.sum())), scale[boost])
    return weight[:, None] * bs


def _boosted_rows(r_s, mu_s, first, size):
    r"""Rows whose smallest :math:`C_j^2` belongs to a large boost, and :math:`\log|C_j|` of that part.

    :math:`C_j^2 = r^2 - \mu_j` loses every digit for a large boost (:math:`\mu_j \approx r^2`).
    Since :math:`\prod_j C_j^2 = r^{2(k-1)}` (each :math:`C_j` is the product of the other factors'
    scalars), that part's C comes from the others' when none of them cancels (each
    :math:`|C_l^2| > r^2/2`): :math:`\log|C_j| = (k-1)\log|r| - \tfrac12\sum_{l\ne j}\log|C_l^2|`,
    in the scaled units of ``r_s``, ``mu_s`` (every s cancels). Returns (rows, slot, log|C|).
    """
    k = mu_s.shape[1]
    t = r_s[:, None] ** 2 - mu_s
    near = np.argmin(np.abs(t), axis=-1)
    every = np.arange(mu_s.shape[0])
    mu_near = mu_s[every, near]
    others = np.ones_like(t, dtype=bool)
    others[every, near] = False
    r2 = r_s**2
    good_others = np.where(others, np.abs(t) > 0.5 * r2[:, None], True).all(axis=-1)
    chosen = ((r_s != 0) & (mu_near.imag == 0) & (mu_near.real > 0) & (np.abs(t[every, near]) < BOOST_CANCELLATION * r2)
              & good_others & (first[every, near] == near) & (size[every, near] == 1))
    rows = np.nonzero(chosen)[0]
    log_t_others = np.where(others[rows], np.log(np.where(others[rows], np.abs(t[rows]), 1.0)), 0.0).sum(axis=-1)
    log_C = (k - 1) * np.log(np.abs(r_s[rows])) - 0.5 * log_t_others
    return rows, near[rows], log_C


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


def _log_one_quarter(alg, R: np.ndarray, r: float, mu: np.ndarray, beta: np.ndarray, j: int,
                     scale: float = 1.0) -> np.ndarray:
    r"""log of :math:`\pm R` (one row) when factor j is a quarter turn (:math:`C_j = 0`): the other
    factors :math:`(r + \beta_l)/C_l` come from :math:`\langle R\rangle_2`, factor j is what they leave of R.

    R, r, mu and beta may be given in units of ``scale`` (R / s, r / s, mu / s^2, beta / s): the
    factors are homogeneous in them, and the rest is R times ``scale``."""
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
    rest = _complex_product(alg, "gp", others * alg._reverse_sign, R[None].astype(np.complex128)) * scale
    return out + _simple_log(alg, rest.real)[0]


def _simple_group_invariants(alg, mu, beta, first, size, rows):
    r"""``mu`` with the root of every merged group (equal within MERGE_TOL) replaced by the square
    of the group's sum :math:`g` where :math:`g` is simple (:math:`\langle g^2\rangle_4 = 0`).

    Roots that nearly coincide come out of the characteristic polynomial with an error near the
    square root of the rounding; a group whose sum is one plane (a small boost or rotation merged
    with a plane at rest) has its exact invariant in :math:`g^2` instead, so its weight carries
    no such error. Isoclinic groups (g not simple) keep the root."""
    k = mu.shape[1]
    grouped = np.nonzero(rows & (size > 1).any(axis=-1))[0]
    if grouped.size == 0:
        return mu
    mu = mu.copy()
    for row in grouped:
        for j in np.nonzero((first[row] == np.arange(k)) & (size[row] > 1))[0]:
            g = beta[row, j].real[None]
            square = alg.gp(g, g)[0]
            if np.abs(alg.grade(square[None], 4)).max() <= 1e-12 * float(np.sum(g * g)):
                mu[row, j] = square[0]
    return mu


def _log_visible_quarter(alg, R: np.ndarray, r: float, mu: np.ndarray, beta: np.ndarray, m: int) -> np.ndarray:
    r"""log of R (one row, k >= 3) when one factor m is a quarter turn (:math:`c_m = 0`).

    Then every :math:`C_j` but :math:`C_m` is zero, so :math:`\langle R\rangle_2 = \beta_m` shows
    factor m alone: :math:`(r + \beta_m)/C_m`. The other factors are what it leaves of R,
    :math:`\tilde f_m R`, a rotor with one quarter turn fewer, whose logarithm is :func:`log`'s
    (NaN when that one has none either). ``r``, ``mu`` and ``beta`` are in the scaled units of
    :func:`log` (the factor is homogeneous of degree 0 in them)."""
    C = np.sqrt(np.complex128(r * r) - mu[m])
    f = (beta[m] / C).real
    f[0] += (r / C).real
    rest = alg.gp(f[None] * alg._reverse_sign, R[None])
    try:
        return _simple_log(alg, f[None])[0] + log(alg, rest)[0]
    except ValueError:
        return np.full(alg.dim, np.nan)


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
        B = _simple_log(alg, R)  # k = 1: R is its only factor, C = 1
    else:
        # every quantity in units of s = max |P| (squares of a rapidity-700 boost overflow otherwise)
        s, mu_s, beta_s, first, size = _parts(alg, P, scaled=True)
        r_s = r / s
        r2 = r_s[:, None] ** 2
        # relative to the whole rotor: a scalar part at the rounding level of a large boost's is a quarter turn
        quarter = np.abs(r2 - mu_s) <= QUARTER_TOL**2 * np.maximum((1.0 / s[:, None]) ** 2,
                                                                   r2 + np.abs(mu_s).max(axis=-1, keepdims=True))
        boosted, slot, log_C = _boosted_rows(r_s, mu_s, first, size)
        # a large boost's C^2 from the others': a quarter turn elsewhere only when C is truly small
        quarter[boosted, slot] = log_C <= np.log(QUARTER_TOL)
        use = ~quarter[boosted].any(axis=-1)
        boosted, slot, log_C = boosted[use], slot[use], log_C[use]
        count = quarter.sum(axis=-1)
        plain = count == 0
        plain[boosted] = False
        if k == 2:
            B[plain] = _log_two_planes(alg, r[plain], P[plain])
        else:
            # a group of equal mu has one weight: its sum (held in the group's first slot) suffices
            mu_s = _simple_group_invariants(alg, mu_s, beta_s, first, size, plain)
            B[plain] = (_log_weight(mu_s[plain], r_s[plain, None])[..., None] * beta_s[plain]).sum(axis=-2).real
        if boosted.size:
            with np.errstate(all="ignore"):  # the boost's own entry is replaced below
                weights = _log_weight(mu_s[boosted], r_s[boosted, None])
            weights[np.arange(boosted.size), slot] = _boost_weight(
                mu_s[boosted, slot].real, r_s[boosted], log_C, s[boosted])
            B[boosted] = (weights[..., None] * beta_s[boosted]).sum(axis=-2).real
        for row in np.nonzero(count == 1)[0]:
            B[row] = _log_one_quarter(alg, R[row] / s[row], r_s[row], mu_s[row], beta_s[row],
                                      int(np.argmax(quarter[row])), s[row])
        for row in np.nonzero(count == 2)[0] if k == 2 else ():
            pair = quarter_turn_pair(alg, alg.grade(R[row : row + 1], 4))
            if pair is not None:
                B[row] = pair
        for row in np.nonzero(count == k - 1)[0] if k >= 3 else ():
            B[row] = _log_visible_quarter(alg, R[row], r_s[row], mu_s[row], beta_s[row],
                                          int(np.argmin(quarter[row])))
        reason[~np.isfinite(B).all(axis=-1)] = 2
    good = np.isfinite(B).all(axis=-1)
    B[~good] = 0.0
    back = exp(alg, B)
    peak = np.maximum(1.0, np.abs(R).max(axis=-1))[:, None]
    for row in np.nonzero(good & (np.sum((back / peak) * (R / peak), axis=-1) < 0))[0]:
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
