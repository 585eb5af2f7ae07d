r"""Subspace operations of symbolic multivectors: meet, join, projection and rejection (sympy only).

A mixin of :class:`galinear.symbolic.multivector.MultiVector`, with the meanings of the numeric
:class:`galinear.MultiVector`: ``meet`` is the regressive product :math:`a \vee b` (``&``),
``join`` the outer product, ``project`` :math:`(x \rfloor B) \rfloor B^{-1}` and ``reject``
:math:`x - (x \rfloor B) \rfloor B^{-1}` (Dorst, Fontijne and Mann 2007).
"""
from __future__ import annotations

__all__ = ["MultiVectorSubspaces"]


class MultiVectorSubspaces:
    """Meet, join, projection and rejection of :class:`~galinear.symbolic.multivector.MultiVector`."""

    def meet(self, other) -> "MultiVector":
        r"""Meet: the regressive product :math:`a \vee b` (``a & b``), metric-free.

        For blades that represent subspaces directly and together span the whole space it is
        their intersection; in plane-based PGA the roles swap (``^`` meets, ``&`` joins), as in
        :meth:`galinear.MultiVector.meet`.
        """
        return self.regressive(other)

    def join(self, other) -> "MultiVector":
        r"""Join of subspaces that share nothing: the outer product :math:`a \wedge b`."""
        return self.op(other)

    def project(self, onto) -> "MultiVector":
        r"""Projection onto an invertible blade B: :math:`(x \rfloor B) \rfloor B^{-1}`."""
        B = self._coerce(onto)
        return self.lc(B).lc(B.inv())

    def reject(self, onto) -> "MultiVector":
        r"""Rejection from an invertible blade B: :math:`x - (x \rfloor B) \rfloor B^{-1}`."""
        return self - self.project(onto)

    def __rlshift__(self, other):
        """``2 << A``: the left contraction of a scalar (or other operand) with ``A``."""
        return self._coerce(other).lc(self)

    def __rrshift__(self, other):
        """``2 >> A``: the right contraction of a scalar (or other operand) with ``A``."""
        return self._coerce(other).rc(self)
