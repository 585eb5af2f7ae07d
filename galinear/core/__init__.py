"""Numeric core of galinear (numpy + numba): :class:`Algebra` and the rotor maths.

Importing this package compiles nothing; numba kernels compile on their first call and are
cached on disk (see :mod:`galinear._numba`).
"""
from galinear.core.algebra import Algebra, MultiVector
from galinear.core.rotors import Decomposition

__all__ = ["Algebra", "Decomposition", "MultiVector"]
