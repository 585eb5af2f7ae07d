r"""Plane-based PGA in pictures: points, lines, planes and the path of a motor.

galinear's PGA algebras are ``Algebra(3, 0, 1)`` (3D) and ``Algebra(2, 0, 1)`` (2D). Their null
vector comes first: ``e1`` is the :math:`e_0` of the PGA literature, and ``e2, e3, e4`` are the
Euclidean x, y, z (``docs/core.md``, "Conventions"). In 3D

* a plane :math:`a x + b y + c z + d = 0` is the vector ``d e1 + a e2 + b e3 + c e4``;
* a point (x, y, z) is the trivector ``e234 - x e134 + y e124 - z e123`` (the convention of
  :func:`galinear.nn.motors.point`);
* the line through points P and Q is ``P & Q``; its Euclidean part
  ``dz e23 - dy e24 + dx e34`` holds the direction (dx, dy, dz) = Q - P;
* a motor is ``exp(B)`` of a bivector B and moves X by ``M @ X`` (``M X ~M``); ``exp(a e23)``
  turns by -2a about the z axis, ``exp(b e12)`` translates by -2b along x.

In 2D a line :math:`a x + b y + d = 0` is the vector ``d e1 + a e2 + b e3`` and a point (x, y) the
bivector ``e23 - x e13 + y e12``.

Extraction (:func:`coordinates`, :func:`plane_equation`, :func:`line_parameters`,
:func:`screw_axis`) is numpy only; drawing (:func:`draw`, :func:`draw_motor_path`) imports
matplotlib when called.
"""
from __future__ import annotations

import numpy as np

from galinear.plot import _mpl

__all__ = ["point", "plane", "line_through", "coordinates", "plane_equation", "line_parameters",
           "translation", "rotation", "screw", "motor_path", "screw_axis", "draw", "draw_motor_path"]

# weight blade, then (blade, sign) per Euclidean coordinate: P = w (weight + sum sign x_k blade_k)
_POINT_BLADES = {
    3: ("e234", (("e134", -1.0), ("e124", 1.0), ("e123", -1.0))),
    2: ("e23", (("e13", -1.0), ("e12", 1.0))),
}
_IDEAL_BIVECTORS = {3: ("e12", "e13", "e14"), 2: ("e12", "e13")}
_TINY = 1e-12


def _dimension(algebra) -> int:
    """d for the PGA algebra Cl(d, 0, 1) (d = 2 or 3); a ValueError for any other algebra."""
    signature = tuple(algebra.signature)
    if signature not in ((3, 0, 1), (2, 0, 1)):
        raise ValueError(f"PGA pictures need Algebra(3, 0, 1) or Algebra(2, 0, 1), got {algebra!r}")
    return signature[0]


def _mv(algebra, values):
    from galinear.core.algebra import MultiVector

    return MultiVector(algebra, values)


def _coefficient(X, name: str) -> np.ndarray:
    return np.asarray(X[name], dtype=float)


def _grade_of(X) -> int:
    """The single grade of a PGA element (a ValueError for a mixed or zero one)."""
    grades = [g for g in X.grades() if g != 0 or np.any(X.values[..., 0] != 0)]
    if len(grades) != 1:
        raise ValueError(f"expected a blade of one grade (a point, line or plane), got grades {tuple(grades)}: {X!r}")
    return grades[0]


# ----------------------------------------------------------------------------------- constructors
def point(algebra, coords):
    """PGA points at Euclidean ``coords`` (..., d): a batch of grade-d multivectors of weight 1."""
    d = _dimension(algebra)
    coords = np.asarray(coords, dtype=float)
    if coords.shape[-1:] != (d,):
        raise ValueError(f"coords must have a last axis of length {d} for {algebra!r}, got shape {coords.shape}")
    weight, blades = _POINT_BLADES[d]
    values = np.zeros(coords.shape[:-1] + (algebra.dim,))
    names = algebra.blade_names
    values[..., names.index(weight)] = 1.0
    for k, (name, sign) in enumerate(blades):
        values[..., names.index(name)] = sign * coords[..., k]
    return _mv(algebra, values)


def plane(algebra, normal, offset=0.0):
    """The plane (a line in 2D) ``normal . x + offset = 0``: the vector ``offset e1 + normal . (e2, e3[, e4])``."""
    d = _dimension(algebra)
    normal = np.asarray(normal, dtype=float)
    if normal.shape[-1:] != (d,):
        raise ValueError(f"normal must have a last axis of length {d} for {algebra!r}, got shape {normal.shape}")
    offset = np.asarray(offset, dtype=float)
    shape = np.broadcast_shapes(normal.shape[:-1], offset.shape)
    values = np.zeros(shape + (algebra.dim,))
    values[..., 1] = offset
    values[..., 2:2 + d] = normal
    return _mv(algebra, values)


