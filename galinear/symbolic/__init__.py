"""Symbolic layer of galinear (sympy only): multivectors, closed forms, kernel generation.

Never imports numba or torch. The numeric core shares its blade order and product rules
through :mod:`galinear.blades`.
"""
from galinear.symbolic.multivector import (
    MultiVector,
    basis,
    bivector,
    bivector_coefficients,
    blade,
    product_rules,
    scalar,
    symbols,
    vector,
)

__all__ = [
    "MultiVector",
    "basis",
    "bivector",
    "bivector_coefficients",
    "blade",
    "product_rules",
    "scalar",
    "symbols",
    "vector",
]
