r"""The spacetime algebra in pictures: a boost of the light cone.

galinear writes spacetime as ``Algebra(3, 1)`` (``e1, e2, e3`` space, ``e4`` time with
:math:`e_4^2 = -1`, as ``galinear tour`` does) or ``Algebra(1, 3)`` (``e1`` time, squaring to +1).
Either works here: the time axis is the basis vector whose square differs from the other three.

A boost of rapidity :math:`\varphi` along the unit spatial direction n is the rotor
:math:`R = \exp(\tfrac{\varphi}{2} e_t^2\, n e_t)`: it sends :math:`e_t` to
:math:`\cosh\varphi\, e_t + \sinh\varphi\, n` (:func:`boost`). A boost keeps the light cone (null
vectors stay null) but moves light rays along it: seen from the boosted frame, the directions crowd
towards the direction of motion (aberration), which :func:`draw_light_cone_boost` shows.
"""
from __future__ import annotations

import numpy as np

from galinear.plot import _mpl

__all__ = ["time_index", "boost", "event", "split", "null_directions", "draw_light_cone_boost",
           "draw_boost_diagram"]


def time_index(algebra) -> int:
    """The position (0-based) of the time basis vector of Cl(3, 1) or Cl(1, 3)."""
    signature = tuple(algebra.signature)
    if signature not in ((3, 1, 0), (1, 3, 0)):
        raise ValueError(f"STA pictures need Algebra(3, 1) or Algebra(1, 3), got {algebra!r}")
    metric = list(algebra.metric)
    return next(i for i, m in enumerate(metric) if metric.count(m) == 1)


def _space(algebra) -> list[int]:
    t = time_index(algebra)
    return [i for i in range(4) if i != t]


def event(algebra, t, xyz):
    """Spacetime vectors ``t e_t + x e_x + y e_y + z e_z`` from t (...) and xyz (..., 3)."""
    from galinear.core.algebra import MultiVector

    t = np.asarray(t, dtype=float)
    xyz = np.asarray(xyz, dtype=float)
    shape = np.broadcast_shapes(t.shape, xyz.shape[:-1])
    coefficients = np.zeros(shape + (4,))
    coefficients[..., time_index(algebra)] = t
    coefficients[..., _space(algebra)] = xyz
    return MultiVector.vector(algebra, coefficients)


def split(v) -> tuple[np.ndarray, np.ndarray]:
    """(t (...), xyz (..., 3)) of spacetime vectors in the algebra's frame."""
    coefficients = np.asarray(v.values, dtype=float)[..., 1:5]
    return coefficients[..., time_index(v.algebra)], coefficients[..., _space(v.algebra)]


def boost(algebra, rapidity: float, direction=(1.0, 0.0, 0.0)):
    """The rotor of a boost of ``rapidity`` along ``direction`` (speed ``tanh(rapidity)`` in units of c)."""
    direction = np.asarray(direction, dtype=float)
    direction = direction / np.linalg.norm(direction)
    t = time_index(algebra)
    et = event(algebra, 1.0, np.zeros(3))
    n = event(algebra, 0.0, direction)
    square = float(algebra.metric[t])
    return ((0.5 * float(rapidity) * square) * (n * et)).exp()


def null_directions(algebra, count: int = 24):
    """``count`` future light rays ``e_t + cos(a) e_x + sin(a) e_y`` (a batch of null vectors)."""
    angle = np.linspace(0.0, 2 * np.pi, int(count), endpoint=False)
    xyz = np.stack([np.cos(angle), np.sin(angle), np.zeros_like(angle)], axis=-1)
    return event(algebra, np.ones_like(angle), xyz)


def _rapidity(R) -> float:
    t, xyz = split(R @ event(R.algebra, 1.0, np.zeros(3)))
    return float(np.arctanh(np.linalg.norm(xyz) / t))


