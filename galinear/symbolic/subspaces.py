r"""Subspace operations of symbolic multivectors: meet, join, projection and rejection (sympy only).

A mixin of :class:`galinear.symbolic.multivector.MultiVector`, with the meanings of the numeric
:class:`galinear.MultiVector`: ``project`` is :math:`(x \rfloor B) \rfloor B^{-1}`, ``reject``
:math:`x - (x \rfloor B) \rfloor B^{-1}` (Dorst, Fontijne and Mann 2007), and ``meet`` / ``join``
the meet and join of blades defined in :mod:`galinear.core.meetjoin`, computed here with the
same algorithm in exact arithmetic:

* a blade A stands for the subspace :math:`\{v : v \wedge A = 0\}` (the null space of
  :math:`v \mapsto v \wedge A`, found exactly with :meth:`sympy.Matrix.nullspace`);
* the join J is the smallest blade containing both, of unit size
  (:math:`|\langle J \tilde J \rangle_0| = 1`, coefficient 2-norm 1 where that is 0): :math:`a \wedge b`
  when it is non-zero, else a wedged with the projections onto b of :math:`e_1, e_2, \dots`
  that leave a's span, in that order;
* the meet is :math:`(a \rfloor J^{-1}) \rfloor b` (Euclidean contractions on a null J);
* sign: when :math:`a \wedge b = 0` and :math:`a \vee b \ne 0` both flip so that the meet is a
  positive multiple of :math:`a \vee b`;
* degenerate metrics (plane-based PGA): both are taken through the right complement
  :math:`\star` that ``&`` uses, :math:`\star^{-1}(\star a \cap \star b)` and
  :math:`\star^{-1}(\star a \cup \star b)` with the Euclidean metric inside, the join then
  oriented along :math:`a \vee b`, else the meet along :math:`a \wedge b` (two planes meet in
  their line, two points join to their line).

Where the numeric layer decides "zero" at the square root of the machine epsilon, this one
decides exactly, so the coefficients must be exact numbers (integers, Rationals, radicals); the
normalisation brings in square roots. Non-blades, zero and symbolic or floating-point
coefficients raise a ValueError that names the problem.
"""
from __future__ import annotations

import sympy as sp

from galinear import blades

__all__ = ["MultiVectorSubspaces"]


def _is_zero(c) -> bool:
    c = sp.expand(c)
    if c == 0:
        return True
    zero = c.is_zero
    return bool(sp.simplify(c) == 0) if zero is None else bool(zero)


def _sign(c) -> int:
    """-1, 0 or 1 for an exact number (radicals included)."""
    if _is_zero(c):
        return 0
    return 1 if sp.sympify(c).evalf(50) > 0 else -1


def _dot(a, b):
    """Sum of the products of the coefficients of two multivectors (their Euclidean scalar product)."""
    return sp.expand(sum(x * y for x, y in zip(a.coefficients, b.coefficients)))


def _exact_numbers(mv, name: str) -> None:
    for c in mv.coefficients:
        if c.free_symbols:
            raise ValueError(
                f"{name} has symbolic coefficients ({', '.join(sorted(map(str, c.free_symbols)))}); meet and join "
                f"decide ranks and signs, so they need numbers: substitute values first, e.g. a.subs(x, 2)"
            )
        if c.has(sp.Float):
            raise ValueError(
                f"{name} has floating-point coefficients; meet and join decide ranks exactly: use integers, "
                f"Rationals or radicals (sympy.Rational(1, 10), sympy.nsimplify(0.1)), or the numeric "
                f"galinear.MultiVector"
            )


def _blade_vectors(mv) -> list:
    """Exact basis (n x 1 sympy matrices) of the vectors v with v ^ mv = 0 (metric-free)."""
    n = mv.n
    columns = []
    for i in range(n):
        e = [0] * (1 << n)
        e[1 + i] = 1
        columns.append(list(mv._new(e).op(mv).coefficients))
    return sp.Matrix(columns).T.nullspace(simplify=True)


def _checked_blade(mv, name: str) -> list:
    """The vectors of a blade (as :func:`_blade_vectors`); ValueError for zero and non-blades."""
    _exact_numbers(mv, name)
    grade_of = blades.blade_grades(mv.n).tolist()
    present = sorted({g for g, c in zip(grade_of, mv.coefficients) if not _is_zero(c)})
    if not present:
        raise ValueError(f"{name} is zero; meet and join are defined for non-zero blades")
    if len(present) > 1:
        raise ValueError(
            f"{name} is not a blade: it has grades {tuple(present)}; meet and join take blades (one grade, "
            f"a product of vectors), e.g. mv.grade_part({present[-1]})"
        )
    g = present[0]
    vectors = _blade_vectors(mv)
    if len(vectors) != g:
        raise ValueError(
            f"{name} is a grade-{g} multivector but not a blade (it contains {len(vectors)} directions, not {g}; "
            f"e.g. e12 + e34 is not a blade); meet and join take blades"
        )
    return vectors


