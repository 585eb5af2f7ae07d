"""PGA pictures: each drawing runs, and the geometry read back from the multivectors is right."""
import numpy as np
import pytest

from galinear import Algebra, MultiVector
from galinear.plot import draw_motor_path, draw_pga, pga

PGA3 = Algebra(3, 0, 1)
PGA2 = Algebra(2, 0, 1)


def test_points_round_trip_and_match_the_torch_convention():
    xyz = np.array([[1.0, -2.0, 3.5], [0.0, 0.25, -1.0]])
    P = pga.point(PGA3, xyz)
    assert P.known_grades == (3,)
    np.testing.assert_allclose(pga.coordinates(P), xyz)
    np.testing.assert_allclose(pga.coordinates(3.0 * P), xyz)  # any weight
    names = PGA3.blade_names  # e234 - x e134 + y e124 - z e123, galinear.nn.motors.point's blades
    np.testing.assert_allclose(P.values[0, [names.index(b) for b in ("e234", "e134", "e124", "e123")]],
                               [1.0, -1.0, -2.0, -3.5])
    np.testing.assert_allclose(pga.coordinates(pga.point(PGA2, [[2.0, -1.0]])), [[2.0, -1.0]])


@pytest.mark.parametrize("algebra, a, b", [(PGA3, [1.0, 2.0, 3.0], [0.0, 1.0, -1.0]), (PGA2, [1.0, 2.0], [3.0, 5.0])])
def test_line_through_two_points_passes_through_both(algebra, a, b):
    P, Q = pga.point(algebra, a), pga.point(algebra, b)
    L = pga.line_through(P, Q)
    assert np.allclose((L ^ P).values, 0) and np.allclose((L ^ Q).values, 0)  # incidence, exact algebra
    support, direction = pga.line_parameters(L)
    a, b = np.array(a), np.array(b)
    np.testing.assert_allclose(direction, (b - a) / np.linalg.norm(b - a))
    for p in (a, b):  # both points lie on the drawn line support + s direction
        offset = p - support
        np.testing.assert_allclose(offset, np.dot(offset, direction) * direction, atol=1e-12)
    assert abs(np.dot(support, direction)) < 1e-12  # the support point is the one nearest the origin


def test_plane_equation_and_the_meet_of_a_line_and_a_plane():
    p = pga.plane(PGA3, [1.0, 1.0, 1.0], -6.0)  # x + y + z = 6
    normal, offset = pga.plane_equation(p)
    np.testing.assert_allclose(normal, np.ones(3) / np.sqrt(3))
    np.testing.assert_allclose(offset, -6 / np.sqrt(3))
    assert np.allclose((p ^ pga.point(PGA3, [1.0, 2.0, 3.0])).values, 0)
    L = pga.line_through(pga.point(PGA3, [0.0, 0.0, 0.0]), pga.point(PGA3, [1.0, 1.0, 1.0]))
    np.testing.assert_allclose(pga.coordinates(L ^ p), [2.0, 2.0, 2.0])  # plane-based: the meet is ^


def test_translation_and_rotation_bivectors():
    origin = pga.point(PGA3, [0.0, 0.0, 0.0])
    T = pga.translation(PGA3, [1.0, -2.0, 0.5]).exp()
    np.testing.assert_allclose(pga.coordinates(T @ origin), [1.0, -2.0, 0.5], atol=1e-12)
    R = pga.rotation(PGA3, np.pi / 2, centre=[1.0, 0.0, 0.0], axis=[0.0, 0.0, 1.0]).exp()
    np.testing.assert_allclose(pga.coordinates(R @ origin), [1.0, -1.0, 0.0], atol=1e-12)  # counterclockwise
    R2 = pga.rotation(PGA2, np.pi / 2, centre=[1.0, 0.0]).exp()
    np.testing.assert_allclose(pga.coordinates(R2 @ pga.point(PGA2, [2.0, 0.0])), [1.0, 1.0], atol=1e-12)


def test_motor_path_is_the_helix_of_the_screw_and_ends_at_the_motor():
    angle, rise = 1.5 * np.pi, 2.0
    B = pga.screw(PGA3, angle, rise, centre=[0.5, 0.0, 0.0], axis=[0.0, 0.0, 1.0])
    start = np.array([[1.5, 0.0, 0.0], [0.5, 1.0, -1.0]])
    path = pga.motor_path(B, pga.point(PGA3, start), steps=9)
    xyz = pga.coordinates(path)
    assert xyz.shape == (9, 2, 3)
    t = np.linspace(0, 1, 9)[:, None]
    for j, (x0, y0, z0) in enumerate(start):  # about the axis x = 0.5, y = 0: turn t angle, rise t rise
        c, s = np.cos(angle * t[:, 0]), np.sin(angle * t[:, 0])
        expected = np.stack([0.5 + c * (x0 - 0.5) - s * y0, s * (x0 - 0.5) + c * y0, z0 + rise * t[:, 0]], axis=-1)
        np.testing.assert_allclose(xyz[:, j], expected, atol=1e-12)
    # the endpoints are the motor exp(B) applied numerically, and t = 0 is the identity
    moved = B.exp() @ pga.point(PGA3, start)
    np.testing.assert_allclose(xyz[-1], pga.coordinates(moved), atol=1e-12)
    np.testing.assert_allclose(xyz[0], start, atol=1e-12)
    axis = pga.screw_axis(B)
    support, direction = pga.line_parameters(axis)
    np.testing.assert_allclose(np.abs(direction), [0.0, 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(support, [0.5, 0.0, 0.0], atol=1e-12)


def test_motor_path_of_a_line_keeps_it_a_line():
    B = pga.screw(PGA3, np.pi / 3, 1.0)
    L = pga.line_through(pga.point(PGA3, [1.0, 0.0, 0.0]), pga.point(PGA3, [1.0, 1.0, 0.0]))
    path = pga.motor_path(B, L, steps=5)
    assert path.shape == (5,)
    _, direction = pga.line_parameters(path[-1])
    np.testing.assert_allclose(direction, [-np.sin(np.pi / 3), np.cos(np.pi / 3), 0.0], atol=1e-12)


def test_drawings_return_their_axes():
    P = pga.point(PGA3, [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    L = pga.line_through(P[0], P[1])
    ax = draw_pga(P, L, pga.plane(PGA3, [0.0, 0.0, 1.0]), labels=["points", "line", "plane"])
    assert ax.name == "3d" and len(ax.collections) >= 2 and ax.get_legend() is not None
    assert draw_motor_path(pga.screw(PGA3, 1.0, 1.0), P, ax=ax) is ax
    assert draw_motor_path(pga.screw(PGA3, 1.0, 1.0), L) is not None
    ax2 = draw_pga(pga.point(PGA2, [[0.0, 0.0], [1.0, 1.0]]), pga.plane(PGA2, [1.0, 1.0], -1.0))
    assert ax2.name != "3d"
    assert draw_motor_path(pga.rotation(PGA2, 1.0, [1.0, 0.0]), pga.point(PGA2, [2.0, 0.0]), ax=ax2) is ax2


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="Algebra\\(3, 0, 1\\)"):
        pga.point(Algebra(3), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="one grade"):
        pga.coordinates(pga.point(PGA3, [1.0, 2.0, 3.0]) + pga.plane(PGA3, [1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match="bivector"):
        pga.motor_path(pga.plane(PGA3, [1.0, 0.0, 0.0]), pga.point(PGA3, [0.0, 0.0, 0.0]))
    ideal = MultiVector.from_blades(PGA3, e134=1.0)  # a point at infinity
    assert np.all(np.isnan(pga.coordinates(ideal)))
