"""Numba kernels for rotor layers (numpy + numba only; the torch wrappers live in galinear.nn.numba_backend)."""
from galinear.rotor_kernels.rotor_chain import (
    DEFAULT_TILE,
    default_tile,
    factor_coefficients,
    sandwich_forward,
)

__all__ = [
    "DEFAULT_TILE",
    "default_tile",
    "factor_coefficients",
    "sandwich_forward",
]
