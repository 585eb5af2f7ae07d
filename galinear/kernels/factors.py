r"""Scalar coefficients of the simple-rotor factors for the numba kernels (numpy, float64).

One factor :math:`R_j = \cos\theta_j + \operatorname{sinc}\theta_j\, v_j \wedge w_j` is written
:math:`R_j = a_j + s_j\, v_j w_j` with :math:`s_j = \operatorname{sinc}\theta_j` and
:math:`a_j = \cos\theta_j - s_j\,(v_j\cdot w_j)`, :math:`\theta_j = |v_j \wedge w_j|`
(see :mod:`galinear.kernels.rotor_chain`); series, switch point and the formula for a come from
:mod:`galinear._generated.rotor_spec`. :func:`factor_coefficients` computes (a, s) before
the kernels run; :func:`factor_coefficient_grads` takes the kernels' gradients with respect to
(a, s, v, w) back to the factors (V, W).
"""
from __future__ import annotations

import numpy as np

from galinear._generated import rotor_spec as spec

__all__ = ["factor_coefficients", "factor_coefficient_grads"]


def _wedge_norm_sq(v: np.ndarray, w: np.ndarray) -> np.ndarray:
    """|v ^ w|^2 = sum_{i<j} (v_i w_j - v_j w_i)^2 (never negative, unlike |v|^2|w|^2-(v.w)^2)."""
    outer = v[..., :, None] * w[..., None, :]
    return 0.5 * ((outer - np.swapaxes(outer, -1, -2)) ** 2).sum(axis=(-1, -2))


_SERIES = "float64"  # the coefficients are computed in float64 whatever the kernels' dtype


def _sinc_and_derivative(q: np.ndarray):
    """sinc(sqrt q) and d sinc(sqrt q) / dq, finite and accurate at q = 0 (series of the rotor spec)."""
    small = q < spec.SERIES_SWITCH[_SERIES]
    qs = np.where(small, 1.0, q)
    th = np.sqrt(qs)
    sinc_big = np.sin(th) / th
    dsinc_big = (th * np.cos(th) - np.sin(th)) / (2.0 * qs * th)
    sinc_small = spec.horner(spec.SINC_SERIES[_SERIES], q)
    dsinc_small = spec.horner(spec.DSINC_SERIES[_SERIES], q)
    return np.where(small, sinc_small, sinc_big), np.where(small, dsinc_small, dsinc_big)


def factor_coefficients(V: np.ndarray, W: np.ndarray):
    r"""Scalars (a, s) of the factors :math:`R_j = a_j + s_j v_j w_j`, shape (P, k), float64.

    :math:`s = \operatorname{sinc}\theta`, :math:`a = \cos\theta - s\,(v\cdot w)`,
    :math:`\theta = |v \wedge w|`.
    """
    v = np.asarray(V, dtype=np.float64)
    w = np.asarray(W, dtype=np.float64)
    q = _wedge_norm_sq(v, w)
    sinc, _ = _sinc_and_derivative(q)
    return spec.factor_scalar(np.cos(np.sqrt(q)), sinc, (v * w).sum(-1)), sinc


def factor_coefficient_grads(V, W, grad_a, grad_s, grad_v, grad_w):
    """Chain rule from (a, s, v, w) taken as independent to the factors (V, W) alone.

    ``grad_v``/``grad_w`` are the gradients with a and s held fixed; returns (dV, dW), float64.
    """
    v = np.asarray(V, dtype=np.float64)
    w = np.asarray(W, dtype=np.float64)
    q = _wedge_norm_sq(v, w)
    vw = (v * w).sum(-1)
    sinc, dsinc = _sinc_and_derivative(q)
    # a = cos(sqrt q) - sinc(q) vw, s = sinc(q);  d cos(sqrt q)/dq = -sinc/2
    grad_q = grad_a * (-0.5 * sinc - vw * dsinc) + grad_s * dsinc
    grad_vw = -grad_a * sinc
    vv = (v * v).sum(-1)
    ww = (w * w).sum(-1)
    dq_dv = 2.0 * (ww[..., None] * v - vw[..., None] * w)
    dq_dw = 2.0 * (vv[..., None] * w - vw[..., None] * v)
    dV = grad_v + grad_q[..., None] * dq_dv + grad_vw[..., None] * w
    dW = grad_w + grad_q[..., None] * dq_dw + grad_vw[..., None] * v
    return dV, dW
