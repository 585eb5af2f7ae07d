r"""Inverses of symbolic multivectors: closed forms for n <= 5, a linear solve above (sympy only).

A mixin of :class:`galinear.symbolic.multivector.MultiVector`.
"""
from __future__ import annotations

import sympy as sp

from galinear import blades
from galinear.symbolic.product_table import product_rules

__all__ = ["MultiVectorInverse"]


class MultiVectorInverse:
    """Inverse methods of :class:`~galinear.symbolic.multivector.MultiVector`."""

    def inv(self, simplify=sp.simplify) -> "MultiVector":
        r"""Inverse :math:`A^{-1}`, with :math:`A A^{-1} = A^{-1} A = 1`.

        For n <= 5 the closed forms of Hitzer and Sangwine (2017) used by the numeric
        :func:`galinear.core.inverses.inverse` (a numerator from involutions, divided by the
        scalar :math:`A \cdot \text{numerator}`); for n > 5 the linear system of the
        left-multiplication matrix. A ValueError when the denominator simplifies to 0 (A is not
        invertible, e.g. a null vector).
        """
        if self.n > 5:
            return self._inv_matrix()
        num = self.inverse_numerator()
        den = sp.expand(self.gp(num).coefficients[0])
        if simplify(den) == 0:
            raise ValueError(
                f"{self!r} is not invertible (the denominator of inv() simplifies to 0); "
                "a / b and b ** -1 need an invertible b"
            )
        if den.could_extract_minus_sign():
            num, den = -num, -den
        return num.applyfunc(lambda c: c / den)

    def inverse_numerator(self) -> "MultiVector":
        r"""N(A) of the closed-form inverse (n <= 5): :math:`A N(A)` is a scalar and
        :math:`A^{-1} = N(A) / (A N(A))` (Hitzer and Sangwine 2017; galinear.proofs.multivector_inverse)."""
        n = self.n
        if n > 5:
            raise ValueError(f"closed-form inverses exist for n <= 5; Cl({n}) uses inv() (a linear solve)")
        if n == 0:
            return self._coerce(1)
        if n <= 2:
            return self.conjugate()
        if n == 3:
            return self.conjugate().gp(self.involute()).gp(self.reverse())
        if n == 4:
            c = self.conjugate()
            return c.gp(self.gp(c)._negate_grades((3, 4)))
        t = self.conjugate().gp(self.involute()).gp(self.reverse())
        return t.gp(self.gp(t)._negate_grades((1, 4)))

    def _inv_matrix(self) -> "MultiVector":
        size = 1 << self.n
        L = sp.zeros(size, size)
        for i, j, k, sign, gi, gj, gk in product_rules(self.metric):
            if self.coefficients[i] != 0:
                L[k, j] += sign * self.coefficients[i]
        rhs = sp.zeros(size, 1)
        rhs[0] = 1
        try:
            y = L.LUsolve(rhs)
        except (ValueError, ZeroDivisionError):  # sympy's NonInvertibleMatrixError is a ValueError
            raise ValueError(f"{self!r} is not invertible (its left-multiplication matrix is singular)") from None
        return self._new(list(y))

    def _negate_grades(self, grades) -> "MultiVector":
        grade_of = blades.blade_grades(self.n).tolist()
        return self._new([-c if g in grades else c for g, c in zip(grade_of, self.coefficients)])