def _unit(J):
    """J of unit size: |<J ~J>_0| = 1, or coefficient 2-norm 1 where <J ~J>_0 = 0."""
    square = sp.expand(J.scalar_product(J.reverse()))
    size = square if not _is_zero(square) else _dot(J, J)
    scale = sp.sqrt(sp.Abs(size))
    return J.applyfunc(lambda c: sp.radsimp(c / scale))


def _direct(a, b, Va, Vb, regressive):
    """(meet, join) of blades a, b that represent their subspaces directly (module notes)."""
    n = a.n
    outer = a.op(b)
    wedge = not all(_is_zero(c) for c in outer.coefficients)
    if wedge:
        J = outer
    else:
        J = a
        span = []  # orthogonal (not normalised) basis of a's span and the directions added
        for u in list(Va):
            rest = u - sum(((w.dot(u) / w.dot(w)) * w for w in span), sp.zeros(n, 1))
            span.append(rest.applyfunc(sp.radsimp))
        if Vb:
            B = sp.Matrix.hstack(*Vb)
            project = (B * (B.T * B).inv() * B.T).applyfunc(sp.radsimp)  # orthogonal projector onto b
        else:
            project = sp.zeros(n, n)
        for i in range(n):
            v = project[:, i]
            rest = (v - sum(((w.dot(v) / w.dot(w)) * w for w in span), sp.zeros(n, 1))).applyfunc(sp.radsimp)
            if not all(_is_zero(c) for c in v) and not all(_is_zero(c) for c in rest):
                J = J.op(a._new([0] + list(v) + [0] * ((1 << n) - 1 - n)))
                span.append(rest)
            if len(span) == len(Va) + len(Vb):
                break
    J = _unit(J)
    square = sp.expand(J.scalar_product(J.reverse()))
    metric = a.metric if not _is_zero(square) else (1,) * n  # null join: Euclidean contractions
    space = type(a)
    Js, as_, bs = (space(metric, x.coefficients) for x in (J, a, b))
    Jinv = Js.reverse().applyfunc(lambda c: c / Js.scalar_product(Js.reverse()))
    M = a._new(as_.lc(Jinv).lc(bs).coefficients).applyfunc(sp.radsimp)
    if not wedge and regressive is not None and _sign(_dot(M, regressive)) < 0:
        J, M = -J, -M
    return M, J


def meet_join(a, b):
    """(meet, join) of the blades a, b (symbolic MultiVectors of one algebra); module notes."""
    Va = _checked_blade(a, "a")
    Vb = _checked_blade(b, "b")
    vee = a.regressive(b)
    if 0 not in a.metric:
        return _direct(a, b, Va, Vb, vee)
    euclid = (1,) * a.n
    sa = type(a)(euclid, a.dual("hodge").coefficients)
    sb = type(a)(euclid, b.dual("hodge").coefficients)
    Md, Jd = _direct(sa, sb, _blade_vectors(sa), _blade_vectors(sb), None)
    M = a._new(Md.coefficients).undual("hodge")
    J = a._new(Jd.coefficients).undual("hodge")
    outer = a.op(b)
    if not all(_is_zero(c) for c in vee.coefficients):
        sign = _sign(_dot(J, vee))
    elif not all(_is_zero(c) for c in outer.coefficients):
        sign = _sign(_dot(M, outer))
    else:
        sign = 1
    return M * sign, J * sign


class MultiVectorSubspaces:
    """Meet, join, projection and rejection of :class:`~galinear.symbolic.multivector.MultiVector`."""

    def meet(self, other) -> "MultiVector":
        r"""Meet :math:`a \cap b` of blades: their intersection, :math:`(a \rfloor J^{-1}) \rfloor b`
        with J the join, exactly as :meth:`galinear.MultiVector.meet` (module notes).

        Non-zero for overlapping blades (``e12.meet(e23)`` is e2, where ``&`` gives 0); in
        plane-based PGA the meet of two planes is their line, a positive multiple of ``a ^ b``.
        ValueError for zero, non-blades and coefficients that are not exact numbers.
        """
        return meet_join(self, self._coerce(other))[0]

    def join(self, other) -> "MultiVector":
        r"""Join :math:`a \cup b` of blades: the smallest blade containing both, of unit size, exactly
        as :meth:`galinear.MultiVector.join` (module notes).

        ``a ^ b`` normalised when that is non-zero (``(e1 ^ e2).join(e2 ^ e3)`` is ±e123 where
        ``^`` gives 0); in plane-based PGA the join of two points is their line, ``a & b``
        normalised. ValueError for zero, non-blades and coefficients that are not exact numbers.
        """
        return meet_join(self, self._coerce(other))[1]

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