def line_through(P, Q):
    """The line through points P and Q (``P & Q``), directed from P to Q."""
    return P & Q


# ----------------------------------------------------------------------------------- extraction
def coordinates(P) -> np.ndarray:
    """Euclidean coordinates (..., d) of PGA points (NaN for ideal points, whose weight is 0)."""
    d = _dimension(P.algebra)
    if _grade_of(P) != d:
        raise ValueError(f"coordinates() needs points (grade {d} in {P.algebra!r}), got grade {_grade_of(P)}")
    weight, blades = _POINT_BLADES[d]
    w = _coefficient(P, weight)
    safe = np.where(np.abs(w) > _TINY, w, np.nan)
    return np.stack([sign * _coefficient(P, name) / safe for name, sign in blades], axis=-1)


def plane_equation(p) -> tuple[np.ndarray, np.ndarray]:
    """(unit normal (..., d), offset (...)) with ``normal . x + offset = 0`` for planes (lines in 2D)."""
    d = _dimension(p.algebra)
    if _grade_of(p) != 1:
        raise ValueError(f"plane_equation() needs vectors (planes, or lines in 2D), got grade {_grade_of(p)}")
    values = np.asarray(p.values, dtype=float)
    normal, offset = values[..., 2:2 + d], values[..., 1]
    size = np.linalg.norm(normal, axis=-1)
    size = np.where(size > _TINY, size, np.nan)
    return normal / size[..., None], offset / size


def line_parameters(L) -> tuple[np.ndarray, np.ndarray]:
    """(support point (..., d), unit direction (..., d)) of lines: the point nearest the origin and the
    direction from P to Q for ``P & Q``. Lines are bivectors in 3D and vectors in 2D."""
    d = _dimension(L.algebra)
    grade = _grade_of(L)
    if d == 2:
        if grade != 1:
            raise ValueError(f"2D PGA lines are vectors (grade 1), got grade {grade}")
        normal, offset = plane_equation(L)
        direction = np.stack([normal[..., 1], -normal[..., 0]], axis=-1)
        return -offset[..., None] * normal, direction
    if grade != 2:
        raise ValueError(f"3D PGA lines are bivectors (grade 2), got grade {grade}")
    direction = np.stack([_coefficient(L, "e34"), -_coefficient(L, "e24"), _coefficient(L, "e23")], axis=-1)
    size = np.linalg.norm(direction, axis=-1)
    size = np.where(size > _TINY, size, np.nan)
    origin = point(L.algebra, np.zeros(3))
    foot = (origin | L) ^ L  # the plane through the origin perpendicular to L, met with L
    return coordinates(foot), direction / size[..., None]


# ----------------------------------------------------------------------------------- motors
def translation(algebra, vector):
    """The bivector B whose motor ``exp(B)`` translates by ``vector`` (..., d)."""
    d = _dimension(algebra)
    vector = np.asarray(vector, dtype=float)
    values = np.zeros(vector.shape[:-1] + (algebra.dim,))
    names = algebra.blade_names
    for k, name in enumerate(_IDEAL_BIVECTORS[d]):
        values[..., names.index(name)] = -0.5 * vector[..., k]
    return _mv(algebra, values)


def rotation(algebra, angle, centre=None, axis=(0.0, 0.0, 1.0)):
    """The bivector B whose motor ``exp(B)`` turns by ``angle`` (radians, counterclockwise seen from
    the tip of ``axis``): about the point ``centre`` in 2D, about the line through ``centre`` along
    ``axis`` in 3D (``centre`` defaults to the origin)."""
    d = _dimension(algebra)
    centre = np.zeros(d) if centre is None else np.asarray(centre, dtype=float)
    if d == 2:
        return (-0.5 * float(angle)) * point(algebra, centre)
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    L = line_through(point(algebra, centre), point(algebra, centre + axis))
    return (-0.5 * float(angle)) * L


def screw(algebra, angle, distance=0.0, centre=(0.0, 0.0, 0.0), axis=(0.0, 0.0, 1.0)):
    """The bivector of a screw motion in 3D: a turn by ``angle`` about the line through ``centre``
    along ``axis`` and a slide by ``distance`` along ``axis`` (the two commute)."""
    if _dimension(algebra) != 3:
        raise ValueError("a screw needs 3D PGA, Algebra(3, 0, 1); in 2D add rotation() and translation()")
    axis = np.asarray(axis, dtype=float)
    axis = axis / np.linalg.norm(axis)
    return rotation(algebra, angle, centre, axis) + translation(algebra, float(distance) * axis)


