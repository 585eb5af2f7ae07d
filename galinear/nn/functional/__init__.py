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
backend of the registry: ``"spinor"``, the default above the matrix limit on the CPU and CUDA,
multiplies small matrices of the matrix representation of Cl(n); ``"dense"`` builds the
2**n x 2**n chunk matrices, the default for small n; ``"factored"`` applies the simple rotors
directly with signed permutations, the differentiable one; ``"numba"`` runs compiled kernels on
the CPU where it is named).

Layout, by stage: :mod:`~galinear.nn.functional.decomposition` (bivector -> factors),
:mod:`~galinear.nn.functional.rotors` (factors -> simple rotors, products with vectors, sandwich
matrices), :mod:`~galinear.nn.functional.backends` (the registry), :mod:`~galinear.nn.functional.sandwich`
(:func:`rotor_sandwich`),
:mod:`~galinear.nn.functional.plan` (the one dispatcher of the rotor layers: which
:class:`~galinear.nn.functional.plan.Path` a call runs, with which backend function and how many
threads; ``plan.plan``, ``plan.Plan``, ``plan.Path``, ``plan.intra_op_threads``) and
:mod:`~galinear.nn.functional.transforms` (:func:`fwht`). Everything public is importable from
here (the dispatcher from its module), and callers reach the functions through this module's
attributes. Which backend ``backend="auto"`` runs is decided by the dispatcher alone, the same for
:func:`rotor_sandwich` and the rotor layers.
"""
from __future__ import annotations

from galinear.nn.functional.backends import (
    SandwichBackend,
    available_sandwich_backends,
    register_sandwich_backend,
    sandwich_backend_entry,
    unregister_sandwich_backend,
)
from galinear.nn.functional.sandwich import resolve_sandwich_backend, rotor_sandwich
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

# The trace guards of the rotor layers, reached as ``functional._capturing`` and
# ``functional._Untraced`` by galinear.nn.network; not part of the public interface.
from galinear.nn.functional._common import _capturing, _Untraced  # noqa: F401

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
    "unregister_sandwich_backend",
    "sandwich_backend_entry",
    "SandwichBackend",
    "available_sandwich_backends",
    "resolve_sandwich_backend",
    "fwht",
    "default_tolerance",
]
