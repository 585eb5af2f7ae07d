"""The import path ``galinear.core.algebra`` of :class:`~galinear.core.multivector.Algebra`.

The class is defined beside :class:`~galinear.core.multivector.MultiVector` (each constructs the
other), on the array methods of :class:`~galinear.core.layout.Layout` and the rotor methods of
:class:`~galinear.core.algebrarotors.RotorMethods`. This module names them under their earlier
home, together with :data:`AUTO_GENERATED_MAX_N`, the size up to which ``method="auto"`` picks
the generated product kernels.
"""
from galinear.core.checks import coerce_float
from galinear.core.layout import scaled_inverse
from galinear.core.multivector import Algebra
from galinear.core.products import AUTO_GENERATED_MAX_N

__all__ = ["Algebra", "AUTO_GENERATED_MAX_N", "coerce_float", "scaled_inverse"]
