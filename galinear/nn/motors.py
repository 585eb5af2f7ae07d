r"""Differentiable PGA motors in torch: exp, log and sandwich in Cl(3,0,1).

Multivectors are tensors (..., 16) in the shortlex order of ``galinear.Algebra(3, 0, 1)``:
``e1`` is the null vector (often written :math:`e_0`), ``e2, e3, e4`` the Euclidean ones.
Bivectors are given as (..., 6) coefficients on ``e12, e13, e14`` (the ideal part T, the
translation) and ``e23, e24, e34`` (the Euclidean part E, the rotation).

Closed form of the exponential (dual numbers, e.g. Roelfs and De Keninck 2023): with
:math:`B^2 = -\theta^2 + p\,I` (:math:`\theta = |E|`, I the pseudoscalar, :math:`I^2 = 0`),

.. math::

   e^B = \cos\theta + \tfrac{p}{2} c_1 I + \big(c_1 - \tfrac{p}{2} c_2 I\big) B,\qquad
   c_1 = \frac{\sin\theta}{\theta},\quad c_2 = \frac{\theta\cos\theta - \sin\theta}{\theta^3},

all three coefficients written as functions of :math:`\theta^2` (the series of the rotor
specification near 0), so the map and its gradient are smooth at pure translations and at 0.
The logarithm inverts it for :math:`\theta < \pi`. Products use the Cayley table of the
numeric core, so the torch code shares its sign conventions.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from galinear._generated import rotor_spec

__all__ = ["SIGNATURE", "motor_exp", "motor_log", "sandwich", "gp", "reverse", "bivector", "point", "point_coordinates"]

SIGNATURE = (3, 0, 1)
#: (atan u) / u below this u**2 by its Taylor series (relative error below 1e-17).
SERIES_BELOW = 1e-2


@lru_cache(maxsize=1)
def _tables():
    from galinear.core import Algebra
    from galinear.core import products

    alg = Algebra(*SIGNATURE)
    ti, tj, tk, ts = products.product_triples(alg.metric, "gp")
    cayley = np.zeros((alg.dim,) * 3)
    cayley[ti, tj, tk] = ts
    biv = np.flatnonzero(alg.grades == 2)
    rev = np.where((alg.grades * (alg.grades - 1) // 2) % 2 == 0, 1.0, -1.0)
    names = alg.blade_names
    return alg, cayley, biv, rev, names


def _t(array, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(array, dtype=like.dtype, device=like.device)


def _check(x: torch.Tensor, size: int, name: str) -> None:
    if not torch.is_tensor(x) or not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point torch tensor, got {type(x).__name__}")
    if x.shape[-1:] != (size,):
        raise ValueError(f"{name} must have a last axis of length {size}, got shape {tuple(x.shape)}")


def gp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Geometric product of (..., 16) tensors in Cl(3,0,1) (broadcast over leading axes)."""
    _, cayley, _, _, _ = _tables()
    return torch.einsum("...i,...j,ijk->...k", a, b, _t(cayley, a))


def reverse(x: torch.Tensor) -> torch.Tensor:
    """Reversion of (..., 16) tensors."""
    return x * _t(_tables()[3], x)


def bivector(coefficients: torch.Tensor) -> torch.Tensor:
    """(..., 16) bivector from (..., 6) coefficients on e12, e13, e14, e23, e24, e34."""
    _check(coefficients, 6, "coefficients")
    _, _, biv, _, _ = _tables()
    out = coefficients.new_zeros(coefficients.shape[:-1] + (16,))
    return out.index_copy(-1, torch.as_tensor(biv, device=coefficients.device), coefficients)


def point(xyz: torch.Tensor) -> torch.Tensor:
    """The PGA point (a trivector) at Euclidean coordinates (..., 3): ``e234 - x e134 + y e124 - z e123``."""
    _check(xyz, 3, "xyz")
    x, y, z = xyz.unbind(-1)
    zero = torch.zeros_like(x)
    return torch.stack([zero] * 11 + [-z, y, -x, torch.ones_like(x), zero], dim=-1)


def point_coordinates(P: torch.Tensor) -> torch.Tensor:
    """Euclidean coordinates (..., 3) of PGA points (..., 16) (divided by the e234 weight)."""
    return torch.stack([-P[..., 13], P[..., 12], -P[..., 11]], dim=-1) / P[..., 14:15]


