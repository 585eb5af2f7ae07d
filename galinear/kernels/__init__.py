"""Numba kernels for rotor layers (numpy + numba only; the torch wrappers live in galinear.nn.fast)."""
from galinear.kernels.rotor_chain import (
    DEFAULT_TILE,
    default_tile,
    factor_coefficient_grads,
    factor_coefficients,
    sandwich_backward,
    sandwich_forward,
)

__all__ = [
    "DEFAULT_TILE",
    "default_tile",
    "factor_coefficients",
    "factor_coefficient_grads",
    "sandwich_forward",
    "sandwich_backward",
]
