"""Norms and comparison of :class:`~galinear.core.algebra.MultiVector` (a mixin)."""
from __future__ import annotations

from numbers import Number

import numpy as np


def _is_scalar(x) -> bool:
    """A real number (Python or a 0-d numpy integer / float array), not a bool."""
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, Number) and not isinstance(x, complex):
        return True
    return isinstance(x, np.ndarray) and x.ndim == 0 and x.dtype.kind in "iuf"


class NormMethods:
    """Norms, ``==`` and ``allclose`` on the coefficients."""

    __slots__ = ()

    def norm(self) -> np.ndarray:
        """:math:`\\sqrt{|\\langle \\tilde x x\\rangle_0|}` per batch entry (clifford's ``abs``)."""
        return self.algebra.norm(self.values)

    def norm_squared(self) -> np.ndarray:
        return self.algebra.norm_squared(self.values)

    def normalized(self) -> "MultiVector":
        """``x / norm(x)`` per batch entry."""
        nrm = self.norm()
        if np.any(nrm == 0):
            raise ValueError("normalized() of a multivector with zero norm (zero or null); nothing to divide by")
        return self._like(self.values / nrm[..., None])

    def __eq__(self, other):
        if isinstance(other, NormMethods):
            return other.algebra == self.algebra and bool(np.array_equal(self.values, other.values))
        if _is_scalar(other):
            return bool(np.array_equal(self.values, np.broadcast_to(self._scalar_mv(other), self.values.shape)))
        return NotImplemented

    __hash__ = None

    def allclose(self, other, rtol: float = 1e-7, atol: float = 1e-9) -> bool:
        """``np.allclose`` on the coefficients (other: a MultiVector or a scalar)."""
        return bool(np.allclose(self.values, self._operand(other)[0], rtol=rtol, atol=atol))