def draw_light_cone_boost(R, ax=None, rays: int = 24, height: float = 1.25):
    """The future light cone in (x, y, t) with ``rays`` light rays before (grey) and after (colour)
    the boost ``R @ k``: each boosted ray is drawn to its point at t = 1, so the crowding of
    directions towards the motion shows on the circle t = 1. The boosted observer's time axis
    ``R e_t ~R`` is drawn in black. Returns the 3D axes."""
    ax = _mpl.new_axes(ax, three_d=True)
    algebra = R.algebra
    k = null_directions(algebra, rays)
    t0, x0 = split(k)
    t1, x1 = split(R @ k)
    # the cone itself
    phi, s = np.meshgrid(np.linspace(0, 2 * np.pi, 60), np.linspace(0, 1.0, 12))
    ax.plot_surface(s * np.cos(phi), s * np.sin(phi), s, color="#9ecae1", alpha=0.18, linewidth=0, shade=False)
    ring = np.linspace(0, 2 * np.pi, 100)  # t = 1
    ax.plot(np.cos(ring), np.sin(ring), np.ones_like(ring), color="0.4", linewidth=0.8)
    for j in range(rays):
        start, end = np.zeros(3), np.append(x0[j, :2] / t0[j], 1.0)
        ax.plot(*np.stack([start, end]).T, color="0.6", linewidth=0.8, label="light rays" if j == 0 else None)
        moved = np.append(x1[j, :2] / t1[j], 1.0)
        ax.plot(*np.stack([start, moved]).T, color="#d62728", linewidth=1.2,
                label="the same rays, boosted" if j == 0 else None)
    hits = np.column_stack([x1[:, :2] / t1[:, None], np.ones(rays)])
    ax.scatter(*hits.T, color="#d62728", s=12, depthshade=False)
    tu, xu = split(R @ event(algebra, 1.0, np.zeros(3)))
    axis = np.stack([np.zeros(3), np.append(xu[:2] / tu, 1.0) * height])
    ax.plot(*axis.T, color="black", linewidth=2.2, label="boosted observer's time axis")
    ax.plot([0, 0], [0, 0], [0, height], color="black", linewidth=1, linestyle="--", label="time axis")
    ax.set_xlim(-1.1, 1.1)
    ax.set_ylim(-1.1, 1.1)
    ax.set_zlim(0, height)
    ax.set_box_aspect((1, 1, 0.7))
    ax.set_xticks([-1, 0, 1])
    ax.set_yticks([-1, 0, 1])
    ax.set_zticks([0, 0.5, 1])
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("t")
    phi_ = _rapidity(R)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, 1.0))
    return _mpl.finish(ax, title=f"a boost of rapidity {phi_:.2f} (speed {np.tanh(phi_):.2f} c)")


def draw_boost_diagram(R, ax=None, extent: float = 2.0):
    """A spacetime diagram in (x, t): the light lines, the frame's axes, the boosted frame's axes
    ``R e_t ~R`` and ``R e_x ~R``, and the unit hyperbolas :math:`t^2 - x^2 = \\pm 1` on which both
    frames' unit events lie. Returns the 2D axes."""
    ax = _mpl.new_axes(ax, three_d=False)
    algebra = R.algebra
    s = np.linspace(-extent, extent, 2)
    ax.plot(s, s, color="#ff7f0e", linewidth=1, label="light")
    ax.plot(s, -s, color="#ff7f0e", linewidth=1)
    h = np.linspace(-1.4, 1.4, 200)
    for sign in (1, -1):
        ax.plot(np.sinh(h), sign * np.cosh(h), color="0.7", linewidth=0.8)
        ax.plot(sign * np.cosh(h), np.sinh(h), color="0.7", linewidth=0.8)
    ax.axhline(0, color="0.3", linewidth=0.8)
    ax.axvline(0, color="0.3", linewidth=0.8)
    frame = [(event(algebra, 1.0, np.zeros(3)), "t'"), (event(algebra, 0.0, np.array([1.0, 0.0, 0.0])), "x'")]
    for vector, name in frame:
        t, xyz = split(R @ vector)
        tip = np.array([xyz[0], t])
        reach = 1.5 * extent / float(np.max(np.abs(tip)))
        ax.plot(*np.stack([-reach * tip, reach * tip]).T,
                color="#1f77b4", linewidth=1.8, label="boosted axes" if name == "t'" else None)
        ax.scatter(*tip, color="#1f77b4", zorder=3, s=20)
        ax.annotate(name, tip, textcoords="offset points", xytext=(6, -2), color="#1f77b4")
    ax.set_xlim(-extent, extent)
    ax.set_ylim(-extent, extent)
    ax.set_aspect("equal")
    ax.set_xlabel("x")
    ax.set_ylabel("t")
    phi_ = _rapidity(R)
    return _mpl.finish(ax, title=f"boost of rapidity {phi_:.2f}: t' and x' tilt towards the light line", legend=True)
