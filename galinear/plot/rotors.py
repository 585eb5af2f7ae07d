r"""Rotors and rotor layers in pictures: each simple rotor's plane and angle.

A Euclidean bivector B of Cl(n) is a sum of at most k = floor(n/2) simple parts
:math:`\theta_j\, u_j \wedge w_j` on orthogonal planes (the invariant decomposition,
:meth:`galinear.Algebra.decompose`), and the rotor :math:`\exp(B)` turns the vectors of plane j by
:math:`2\theta_j` under :math:`R x \tilde R`. These pictures show them for

* a :class:`galinear.nn.RotorLinear` (through :func:`galinear.nn.inspect.planes`; its left rotors,
  or its right ones with ``side="right"``), or the :class:`~galinear.nn.inspect.RotorPlanes` of one;
* bivectors: a MultiVector of a Euclidean algebra, or coefficients (..., C(n, 2)) in
  ``galinear.blades.bivector_pairs(n)`` order.

:func:`rotor_planes` gives the numbers (numpy only); :func:`draw_rotor_angles` a bar chart of the
turns per rotor and plane, :func:`draw_rotor_planes` one rotor's planes as wedges of their turn
labelled with each plane's unit bivector, :func:`draw_bivector_matrix` one rotor's coefficient
(skew) matrix :math:`A_{ij} = b_{ij}`.
"""
from __future__ import annotations

from dataclasses import dataclass
from math import comb

import numpy as np

from galinear.plot import _mpl

__all__ = ["RotorAngles", "rotor_planes", "plane_name", "draw_rotor_angles", "draw_rotor_planes",
           "draw_bivector_matrix"]


@dataclass
class RotorAngles:
    """The invariant planes of P rotors of Cl(n).

    ``angles`` (P, k): :math:`\\theta_j`, decreasing (the turn is :math:`2\\theta_j`);
    ``planes`` (P, k, 2, n): orthonormal (u_j, w_j); ``bivectors`` (P, k, C(n, 2)): the simple
    parts, which sum to each rotor's bivector; ``labels``: a name per rotor.
    """

    n: int
    angles: np.ndarray
    planes: np.ndarray
    bivectors: np.ndarray
    labels: list

    @property
    def turns_degrees(self) -> np.ndarray:
        """The rotation :math:`2\\theta_j` of each plane, in degrees."""
        return np.degrees(2 * self.angles)

    @property
    def matrices(self) -> np.ndarray:
        """(P, n, n) skew matrices :math:`A_{ij} = b_{ij}` of the rotors' bivectors."""
        from galinear.blades import bivector_pairs

        pairs = bivector_pairs(self.n)
        total = self.bivectors.sum(axis=1)
        out = np.zeros(total.shape[:-1] + (self.n, self.n))
        out[..., pairs[:, 0], pairs[:, 1]] = total
        out[..., pairs[:, 1], pairs[:, 0]] = -total
        return out


def _n_from_count(count: int) -> int:
    for n in range(2, 21):
        if comb(n, 2) == count:
            return n
    raise ValueError(f"{count} bivector coefficients is C(n, 2) for no n; pass a MultiVector instead")


def rotor_planes(source, side: str = "left") -> RotorAngles:
    """The planes and angles of ``source``: a RotorLinear, its RotorPlanes, or bivectors (module notes)."""
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    if hasattr(source, "left_bivectors") and not hasattr(source, "left_angles"):  # a RotorLinear
        from galinear.nn.inspect import planes

        source = planes(source)
    if hasattr(source, "left_angles"):  # a RotorPlanes
        angles = getattr(source, f"{side}_angles")
        if angles is None:
            raise ValueError("this layer has single rotors: it has no right rotors; use side='left'")
        labels = [f"{p}: in {i} -> out {o}" for p, (i, o) in enumerate(zip(source.input_chunk, source.output_chunk))]
        return RotorAngles(source.n, np.asarray(angles), np.asarray(getattr(source, f"{side}_planes")),
                           np.asarray(getattr(source, f"{side}_bivectors")), labels)
    from galinear.core import Algebra

    if hasattr(source, "algebra") and hasattr(source, "values"):  # a MultiVector
        algebra = source.algebra
        if not algebra.euclidean:
            raise ValueError(f"rotor pictures need a Euclidean algebra, got {algebra!r}")
        coefficients = algebra.bivector_coefficients(np.asarray(source.values, dtype=float))
    else:
        coefficients = np.asarray(source, dtype=float)
        algebra = Algebra(_n_from_count(coefficients.shape[-1]))
    coefficients = coefficients.reshape(-1, coefficients.shape[-1])
    dec = algebra.decompose(algebra.bivector(coefficients))
    return RotorAngles(algebra.n, np.asarray(dec.angles), np.asarray(dec.planes), np.asarray(dec.bivectors),
                       [f"rotor {p}" for p in range(coefficients.shape[0])])


