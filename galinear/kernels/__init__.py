"""The former name of :mod:`galinear.rotor_kernels` (the numba rotor kernels), kept so that older
imports keep working: ``galinear.kernels`` and each of its submodules
(``import galinear.kernels.spinor``, ``from galinear.kernels import resident``) are the very
module objects of :mod:`galinear.rotor_kernels`, registered under the old names too. New code
imports :mod:`galinear.rotor_kernels`.
"""
import sys

from galinear.rotor_kernels import *  # noqa: F401,F403 - the package's own names
from galinear.rotor_kernels import (  # no __all__ here: the names' reference pages are the new package's
    bivector_parts,
    bounds,
    branches,
    factors,
    givens,
    resident,
    rotor_chain,
    spinor,
    spinor_tables,
)

for _module in (bivector_parts, bounds, branches, factors, givens, resident, rotor_chain, spinor, spinor_tables):
    sys.modules[f"{__name__}.{_module.__name__.rpartition('.')[2]}"] = _module
del _module