def motor_path(B, X, steps: int = 50):
    """``exp(t B) @ X`` for ``steps`` values of t from 0 to 1: a MultiVector of batch shape
    (steps,) + X.shape (the screw motion of X under the motor ``exp(B)``)."""
    from galinear.core.algebra import MultiVector

    _dimension(B.algebra)
    if B.shape:
        raise ValueError(f"motor_path takes one bivector B, got a batch of shape {B.shape}")
    if _grade_of(B) != 2:
        raise ValueError(f"B must be a bivector (the motor is exp(t B)), got grade {_grade_of(B)}")
    t = np.linspace(0.0, 1.0, int(steps)).reshape((-1,) + (1,) * (len(X.shape) + 1))
    motors = MultiVector(B.algebra, t * B.values).exp()
    return motors @ X


def screw_axis(B):
    """The axis of the screw motion ``exp(B)`` in 3D (a line; None for a pure translation).

    With :math:`B^2 = -\\theta^2 + p I`, the part of B along its axis is the line
    :math:`\\ell = B + \\frac{p}{2 \\theta^2} I B` (the rest, :math:`-\\frac{p}{2\\theta^2} I B`, is
    the slide along it)."""
    from galinear.core.algebra import MultiVector

    if _dimension(B.algebra) != 3:
        raise ValueError("screw_axis needs 3D PGA, Algebra(3, 0, 1)")
    square = B * B
    theta2 = -float(square["1"])
    if theta2 <= _TINY:
        return None
    I = MultiVector.pseudoscalar(B.algebra)
    p = float(square["e1234"])
    return (B + (p / (2 * theta2)) * (I * B)).grade(2)


# ----------------------------------------------------------------------------------- drawing
def _flat(X):
    """Every entry of a batched MultiVector, in order."""
    values = np.asarray(X.values).reshape(-1, X.algebra.dim)
    return [_mv(X.algebra, row) for row in values]



def draw(*objects, ax=None, labels=None, colors=None, extent=None, size: float = 36):
    """Draw PGA points, lines and planes (each a MultiVector, batched or not).

    The grade says what an object is: in 3D vectors are planes, bivectors lines and trivectors
    points; in 2D vectors are lines and bivectors points. Ideal elements (at infinity) are not
    drawn. Lines are drawn over ``extent`` on either side of their point nearest the scene's
    centre and planes as squares of half-side ``extent`` (default: from the points drawn).

    Returns the axes (3D axes for ``Algebra(3, 0, 1)``, created when ``ax`` is None).
    """
    if not objects:
        raise ValueError("draw() needs at least one multivector")
    d = _dimension(objects[0].algebra)
    for X in objects[1:]:
        if _dimension(X.algebra) != d:
            raise ValueError("every object must belong to the same PGA algebra")
    ax = _mpl.new_axes(ax, three_d=d == 3)
    if d == 3 and not _mpl.is_3d(ax):
        raise ValueError("3D PGA needs 3D axes: fig.add_subplot(projection='3d')")
    labels = list(labels) if labels is not None else [None] * len(objects)
    colors = list(colors) if colors is not None else [_mpl.colour(i) for i in range(len(objects))]
    scene = _mpl.scene(ax)
    kinds = []
    for X in objects:
        grade = _grade_of(X)
        kinds.append("point" if grade == d else "line" if (grade == 1 and d == 2) or grade == 2 else "plane")
    # the points first: they set the scene's centre and size
    anchors = [coordinates(X).reshape(-1, d) for X, kind in zip(objects, kinds) if kind == "point"]
    anchors += [line_parameters(X)[0].reshape(-1, d) for X, kind in zip(objects, kinds) if kind == "line"]
    known = np.concatenate(anchors + [np.asarray(s).reshape(-1, d) for s in scene if np.shape(s)[-1] == d]
                           or [np.zeros((1, d))])
    known = known[np.all(np.isfinite(known), axis=1)]
    centre = known.mean(axis=0) if len(known) else np.zeros(d)
    if extent is None:
        spread = np.linalg.norm(known - centre, axis=1).max() if len(known) else 0.0
        extent = max(1.0, 1.3 * float(spread))
    drawn = []
    for X, kind, label, color in zip(objects, kinds, labels, colors):
        for i, row in enumerate(_flat(X)):
            tag = label if i == 0 else None
            if kind == "point":
                xyz = coordinates(row)
                if np.all(np.isfinite(xyz)):
                    _mpl.scatter(ax, xyz, s=size, color=color, label=tag, depthshade=False) if d == 3 else \
                        _mpl.scatter(ax, xyz, s=size, color=color, label=tag, zorder=3)
                    drawn.append(xyz)
            elif kind == "line":
                support, direction = line_parameters(row)
                if not np.all(np.isfinite(direction)):
                    continue
                foot = support + np.dot(centre - support, direction) * direction
                ends = np.stack([foot - extent * direction, foot + extent * direction])
                if d == 2:
                    ax.axline(tuple(foot), tuple(foot + direction), color=color, label=tag, linewidth=1.6)
                else:
                    _mpl.plot_curve(ax, ends, color=color, label=tag, linewidth=2)
                drawn.append(ends)
            else:
                normal, offset = plane_equation(row)
                if not np.all(np.isfinite(normal)):
                    continue
                foot = centre - (np.dot(normal, centre) + offset) * normal
                corners = _mpl.patch(ax, foot, normal, extent, facecolor=color)
                closed = np.vstack([corners, corners[:1]])
                _mpl.plot_curve(ax, closed, color=color, linewidth=0.8, alpha=0.6, label=tag)
                drawn.append(corners)
    scene.extend(drawn)
    _mpl.fit_view(ax, np.concatenate([np.reshape(s, (-1, d)) for s in scene]) if scene else np.zeros((1, d)))
    return _mpl.finish(ax, legend=any(label is not None for label in labels))


