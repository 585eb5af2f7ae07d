r"""Scalar coefficients of the simple-rotor factors for the numba kernels (numpy, float64).

One factor :math:`R_j = \cos\theta_j + \operatorname{sinc}\theta_j\, v_j \wedge w_j` is written
:math:`R_j = a_j + s_j\, v_j w_j` with :math:`s_j = \operatorname{sinc}\theta_j` and
:math:`a_j = \cos\theta_j - s_j\,(v_j\cdot w_j)`, :math:`\theta_j = |v_j \wedge w_j|`
(see :mod:`galinear.rotor_kernels.rotor_chain`); series, switch point and the formula for a come from
:mod:`galinear._generated.rotor_spec`. :func:`factor_coefficients` computes (a, s) before
the kernels run.
"""
from __future__ import annotations

import numpy as np

from galinear._generated import rotor_spec as spec

__all__ = ["factor_coefficients"]


def _wedge_norm_sq(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """|v ^ w|^2 = sum_{i<j} (v_i w_j - v_j w_i)^2 (never negative, unlike |v|^2|w|^2-(v.w)^2)."""
    outer = v[..., :, None] * w[..., None, :]
    return 0.5 * ((outer - np.swapaxes(outer, -1, -2)) ** 2).sum(axis=(-1, -2))


_SERIES = "float64"  # the coefficients are computed in float64 whatever the kernels' dtype


def _sinc(q: np.ndarray) -> np.ndarray:
    """sinc(sqrt q), finite and accurate at q = 0 (series of the rotor spec)."""
    small = q < spec.SERIES_SWITCH[_SERIES]
    th = np.sqrt(np.where(small, 1.0, q))
    return np.where(small, spec.horner(spec.SINC_SERIES[_SERIES], q), np.sin(th) / th)


def factor_coefficients(V: np.ndarray, W: np.ndarray):
    r"""Scalars (a, s) of the factors :math:`R_j = a_j + s_j v_j w_j`, shape (P, k), float64.

    :math:`s = \operatorname{sinc}\theta`, :math:`a = \cos\theta - s\,(v\cdot w)`,
    :math:`\theta = |v \wedge w|`.
    """
    v = np.asarray(V, dtype=np.float64)
    w = np.asarray(W, dtype=np.float64)
    q = _wedge_norm_sq(v, w)
    sinc = _sinc(q)
    return spec.factor_scalar(np.cos(np.sqrt(q)), sinc, (v * w).sum(-1)), sinc
