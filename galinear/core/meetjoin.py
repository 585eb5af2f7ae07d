r"""Meet and join of blades in every signature Cl(p, q, r) (numpy, on arrays).

A blade A (a product of g vectors, one grade) represents the subspace
:math:`\{v : v \wedge A = 0\}`, found here as the null space of :math:`v \mapsto v \wedge A`
(metric-free). Following Dorst, Fontijne and Mann (2007, sections 5.3 and 21.6) and the
``clifford`` package:

* the **join** :math:`J = A \cup B` is the smallest blade containing both, of unit size
  (:math:`|\langle J \tilde J \rangle_0| = 1`, or coefficient 2-norm 1 where the metric is
  degenerate on J);
* the **meet** is the dual formula relative to the join,
  :math:`A \cap B = (A \rfloor J^{-1}) \rfloor B` (on a degenerate J the contractions use the
  Euclidean metric of the coefficients, which changes the scale only).

Grades add up: :math:`\operatorname{grade}(A \cap B) + \operatorname{grade}(A \cup B) =
\operatorname{grade} A + \operatorname{grade} B`. Sign convention: J is :math:`A \wedge B`
normalised whenever :math:`A \wedge B \ne 0`; else, when :math:`A \vee B \ne 0` (the blades span
the space), J takes the sign that makes the meet a positive multiple of :math:`A \vee B`; else J
is A wedged with the projections onto B of :math:`e_1, e_2, \dots` that leave A's span, in that
order. The meet follows J's sign.

Degenerate metrics (r > 0, e.g. plane-based PGA, where a vector is a plane and a trivector a
point): subspaces are taken in the dual representation, through the metric-free right
complement :math:`\star` that the regressive product :math:`\vee` uses,
:math:`A \cap B = \star^{-1}(\star A \cap \star B)` and
:math:`A \cup B = \star^{-1}(\star A \cup \star B)` with the Euclidean metric inside (so the meet
is the span of A and B as sets of planes, the join their intersection), the join of unit
coefficient 2-norm. So the meet of two
planes is their line, a positive multiple of :math:`A \wedge B`, and the join of two points is
their line, :math:`A \vee B` normalised; when those vanish (coinciding or nested elements) the
meet and join are still the intersection and the span.
"""
from __future__ import annotations

import numpy as np

from galinear.core.layout import Layout
from galinear.core.duality import dual

__all__ = ["blade_vectors", "meet_join", "meet", "join"]


def blade_vectors(alg, A: np.ndarray, tol: float = 1e-8):
    """Coefficient-orthonormal basis (g, n) of the vectors v with v ^ A = 0 (A one multivector (dim,)); None if A = 0."""
    A = np.asarray(A, dtype=np.float64)
    size = np.abs(A).max(initial=0.0)
    if not size > 0:
        return None
    W = alg.op(alg.vector(np.eye(alg.n)), (A / size)[None])  # row i: e_i ^ A
    _, s, Vt = np.linalg.svd(W.T)
    return Vt[s <= tol * max(1.0, float(s.max(initial=0.0)))]


def _grade_of_blade(alg, A: np.ndarray, name: str, tol: float):
    """(grade, vectors) of a blade; ValueError naming the problem otherwise."""
    size = np.sqrt(np.sum((A / max(np.abs(A).max(initial=0.0), 1e-300)) ** 2))
    present = sorted({int(g) for g in alg.grades[np.abs(A) > tol * np.abs(A).max(initial=0.0)]})
    if not size > 0 or not present:
        raise ValueError(f"{name} is zero; meet and join are defined for non-zero blades")
    if len(present) > 1:
        raise ValueError(
            f"{name} is not a blade: it has grades {tuple(present)}; meet and join take blades (one grade, "
            f"a product of vectors), e.g. mv.grade({present[-1]})"
        )
    g = present[0]
    V = blade_vectors(alg, A, tol)
    if V.shape[0] != g:
        raise ValueError(
            f"{name} is a grade-{g} multivector but not a blade (it contains {V.shape[0]} directions, not {g}; "
            f"e.g. e12 + e34 is not a blade); meet and join take blades"
        )
    return g, V


def _unit(alg, J: np.ndarray, tol: float) -> np.ndarray:
    J = J / np.abs(J).max()
    square = float(alg.scalar_product(J, alg.reverse(J)))
    size = np.sum(J * J)
    return J / np.sqrt(abs(square) if abs(square) > tol * size else size)