def plane_name(u: np.ndarray, w: np.ndarray, terms: int = 2) -> str:
    """The unit bivector :math:`u \\wedge w` by its largest coefficients, e.g. ``+0.98 e13 -0.12 e24``."""
    from galinear.blades import bivector_pairs

    pairs = bivector_pairs(len(u))
    unit = u[pairs[:, 0]] * w[pairs[:, 1]] - u[pairs[:, 1]] * w[pairs[:, 0]]
    order = np.argsort(-np.abs(unit))[:terms]
    return " ".join(f"{unit[m]:+.2f} e{pairs[m, 0] + 1}{pairs[m, 1] + 1}" for m in order if abs(unit[m]) > 5e-3)


def draw_rotor_angles(source, ax=None, side: str = "left", limit: int = 16):
    """A bar chart of the turn :math:`2\\theta_j` (degrees) of every plane j of each rotor (the first
    ``limit`` rotors). Returns the axes."""
    data = rotor_planes(source, side)
    ax = _mpl.new_axes(ax, figsize=(7.0, 3.8))
    if not _mpl.is_3d(ax):
        ax.set_aspect("auto")
    turns = data.turns_degrees[:limit]
    rotors, k = turns.shape
    width = 0.8 / max(k, 1)
    x = np.arange(rotors)
    for j in range(k):
        ax.bar(x + (j - (k - 1) / 2) * width, turns[:, j], width, color=_mpl.colour(j), label=f"plane {j + 1}")
    ax.set_xticks(x)
    ax.set_xticklabels(data.labels[:limit], rotation=30 if rotors > 4 else 0, ha="right" if rotors > 4 else "center",
                       fontsize=8)
    ax.set_ylabel("turn 2θ (degrees)")
    ax.set_xlabel("rotor")
    ax.grid(axis="y", alpha=0.3)
    return _mpl.finish(ax, title=f"{side} rotors of Cl({data.n}): the turn of each invariant plane", legend=k > 0)


def draw_rotor_planes(source, index: int = 0, ax=None, side: str = "left"):
    """One rotor's invariant planes as wedges of their turn :math:`2\\theta_j` (polar axes, one ring
    per plane), each labelled with its unit bivector. Returns the (polar) axes."""
    data = rotor_planes(source, side)
    if ax is None:
        fig = _mpl.pyplot().figure(figsize=(5.6, 5.0))
        ax = fig.add_subplot(projection="polar")
    angles = data.angles[index]
    k = len(angles)
    for j in range(k):
        turn = 2 * float(angles[j])
        ax.bar(turn / 2, 0.8, width=turn, bottom=j + 0.6, color=_mpl.colour(j), alpha=0.75, edgecolor="white",
               label=f"plane {j + 1}: {np.degrees(turn):.1f}°  {plane_name(*data.planes[index, j])}")
    ax.set_ylim(0, k + 0.6)
    ax.set_yticks([])
    ax.set_xticks(np.radians([0, 45, 90, 135, 180, 225, 270, 315]))
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.06))
    return _mpl.finish(ax, title=f"{data.labels[index]} of Cl({data.n}): planes and turns")


def draw_bivector_matrix(source, index: int = 0, ax=None, side: str = "left"):
    """The coefficient matrix :math:`A_{ij} = b_{ij}` (skew) of one rotor's bivector, as a heat map
    with a symmetric colour scale. Returns the axes."""
    data = rotor_planes(source, side)
    matrix = data.matrices[index]
    ax = _mpl.new_axes(ax)
    top = float(np.max(np.abs(matrix))) or 1.0
    image = ax.imshow(matrix, cmap="RdBu_r", vmin=-top, vmax=top)
    names = [f"e{i + 1}" for i in range(data.n)]
    step = max(1, data.n // 16)
    ax.set_xticks(range(0, data.n, step))
    ax.set_xticklabels(names[::step], fontsize=8)
    ax.set_yticks(range(0, data.n, step))
    ax.set_yticklabels(names[::step], fontsize=8)
    ax.figure.colorbar(image, ax=ax, shrink=0.8, label="b_ij")
    return _mpl.finish(ax, title=f"{data.labels[index]}: coefficients b_ij of its bivector")
