r"""Conformal GA in pictures: points, point pairs, circles, spheres, lines, planes and their meets.

galinear's CGA of 3D space is ``Algebra(4, 1)``: ``e1, e2, e3`` Euclidean, ``e4`` squares to +1
and ``e5`` to -1 (positive vectors first, ``docs/core.md``). The null basis is
:math:`n_\infty = e_5 + e_4` and :math:`n_o = (e_5 - e_4)/2` (:math:`n_o \cdot n_\infty = -1`), and
a point is :math:`X = x + \tfrac12 |x|^2 n_\infty + n_o` (:func:`up`). ``Algebra(3, 1)`` is the
CGA of the plane in the same way (``e1, e2`` Euclidean).

Objects are outer-product (OPNS) blades: the circle through three points is ``up(a) ^ up(b) ^
up(c)``, a sphere ``up(a) ^ up(b) ^ up(c) ^ up(d)``, a line ``up(a) ^ up(b) ^ ninf``. Their meet
is the regressive product ``A & B`` (two spheres give their circle, a circle and a sphere their
point pair). A vector that is not null is read as a dual sphere (or dual plane) and drawn as the
sphere it stands for.

Extraction (:func:`describe`), with the standard formulas: a round X (point pair, circle, sphere)
has the dual sphere (its "surround") :math:`\sigma = X (X \wedge n_\infty)^{-1}`; scaled to
:math:`-\sigma \cdot n_\infty = 1`, its Euclidean part is the centre and :math:`\sigma^2` the
squared radius (negative for an imaginary round). A circle's plane is the dual of
:math:`X \wedge n_\infty`; a point pair's direction is the Euclidean part of
:math:`n_\infty \rfloor X`. A flat (:math:`X \wedge n_\infty = 0`) has the direction
:math:`n_o \rfloor (n_\infty \rfloor X)` (lines) or the normal of its dual (planes).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from galinear.plot import _mpl

__all__ = ["null_basis", "up", "down", "sphere", "dual_sphere", "plane", "circle_through", "describe", "Shape",
           "draw"]

_TINY = 1e-10


def _dimension(algebra) -> int:
    """d for the CGA of d-dimensional space, Cl(d + 1, 1) (d = 2 or 3)."""
    signature = tuple(algebra.signature)
    if signature not in ((4, 1, 0), (3, 1, 0)):
        raise ValueError(f"CGA pictures need Algebra(4, 1) (3D) or Algebra(3, 1) (2D), got {algebra!r}")
    return signature[0] - 1


def _mv(algebra, values):
    from galinear.core.algebra import MultiVector

    return MultiVector(algebra, values)


def null_basis(algebra):
    """(n_o, n_inf) of a CGA algebra: ``((e- - e+)/2, e- + e+)``."""
    d = _dimension(algebra)
    origin, infinity = np.zeros(algebra.dim), np.zeros(algebra.dim)
    plus, minus = 1 + d, 2 + d  # shortlex positions of e+ and e-
    origin[plus], origin[minus] = -0.5, 0.5
    infinity[plus], infinity[minus] = 1.0, 1.0
    return _mv(algebra, origin), _mv(algebra, infinity)


def _vector(algebra, euclidean, plus, minus):
    d = _dimension(algebra)
    euclidean = np.asarray(euclidean, dtype=float)
    shape = np.broadcast_shapes(euclidean.shape[:-1], np.shape(plus), np.shape(minus))
    values = np.zeros(shape + (algebra.dim,))
    values[..., 1:1 + d] = euclidean
    values[..., 1 + d] = plus
    values[..., 2 + d] = minus
    return _mv(algebra, values)


def up(algebra, x):
    """The conformal points of Euclidean ``x`` (..., d): :math:`x + \\tfrac12 |x|^2 n_\\infty + n_o`."""
    d = _dimension(algebra)
    x = np.asarray(x, dtype=float)
    if x.shape[-1:] != (d,):
        raise ValueError(f"x must have a last axis of length {d} for {algebra!r}, got shape {x.shape}")
    half = 0.5 * np.sum(x * x, axis=-1)
    return _vector(algebra, x, half - 0.5, half + 0.5)


def _euclidean(v) -> np.ndarray:
    d = _dimension(v.algebra)
    return np.asarray(v.values, dtype=float)[..., 1:1 + d]


def _dot(a, b) -> np.ndarray:
    """The scalar product of vectors, an array of the batch shape."""
    return np.asarray(a.scalar_product(b), dtype=float)


def down(X) -> np.ndarray:
    """Euclidean coordinates (..., d) of conformal points (any non-zero weight)."""
    _, infinity = null_basis(X.algebra)
    weight = -_dot(X, infinity)
    weight = np.where(np.abs(weight) > _TINY, weight, np.nan)
    return _euclidean(X) / weight[..., None]


def dual_sphere(algebra, centre, radius):
    """The dual sphere :math:`\\sigma = \\mathrm{up}(c) - \\tfrac12 r^2 n_\\infty` (a vector; a
    circle in 2D); ``radius**2`` may be negative for an imaginary sphere."""
    _, infinity = null_basis(algebra)
    return up(algebra, centre) - (0.5 * np.asarray(radius, dtype=float) ** 2) * infinity


def sphere(algebra, centre, radius):
    """The sphere (a circle in 2D) as an OPNS blade of grade d + 1: the undual of :func:`dual_sphere`."""
    return dual_sphere(algebra, centre, radius).undual()


def plane(algebra, normal, offset=0.0):
    """The plane (a line in 2D) ``normal . x + offset = 0`` as an OPNS blade: the undual of
    :math:`n - \\mathrm{offset}\\, n_\\infty`."""
    _dimension(algebra)
    offset = np.asarray(offset, dtype=float)
    return _vector(algebra, normal, -offset, -offset).undual()


def circle_through(algebra, a, b, c):
    """The circle (or line, for collinear points) through three Euclidean points."""
    return up(algebra, a) ^ up(algebra, b) ^ up(algebra, c)


@dataclass
class Shape:
    """What a CGA blade stands for (:func:`describe`).

    ``kind`` is one of "point", "point pair", "circle", "sphere", "flat point", "line", "plane".
    ``centre`` is the centre of a round, the point itself, or the point of a flat nearest the
    origin. ``radius_squared`` is negative for imaginary rounds (NaN for flats and points).
    ``direction`` is the unit direction of a point pair or a line; ``normal`` the unit normal of a
    circle's plane (3D) or of a plane; ``points`` the two points of a real point pair.
    """

    kind: str
    centre: np.ndarray
    radius_squared: float = float("nan")
    direction: np.ndarray | None = None
    normal: np.ndarray | None = None
    points: np.ndarray | None = None

    @property
    def radius(self) -> float:
        """The radius of a real round (NaN for imaginary rounds, flats and points)."""
        return float(np.sqrt(self.radius_squared)) if self.radius_squared >= 0 else float("nan")

    @property
    def real(self) -> bool:
        """False for an imaginary round (negative squared radius)."""
        return not self.radius_squared < 0


def _unit(v: np.ndarray) -> np.ndarray:
    size = np.linalg.norm(v)
    return v / size if size > _TINY else np.full_like(v, np.nan)


def _grade(X) -> int:
    scale = max(float(np.max(np.abs(X.values))), _TINY)
    grades = X.clean(scale * 1e-12).grades()
    if len(grades) != 1 or grades[0] == 0:
        raise ValueError(f"expected a CGA blade of one grade (1 to {X.algebra.n - 1}), got grades {grades}: {X!r}")
    return grades[0]


def describe(X) -> Shape:
    """The kind, centre, radius, direction or normal of one (unbatched) CGA blade (module notes)."""
    d = _dimension(X.algebra)
    if X.shape:
        raise ValueError(f"describe() takes one multivector; for a batch use [describe(x) for x in X], got {X.shape}")
    origin, infinity = null_basis(X.algebra)
    grade = _grade(X)
    scale = float(np.max(np.abs(X.values)))
    if grade == 1:
        if abs(float(_dot(X, X))) <= 1e-9 * scale ** 2:
            return Shape("point", down(X))
        X = X.undual()  # a dual sphere or dual plane: its OPNS blade
        grade = X.algebra.n - 1
    carrier = X ^ infinity
    flat = float(np.max(np.abs(carrier.values))) <= 1e-9 * scale * 2
    if not flat:
        surround = (X * carrier.inv()).grade(1)
        surround = surround / float(-_dot(surround, infinity))
        shape = Shape({2: "point pair", 3: "circle", 4: "sphere"}[grade] if d == 3 else
                      {2: "point pair", 3: "circle"}[grade],
                      _euclidean(surround), float(_dot(surround, surround)))
        if grade == 2:
            shape.direction = _unit(_euclidean(infinity << X))
            if shape.real:
                shape.points = np.stack([shape.centre - shape.radius * shape.direction,
                                         shape.centre + shape.radius * shape.direction])
        elif grade == 3 and d == 3:
            shape.normal = _unit(_euclidean(carrier.dual()))
        return shape
    # flats
    if grade == X.algebra.n - 1:  # a plane (a line in 2D): from its dual n + delta n_inf, n . x = delta
        dual = X.dual()
        normal = _euclidean(dual)
        delta = -float(_dot(dual, origin))
        size = float(np.linalg.norm(normal))
        kind = "plane" if d == 3 else "line"
        shape = Shape(kind, delta * normal / size ** 2, normal=normal / size)
        if d == 2:
            shape.direction = np.array([shape.normal[1], -shape.normal[0]])
        return shape
    if grade == 2:  # a flat point, up(p) ^ n_inf up to scale
        return Shape("flat point", _flat_point(origin << X, infinity))
    # a line in 3D: direction, then its point met with the plane through the origin across it
    direction = -_unit(_euclidean(origin << (infinity << X)))
    across = plane(X.algebra, direction, 0.0)
    return Shape("line", _flat_point(origin << (X & across), infinity), direction=direction)


def _flat_point(q, infinity) -> np.ndarray:
    """p from q = w (p + n_o) (NaN when w = 0: the flat point lies at infinity)."""
    weight = float(-_dot(q, infinity))
    if abs(weight) <= _TINY * max(1.0, float(np.max(np.abs(q.values)))):
        return np.full(_dimension(q.algebra), np.nan)
    return _euclidean(q) / weight


def _flat(X):
    values = np.asarray(X.values).reshape(-1, X.algebra.dim)
    return [_mv(X.algebra, row) for row in values]


def _circle_points(centre, radius, normal, count=120):
    u, v = _mpl.orthonormal_pair(normal)
    phi = np.linspace(0.0, 2 * np.pi, count)
    return centre + radius * (np.cos(phi)[:, None] * u + np.sin(phi)[:, None] * v)



def draw(*objects, ax=None, labels=None, colors=None, extent=None, size: float = 36, surfaces: bool = True):
    """Draw CGA blades: points, point pairs, circles, spheres, flat points, lines and planes.

    Each object is a MultiVector (batched or not) of ``Algebra(4, 1)`` (3D axes) or
    ``Algebra(3, 1)`` (2D axes); :func:`describe` says what each one is. Imaginary rounds are not
    drawn. Spheres are drawn as a light surface with a wire mesh (``surfaces=False``: the mesh
    only); lines and planes over ``extent`` around the point nearest the scene's centre.
    On 2D axes, 3D objects are drawn in their projection on the xy plane. Returns the axes.
    """
    if not objects:
        raise ValueError("draw() needs at least one multivector")
    d = _dimension(objects[0].algebra)
    ax = _mpl.new_axes(ax, three_d=d == 3)
    labels = list(labels) if labels is not None else [None] * len(objects)
    colors = list(colors) if colors is not None else [_mpl.colour(i) for i in range(len(objects))]
    shapes = [[describe(row) for row in _flat(X)] for X in objects]
    anchors = [s.centre for group in shapes for s in group if np.all(np.isfinite(s.centre))]
    scene = _mpl.scene(ax)
    known = np.array(anchors + [p for s in scene for p in np.reshape(s, (-1, d))] or [np.zeros(d)]).reshape(-1, d)
    centre = known.mean(axis=0)
    if extent is None:
        reach = [np.linalg.norm(known - centre, axis=1).max()]
        reach += [s.radius for group in shapes for s in group if np.isfinite(s.radius)]
        extent = max(1.0, 1.2 * float(max(reach)))
    marker = {"depthshade": False} if _mpl.is_3d(ax) else {"zorder": 3}
    drawn = []
    for group, label, color in zip(shapes, labels, colors):
        for i, s in enumerate(group):
            tag = label if i == 0 else None
            if s.kind in ("point", "flat point"):
                _mpl.scatter(ax, s.centre, s=size, color=color, label=tag, marker="o" if s.kind == "point" else "x",
                             **marker)
                drawn.append(s.centre)
            elif not s.real:
                continue
            elif s.kind == "point pair":
                _mpl.scatter(ax, s.points, s=size, color=color, label=tag, marker="D", **marker)
                _mpl.plot_curve(ax, s.points, color=color, linestyle=":", linewidth=1)
                drawn.append(s.points)
            elif s.kind == "circle":
                normal = s.normal if d == 3 else np.array([0.0, 0.0, 1.0])
                ring = _circle_points(_mpl.take(s.centre, _FakeAxes3D), s.radius, normal)
                _mpl.plot_curve(ax, ring[:, :d] if d == 2 else ring, color=color, linewidth=2, label=tag)
                drawn.append(ring[:, :d])
            elif s.kind == "sphere":
                drawn.append(_draw_sphere(ax, s, color, tag, surfaces))
            elif s.kind == "line":
                foot = s.centre + np.dot(centre - s.centre, s.direction) * s.direction
                ends = np.stack([foot - extent * s.direction, foot + extent * s.direction])
                if d == 2 or not _mpl.is_3d(ax):
                    ax.axline(tuple(ends[0][:2]), tuple(ends[1][:2]), color=color, linewidth=1.6, label=tag)
                else:
                    _mpl.plot_curve(ax, ends, color=color, linewidth=2, label=tag)
                drawn.append(ends)
            elif s.kind == "plane" and _mpl.is_3d(ax):
                foot = centre - np.dot(centre - s.centre, s.normal) * s.normal
                corners = _mpl.patch(ax, foot, s.normal, extent, facecolor=color)
                _mpl.plot_curve(ax, np.vstack([corners, corners[:1]]), color=color, linewidth=0.8, alpha=0.6,
                                label=tag)
                drawn.append(corners)
    scene.extend(np.reshape(p, (-1, d)) for p in drawn)
    if scene:
        _mpl.fit_view(ax, np.concatenate([_mpl.take(np.reshape(p, (-1, d)), ax) for p in scene]))
    return _mpl.finish(ax, legend=any(label is not None for label in labels))


class _FakeAxes3D:
    """Stands for 3D axes in :func:`galinear.plot._mpl.take` (pads 2D points with z = 0)."""

    name = "3d"


def _draw_sphere(ax, s, color, label, surfaces):
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 36), np.linspace(0, np.pi, 18))
    xyz = s.centre[:, None, None] + s.radius * np.array([np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v)])
    if _mpl.is_3d(ax):
        if surfaces:
            ax.plot_surface(*xyz, color=color, alpha=0.12, linewidth=0, shade=False)
        ax.plot_wireframe(*xyz, color=color, linewidth=0.4, alpha=0.5, rstride=3, cstride=3, label=label)
    else:
        ring = _circle_points(s.centre, s.radius, np.array([0.0, 0.0, 1.0]))
        _mpl.plot_curve(ax, ring, color=color, linewidth=1.5, label=label)
    return xyz.reshape(3, -1).T