def draw_motor_path(B, X, ax=None, steps: int = 60, frames: int = 5, color=None, label=None, axis: bool = True,
                    extent: float = 1.5):
    """Draw the motion of X (points, lines or planes) under the motors ``exp(t B)``, t in [0, 1].

    Points get their trajectory (a helix for a screw) with the start hollow and the end filled;
    lines and planes are drawn at ``frames`` times, fading in, over ``extent`` about their points
    nearest the scene's centre. In 3D, ``axis=True`` also draws the screw axis (:func:`screw_axis`)
    dashed. Returns the axes.
    """
    d = _dimension(B.algebra)
    ax = _mpl.new_axes(ax, three_d=d == 3)
    color = color or _mpl.colour(0)
    path = motor_path(B, X, steps)
    grade = _grade_of(X)
    if grade == d:  # points: trajectories
        xyz = coordinates(path).reshape(steps, -1, d)
        for j in range(xyz.shape[1]):
            _mpl.plot_curve(ax, xyz[:, j], color=color, linewidth=1.8, label=label if j == 0 else None)
        _mpl.scatter(ax, xyz[0], s=40, facecolors="white", edgecolors=color, zorder=3,
                     **({"depthshade": False} if d == 3 else {}))
        _mpl.scatter(ax, xyz[-1], s=40, color=color, zorder=3, **({"depthshade": False} if d == 3 else {}))
        for t in np.linspace(0, steps - 1, frames)[1:-1].round().astype(int):
            _mpl.scatter(ax, xyz[t], s=12, color=color, alpha=0.6, **({"depthshade": False} if d == 3 else {}))
        _mpl.scene(ax).extend([xyz.reshape(-1, d)])
        _mpl.fit_view(ax, np.concatenate([np.reshape(s, (-1, d)) for s in _mpl.scene(ax)]))
    else:
        picks = np.linspace(0, steps - 1, frames).round().astype(int)
        for n, t in enumerate(picks):
            alpha = 0.25 + 0.75 * n / max(1, frames - 1)
            frame = _mv(B.algebra, np.asarray(path.values)[t])
            draw(frame, ax=ax, colors=[color], labels=[label] if (label and n == frames - 1) else None, extent=extent)
            for artist in (ax.lines[-1:] if ax.lines else []):
                artist.set_alpha(alpha)
    if axis and d == 3:
        line = screw_axis(B)
        if line is not None:
            support, direction = line_parameters(line)
            drawn = _mpl.scene(ax)
            known = np.concatenate([np.reshape(s, (-1, 3)) for s in drawn]) if drawn else np.zeros((1, 3))
            reach = float(np.linalg.norm(known - support, axis=1).max()) if len(known) else 1.0
            foot = support + np.dot(known.mean(axis=0) - support, direction) * direction
            ends = np.stack([foot - reach * direction, foot + reach * direction])
            _mpl.plot_curve(ax, ends, color="0.35", linestyle="--", linewidth=1, label="screw axis")
    return _mpl.finish(ax, legend=label is not None or axis)
