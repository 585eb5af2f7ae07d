"""Duality, regressive product, projections, outermorphisms and exp/log of
:class:`~galinear.core.algebra.MultiVector` (a base class of it)."""
from __future__ import annotations

import numpy as np

from galinear.core import graded, meetjoin
from galinear.core.duality import dual
from galinear.core.outermorphisms import outermorphism_matrix

__all__ = ["SubspaceMethods"]


class SubspaceMethods:
    """Methods of MultiVector built from its products and the array functions of
    :mod:`galinear.core.duality` and :mod:`galinear.core.outermorphisms`."""

    __slots__ = ()

    # ---------------------------------------------------------------- duality and subspaces
    def dual(self, kind: str = "auto") -> "MultiVector":
        r"""Dual of x.

        ``kind="polarity"``: :math:`x I^{-1}` (clifford's and kingdon's ``dual`` in
        non-degenerate algebras). ``kind="hodge"``: the right complement, metric-free,
        :math:`e_A \wedge \star e_A = I` for every basis blade (kingdon's dual in degenerate
        algebras such as PGA). ``"auto"`` (default): polarity unless the metric is degenerate.
        :meth:`undual` inverts the same choice.
        """
        return self._like(dual(self.algebra, self.values, kind, inverse=False), self._dual_pattern())

    def undual(self, kind: str = "auto") -> "MultiVector":
        """Inverse of :meth:`dual` with the same ``kind``: ``x.dual().undual() == x``."""
        return self._like(dual(self.algebra, self.values, kind, inverse=True), self._dual_pattern())

    def _dual_pattern(self):
        n = self.algebra.n
        return None if self._pattern is None else graded.mask_of(n - g for g in graded.grades_of(self._pattern))

    def regressive(self, other) -> "MultiVector":
        r"""Regressive product :math:`a \vee b = \star^{-1}(\star a \wedge \star b)` (``&``).

        Built on the right complement (:meth:`dual` with ``kind="hodge"``), so it is metric-free
        and the same in every signature, degenerate ones included. Grades: r + s - n.
        """
        b = self._wrap(self.algebra, *self._operand(other))
        return (self.dual("hodge") ^ b.dual("hodge")).undual("hodge")

    def __and__(self, other):
        return self.regressive(other)

    def meet(self, other) -> "MultiVector":
        r"""Meet :math:`a \cap b` of blades: their intersection, :math:`(a \rfloor J^{-1}) \rfloor b` with J the join.

        Non-zero for overlapping blades (``e12.meet(e23)`` is a multiple of e2, where ``&`` gives
        0); in degenerate algebras (plane-based PGA) the meet of two planes is their line, a
        positive multiple of ``a ^ b``. Scale and sign: :mod:`galinear.core.meetjoin`.
        """
        b = self._wrap(self.algebra, *self._operand(other))
        return self._like(meetjoin.meet(self.algebra, self.values, b.values), None)

    def join(self, other) -> "MultiVector":
        r"""Join :math:`a \cup b` of blades: the smallest blade containing both, of unit size.

        ``a ^ b`` normalised when that is non-zero (``(e1 ^ e2).join(e2 ^ e3)`` is ±e123 where
        ``^`` gives 0); in degenerate algebras (plane-based PGA) the join of two points is their
        line, ``a & b`` normalised. Scale and sign: :mod:`galinear.core.meetjoin`.
        """
        b = self._wrap(self.algebra, *self._operand(other))
        return self._like(meetjoin.join(self.algebra, self.values, b.values), None)

    def project(self, onto) -> "MultiVector":
        r"""Projection onto a blade B: :math:`(x \rfloor B) \rfloor B^{-1}` (Dorst et al. 2007)."""
        B = self._wrap(self.algebra, *self._operand(onto))
        return (self << B) << B.inv()

    def reject(self, onto) -> "MultiVector":
        r"""Rejection from a blade B: :math:`x - (x \rfloor B) \rfloor B^{-1}` (for vectors x,
        :math:`(x \wedge B) B^{-1}`)."""
        return self - self.project(onto)

    # ---------------------------------------------------------------- maps
    def outermorphism(self, matrix) -> "MultiVector":
        """Apply the outermorphism of ``matrix`` (..., n, n) (:func:`outermorphism_matrix`); grades are kept."""
        O = outermorphism_matrix(self.algebra, matrix)
        return self._like(np.einsum("...ij,...j->...i", O, self.values))

    def exp(self, **options) -> "MultiVector":
        """Exponential of a bivector (any signature): :meth:`Algebra.exp`; the result is even."""
        even = graded.mask_of(range(0, self.algebra.n + 1, 2))
        return self._like(self.algebra.exp(self.values, **options), even)

    def log(self) -> "MultiVector":
        """Logarithm of a rotor (any signature): :meth:`Algebra.log`; the result is a bivector."""
        return self._like(self.algebra.log(self.values), 0b100)
