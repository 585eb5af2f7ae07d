"""matplotlib, imported when a picture is drawn, and the axes helpers the drawing modules share."""
from __future__ import annotations

import numpy as np

INSTALL_HINT = "galinear.plot needs matplotlib: pip install 'galinear[plot]'"


def pyplot():
    """``matplotlib.pyplot``, or an ImportError naming the extra to install."""
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return plt


def is_3d(ax) -> bool:
    return getattr(ax, "name", "") == "3d"


def new_axes(ax=None, three_d: bool = False, figsize=None):
    """``ax`` itself, or a new figure's axes (3D when ``three_d``)."""
    if ax is not None:
        return ax
    plt = pyplot()
    fig = plt.figure(figsize=figsize or ((6.4, 5.6) if three_d else (5.6, 5.0)))
    if three_d:
        return fig.add_subplot(projection="3d")
    ax = fig.add_subplot()
    ax.set_aspect("equal")
    return ax


def fit_view(ax, points, margin: float = 0.15) -> None:
    """Equal scales on every axis around ``points`` (..., 2 or 3) and what the axes already show."""
    points = np.asarray(points, dtype=float).reshape(-1, 3 if is_3d(ax) else 2)
    points = points[np.all(np.isfinite(points), axis=1)]
    if not len(points):
        return
    low, high = points.min(axis=0), points.max(axis=0)
    centre = (low + high) / 2
    half = max(float(np.max(high - low)) / 2, 1e-9) * (1 + margin)
    if is_3d(ax):
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_zlim(centre[2] - half, centre[2] + half)
        ax.set_box_aspect((1, 1, 1))
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_zlabel("z")
    else:
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_aspect("equal")
        ax.set_xlabel("x")
        ax.set_ylabel("y")


def scene(ax) -> list:
    """The coordinates drawn on ``ax`` by galinear.plot so far (kept so that a later call on the
    same axes fits them all in view)."""
    drawn = getattr(ax, "_galinear_scene", None)
    if drawn is None:
        drawn = []
        ax._galinear_scene = drawn
    return drawn


def take(points, ax) -> np.ndarray:
    """Coordinates (..., 3) cut to what ``ax`` shows: all three in 3D, x and y in 2D."""
    points = np.asarray(points, dtype=float)
    if is_3d(ax):
        if points.shape[-1] == 2:
            return np.concatenate([points, np.zeros(points.shape[:-1] + (1,))], axis=-1)
        return points
    return points[..., :2]


def plot_curve(ax, points, **style):
    """A polyline through ``points`` (m, 2 or 3) in 2D or 3D axes."""
    points = take(points, ax)
    return ax.plot(*points.T, **style)


def scatter(ax, points, **style):
    points = take(np.atleast_2d(points), ax)
    return ax.scatter(*points.T, **style)


def text(ax, point, label, **style):
    point = take(point, ax)
    style = {"fontsize": 9, **style}
    return ax.text(*point, " " + label, **style)


def orthonormal_pair(normal: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Two unit vectors perpendicular to ``normal`` (3,) and to each other."""
    normal = normal / np.linalg.norm(normal)
    helper = np.eye(3)[int(np.argmin(np.abs(normal)))]
    u = np.cross(normal, helper)
    u /= np.linalg.norm(u)
    return u, np.cross(normal, u)


def patch(ax, centre, normal, half: float, **style):
    """A square of side ``2 half`` centred at ``centre`` (3,) with the given normal (3D axes)."""
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    u, v = orthonormal_pair(np.asarray(normal, dtype=float))
    corners = [centre + half * (a * u + b * v) for a, b in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
    style = {"alpha": 0.25, "edgecolor": "none", **style}
    face = Poly3DCollection([corners], **style)
    ax.add_collection3d(face)
    return np.array(corners)


def colour(index: int) -> str:
    """The ``index``-th colour of matplotlib's default cycle."""
    cycle = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf",
             "#bcbd22", "#7f7f7f")
    return cycle[index % len(cycle)]


def finish(ax, title=None, legend: bool = False):
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        if labels:
            ax.legend(fontsize=8, loc="best")
    return ax