def _coefficients(a: torch.Tensor):
    """cos(theta), c1 = sinc(theta) and c2 = 2 d sinc / d(theta**2) as functions of
    a = theta**2 >= 0, smooth at 0: the series and switch point of the rotor specification
    (:mod:`galinear._generated.rotor_spec`) below it, the closed forms above."""
    key = "float64" if a.dtype == torch.float64 else "float32"
    small = a < rotor_spec.SERIES_SWITCH[key]
    safe = torch.where(small, torch.ones_like(a), a)
    th = torch.sqrt(safe)
    cos_e, sin_e = torch.cos(th), torch.sin(th)
    c1_e = sin_e / th
    c2_e = (th * cos_e - sin_e) / (safe * th)
    cos_s = rotor_spec.horner(rotor_spec.COS_SERIES[key], a)
    c1_s = rotor_spec.horner(rotor_spec.SINC_SERIES[key], a)
    c2_s = 2 * rotor_spec.horner(rotor_spec.DSINC_SERIES[key], a)
    return torch.where(small, cos_s, cos_e), torch.where(small, c1_s, c1_e), torch.where(small, c2_s, c2_e)


def motor_exp(B: torch.Tensor) -> torch.Tensor:
    r"""Motor :math:`e^B` (..., 16) of bivectors B given as (..., 6) coefficients (screw motion)."""
    _check(B, 6, "B")
    full = bivector(B)
    E = B[..., 3:]
    a = (E * E).sum(-1)  # theta**2 = -<B^2>_0
    p = gp(full, full)[..., 15]  # <B^2>_4 = p I
    cos, c1, c2 = _coefficients(a)
    half = p / 2
    I = torch.zeros_like(full)
    I[..., 15] = 1.0
    out = c1[..., None] * full - (half * c2)[..., None] * gp(I, full)
    scalar = torch.zeros_like(full)
    scalar[..., 0] = cos
    scalar[..., 15] = half * c1
    return out + scalar


def motor_log(M: torch.Tensor) -> torch.Tensor:
    r"""Bivector coefficients (..., 6) of :math:`\log M` for unit motors (..., 16) with rotation
    angle :math:`\theta < \pi` (the inverse of :func:`motor_exp` there)."""
    _check(M, 16, "M")
    euclid = M[..., 8:11]  # c1 E
    ratio = _angle_over_sine((euclid * euclid).sum(-1), M[..., 0])
    th2 = ratio * ratio * (euclid * euclid).sum(-1)
    if bool((np.pi**2 - th2.detach() < 2e-6 * np.pi).any()):
        raise ValueError("motor_log: a rotation by pi has no unique logarithm; perturb the motor")
    _, c1, c2 = _coefficients(th2)
    E = euclid * ratio[..., None]
    half = M[..., 15] / c1  # p / 2
    IE = gp(_pseudoscalar(M), bivector(torch.cat([torch.zeros_like(E), E], -1)))[..., 5:8]
    T = (M[..., 5:8] + (half * c2)[..., None] * IE) / c1[..., None]
    return torch.cat([T, E], dim=-1)


def _angle_over_sine(q: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """atan2(s, c) / s with s = sqrt(q), smooth at q = 0 (a pure translation): there
    atan(u) / u / c with u**2 = q / c**2 by its Taylor series (relative error < 1e-16)."""
    u2 = q / (c * c)
    small = (u2 < SERIES_BELOW) & (c > 0)
    s = torch.sqrt(torch.where(small, torch.ones_like(q), q))
    exact = torch.atan2(s, c) / s
    series = (1 - u2 / 3 + u2**2 / 5 - u2**3 / 7 + u2**4 / 9 - u2**5 / 11 + u2**6 / 13 - u2**7 / 15) / c
    return torch.where(small, series, exact)


def _pseudoscalar(like: torch.Tensor) -> torch.Tensor:
    I = like.new_zeros(16)
    I[15] = 1.0
    return I


def sandwich(M: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    r""":math:`M X \tilde M` for motors M and multivectors X (..., 16): moves points, lines and planes."""
    _check(M, 16, "M")
    _check(X, 16, "X")
    return gp(gp(M, X), reverse(M))
