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

from galinear.symbolic.closed_forms import (
    exp_simple,
    invariant_decomposition,
    normalize_rotor,
    rotor_from_bivector,
    rotor_gadget_parameter_count,
    rotor_network_parameter_count,
    sandwich,
)

from galinear.symbolic.signatures import (
    exp_signature,
    exp_simple_signature,
    screw_decomposition,
    signature_decomposition,
    signature_roots,
)

__all__ = [
    "exp_simple",
    "invariant_decomposition",
    "normalize_rotor",
    "rotor_from_bivector",
    "rotor_gadget_parameter_count",
    "rotor_network_parameter_count",
    "sandwich",
    "exp_signature",
    "exp_simple_signature",
    "screw_decomposition",
    "signature_decomposition",
    "signature_roots",
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
