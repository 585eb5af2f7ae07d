r"""Differentiable rotor maths in torch: invariant decomposition, simple rotors, sandwich maps.

Conventions (shared with the rest of galinear): a multivector of Euclidean Cl(n) is a tensor
(..., 2**n) in shortlex order; a bivector is (..., C(n, 2)) in ``galinear.blades.bivector_pairs``
order and corresponds to the skew matrix :math:`A_{ij} = b_{ij}` (:math:`i < j`); the left
contraction of a vector by it is :math:`v \rfloor B = -A v`.

A rotor is handed around as factor pairs (V, W), each (..., k, n) with k = floor(n/2):

.. math::

    b_j = v_j \wedge w_j, \quad \theta_j = |b_j|, \quad
    R_j = \cos\theta_j + \frac{\sin\theta_j}{\theta_j} b_j, \quad R = R_0 R_1 \cdots R_{k-1}.

Because every :math:`b_j` is exactly simple, every :math:`R_j` is a unit rotor and every map
:math:`x \mapsto R x \tilde S` built from factors is exactly orthogonal, converged or not.

Pipeline: :func:`invariant_decomposition` (bivector -> factors, the power iteration of Pence,
Yamada & Singh 2025, Algorithms 1-2) -> :func:`rotor_sandwich` (factors -> map, through a
backend of the registry: ``"dense"`` builds the 2**n x 2**n matrix, ``"factored"`` applies the
simple rotors directly with signed permutations).

Layout, by stage: :mod:`~galinear.nn.functional.decomposition` (bivector -> factors),
:mod:`~galinear.nn.functional.rotors` (factors -> simple rotors, products with vectors, sandwich
matrices), :mod:`~galinear.nn.functional.backends` (the registry and :func:`rotor_sandwich`),
:mod:`~galinear.nn.functional.plan` (the one dispatcher of the rotor layers: which backend, whether
to decode, how many threads; ``plan.plan``, ``plan.Plan``, ``plan.intra_op_threads``) and
:mod:`~galinear.nn.functional.transforms` (:func:`fwht`). Everything public is importable from
here (the dispatcher from its module), and callers reach the functions through this module's
attributes.
"""
from __future__ import annotations

from galinear.nn.functional.backends import (
    SandwichBackend,  # noqa: F401 - reachable as functional.SandwichBackend
    available_sandwich_backends,
    register_sandwich_backend,
    resolve_sandwich_backend,
    rotor_sandwich,
)
from galinear.nn.functional.decomposition import (
    FactorPairs,
    Spectrum,
    bivector_to_skew,
    default_tolerance,
    exact_factors,
    factors_to_bivectors,
    invariant_decomposition,
    skew_to_bivector,
    spectrum,
    wedge,
)
from galinear.nn.functional.rotors import (
    compose_rotors,
    exp_simple,
    left_vector_product,
    right_vector_product,
    sandwich_matrix,
    simple_rotor_coefficients,
)
from galinear.nn.functional.transforms import fwht

# Private names other galinear modules and the tests reach as ``functional._name``; the registry
# and the table cache are the same objects as in the stage modules.
from galinear.nn.functional._common import _HALF_TYPES, _TABLE_CACHE, _capturing, _compiling, _Untraced, _wrapped  # noqa: F401
from galinear.nn.functional.backends import (  # noqa: F401
    _FLOAT_TYPES,
    _PLUGIN_STATE,
    _REGISTRY,
    OPTIONAL_BACKENDS,
    _check_factors,
    _dense_backend,
    _factored_backend,
    _load_plugins,
    _register_numba,
)
from galinear.nn.functional.decomposition import (  # noqa: F401
    _dimension_from_bivectors,
    _exact_factors,
    _pair_index,
    _power_factors,
)
from galinear.nn.functional.rotors import _SERIES_LIMIT, _full_tables, _vector_tables  # noqa: F401

__all__ = [
    "FactorPairs",
    "bivector_to_skew",
    "skew_to_bivector",
    "wedge",
    "invariant_decomposition",
    "exact_factors",
    "spectrum",
    "Spectrum",
    "factors_to_bivectors",
    "simple_rotor_coefficients",
    "exp_simple",
    "compose_rotors",
    "left_vector_product",
    "right_vector_product",
    "sandwich_matrix",
    "rotor_sandwich",
    "register_sandwich_backend",
    "available_sandwich_backends",
    "resolve_sandwich_backend",
    "fwht",
    "default_tolerance",
]