def _direct(alg, euclid, a, b, Va, Vb, tol, regressive):
    """(meet, join) of blades a, b of alg (subspaces represented directly)."""
    n = alg.n
    outer = alg.op(a, b)
    if np.abs(outer).max() > tol * np.abs(a).max() * np.abs(b).max():
        J = outer
    else:
        J = a.copy()
        span = Va.copy()
        project = Vb.T @ Vb
        for i in range(n):
            v = project[:, i]
            rest = v - span.T @ (span @ v)
            if np.linalg.norm(rest) > np.sqrt(tol) * max(np.linalg.norm(v), 1e-300) and np.linalg.norm(v) > tol:
                J = alg.op(J, alg.vector(v))
                span = np.vstack([span, rest / np.linalg.norm(rest)])
            if span.shape[0] == Va.shape[0] + Vb.shape[0]:
                break
    J = _unit(alg, J, tol)
    square = float(alg.scalar_product(J, alg.reverse(J)))
    space = alg if abs(square) > tol else euclid  # degenerate J: Euclidean contractions
    Jinv = space.reverse(J) / space.scalar_product(J, space.reverse(J))
    M = space.lc(space.lc(a, Jinv), b)
    if not np.abs(outer).max() > tol * np.abs(a).max() * np.abs(b).max() and np.sum(M * regressive) < 0:
        J, M = -J, -M
    return M, J


def meet_join(alg, a, b):
    r"""(meet, join) of blades a, b (..., 2**n) of ``alg``, broadcast over leading axes (module notes).

    float32 inputs are computed in float64 and rounded; ranks are decided at sqrt(eps) of the
    input dtype. ValueError for a zero or non-blade input.
    """
    a = alg._mv(a, "a")
    b = alg._mv(b, "b")
    dtype = np.result_type(a.dtype, b.dtype)
    shape = np.broadcast_shapes(a.shape, b.shape)
    A = np.broadcast_to(a, shape).reshape(-1, alg.dim).astype(np.float64)
    B = np.broadcast_to(b, shape).reshape(-1, alg.dim).astype(np.float64)
    tol = float(np.sqrt(np.finfo(dtype).eps))
    euclid = Layout(alg.n)
    degenerate = 0 in alg.metric
    meets = np.zeros_like(A)
    joins = np.zeros_like(A)
    for row in range(A.shape[0]):
        x, y = A[row], B[row]
        _grade_of_blade(alg, x, "a", tol)
        _grade_of_blade(alg, y, "b", tol)
        vee = dual(alg, alg.op(dual(alg, x, "hodge"), dual(alg, y, "hodge")), "hodge", inverse=True)
        if not degenerate:
            Vx, Vy = blade_vectors(alg, x, tol), blade_vectors(alg, y, tol)
            M, J = _direct(alg, euclid, x, y, Vx, Vy, tol, vee)
        else:
            sx, sy = dual(alg, x, "hodge"), dual(alg, y, "hodge")
            Vx, Vy = blade_vectors(euclid, sx, tol), blade_vectors(euclid, sy, tol)
            Md, Jd = _direct(euclid, euclid, sx, sy, Vx, Vy, tol, np.zeros_like(x))  # oriented below
            M = dual(alg, Md, "hodge", inverse=True)
            J = dual(alg, Jd, "hodge", inverse=True)
            outer = alg.op(x, y)
            if np.abs(vee).max() > tol * np.abs(x).max() * np.abs(y).max():
                sign = np.sign(np.sum(J * vee))
            elif np.abs(outer).max() > tol * np.abs(x).max() * np.abs(y).max():
                sign = np.sign(np.sum(M * outer))
            else:
                sign = 1.0
            M, J = sign * M, sign * J
        meets[row], joins[row] = M, J
    return meets.astype(dtype).reshape(shape), joins.astype(dtype).reshape(shape)


def meet(alg, a, b) -> np.ndarray:
    r"""Meet :math:`a \cap B` of blades (the intersection; module notes for scale, sign and PGA)."""
    return meet_join(alg, a, b)[0]


def join(alg, a, b) -> np.ndarray:
    r"""Join :math:`a \cup b` of blades (the smallest blade containing both, unit size; module notes)."""
    return meet_join(alg, a, b)[1]
