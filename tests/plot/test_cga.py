"""CGA pictures: centres, radii, normals and meets read back from the multivectors, against cases
worked out by hand, and each drawing runs."""
import numpy as np
import pytest

from galinear import Algebra
from galinear.plot import cga, draw_cga

CGA3 = Algebra(4, 1)
CGA2 = Algebra(3, 1)


def test_null_basis_and_points():
    no, ninf = cga.null_basis(CGA3)
    assert float(no | ninf) == -1.0 and float(no | no) == 0.0 and float(ninf | ninf) == 0.0
    x = np.array([[1.0, -2.0, 0.5], [3.0, 0.0, 0.0]])
    X = cga.up(CGA3, x)
    np.testing.assert_allclose(X.scalar_product(X), 0.0, atol=1e-12)  # null
    np.testing.assert_allclose(cga.down(X), x)
    np.testing.assert_allclose(cga.down(-2.5 * X), x)
    a, b = cga.up(CGA3, x[0]), cga.up(CGA3, x[1])
    np.testing.assert_allclose(float(a | b), -0.5 * np.sum((x[0] - x[1]) ** 2))  # distance


def test_circle_through_three_points():
    # the unit circle of the xy plane, and the circle through (0,0,0), (2,0,0), (0,2,0): centre (1,1,0), r = sqrt 2
    s = cga.describe(cga.circle_through(CGA3, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0]))
    assert s.kind == "circle"
    np.testing.assert_allclose(s.centre, 0.0, atol=1e-12)
    np.testing.assert_allclose(s.radius, 1.0)
    np.testing.assert_allclose(np.abs(s.normal), [0.0, 0.0, 1.0], atol=1e-12)
    s = cga.describe(cga.circle_through(CGA3, [0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 2.0, 0.0]))
    np.testing.assert_allclose(s.centre, [1.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(s.radius, np.sqrt(2.0))
    # a tilted one: the circle through three points of the sphere |x - c| = 3 on the plane x + y + z = c . 1
    c = np.array([1.0, -2.0, 0.5])
    u, w = np.array([1.0, -1.0, 0.0]) / np.sqrt(2), np.array([1.0, 1.0, -2.0]) / np.sqrt(6)
    points = [c + 3 * (np.cos(a) * u + np.sin(a) * w) for a in (0.3, 2.0, 4.0)]
    s = cga.describe(cga.circle_through(CGA3, *points))
    np.testing.assert_allclose(s.centre, c, atol=1e-12)
    np.testing.assert_allclose(s.radius, 3.0)
    np.testing.assert_allclose(np.abs(s.normal), np.ones(3) / np.sqrt(3), atol=1e-12)
    # 2D CGA, and three collinear points make a line
    s = cga.describe(cga.circle_through(CGA2, [3.0, 1.0], [1.0, 3.0], [-1.0, 1.0]))
    np.testing.assert_allclose(s.centre, [1.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(s.radius, 2.0)
    assert cga.describe(cga.circle_through(CGA2, [1.0, 0.0], [0.0, 1.0], [-1.0, 2.0])).kind == "line"


def test_spheres_planes_and_their_meets():
    S1 = cga.up(CGA3, [1.0, 0.0, 0.0]) ^ cga.up(CGA3, [0.0, 1.0, 0.0]) ^ cga.up(CGA3, [-1.0, 0.0, 0.0]) \
        ^ cga.up(CGA3, [0.0, 0.0, 2.0])
    s = cga.describe(S1)  # centre (0, 0, c) with 1 + c^2 = (2 - c)^2: c = 3/4, r^2 = 25/16
    assert s.kind == "sphere"
    np.testing.assert_allclose(s.centre, [0.0, 0.0, 0.75], atol=1e-12)
    np.testing.assert_allclose(s.radius_squared, 25 / 16)
    s = cga.describe(cga.sphere(CGA3, [1.0, 2.0, 3.0], 2.0))
    np.testing.assert_allclose(s.centre, [1.0, 2.0, 3.0], atol=1e-12)
    np.testing.assert_allclose(s.radius, 2.0)
    assert cga.describe(cga.dual_sphere(CGA3, [1.0, 1.0, 1.0], 3.0)).kind == "sphere"
    # two spheres of radius 2 with centres 1 apart along z meet in a circle at the midpoint, r^2 = 4 - 1/4
    A, B = cga.sphere(CGA3, [1.0, 2.0, 3.0], 2.0), cga.sphere(CGA3, [1.0, 2.0, 4.0], 2.0)
    circle = cga.describe(A & B)
    assert circle.kind == "circle" and circle.real
    np.testing.assert_allclose(circle.centre, [1.0, 2.0, 3.5], atol=1e-12)
    np.testing.assert_allclose(circle.radius_squared, 3.75)
    np.testing.assert_allclose(np.abs(circle.normal), [0.0, 0.0, 1.0], atol=1e-12)
    # the same circle as the meet of a sphere and the plane z = 3.5
    P = cga.plane(CGA3, [0.0, 0.0, 1.0], -3.5)
    plane = cga.describe(P)
    assert plane.kind == "plane"
    np.testing.assert_allclose(plane.centre, [0.0, 0.0, 3.5], atol=1e-12)
    again = cga.describe(A & P)
    np.testing.assert_allclose(again.centre, circle.centre, atol=1e-12)
    np.testing.assert_allclose(again.radius_squared, circle.radius_squared)
    # far apart: an imaginary circle, not drawn
    far = cga.describe(cga.sphere(CGA3, [0.0, 0.0, 0.0], 1.0) & cga.sphere(CGA3, [5.0, 0.0, 0.0], 1.0))
    assert far.kind == "circle" and not far.real and np.isnan(far.radius)


def test_point_pairs_and_lines():
    pair = cga.describe(cga.up(CGA3, [1.0, 2.0, 3.0]) ^ cga.up(CGA3, [3.0, 2.0, 1.0]))
    assert pair.kind == "point pair"
    np.testing.assert_allclose(pair.centre, [2.0, 2.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(sorted(map(tuple, pair.points)), [(1.0, 2.0, 3.0), (3.0, 2.0, 1.0)], atol=1e-12)
    _, ninf = cga.null_basis(CGA3)
    L = cga.up(CGA3, [1.0, 0.0, 0.0]) ^ cga.up(CGA3, [1.0, 1.0, 0.0]) ^ ninf
    line = cga.describe(L)
    assert line.kind == "line"
    np.testing.assert_allclose(line.direction, [0.0, 1.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(line.centre, [1.0, 0.0, 0.0], atol=1e-12)
    # the line x = 1, z = 0 meets the sphere of radius 2 about (1, 0, 1) in (1, +-sqrt 3, 0)
    hits = cga.describe(L & cga.sphere(CGA3, [1.0, 0.0, 1.0], 2.0))
    assert hits.kind == "point pair"
    np.testing.assert_allclose(sorted(hits.points[:, 1]), [-np.sqrt(3), np.sqrt(3)], atol=1e-12)
    np.testing.assert_allclose(hits.points[:, [0, 2]], [[1.0, 0.0], [1.0, 0.0]], atol=1e-12)
    # a circle met with a plane through its centre: two points on it
    C = cga.circle_through(CGA3, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [-1.0, 0.0, 0.0])
    hits = cga.describe(C & cga.plane(CGA3, [1.0, 0.0, 0.0], 0.0))
    np.testing.assert_allclose(sorted(hits.points[:, 1]), [-1.0, 1.0], atol=1e-12)
    # a line met with a plane it is parallel to: a flat point at infinity, not drawn
    assert np.all(np.isnan(cga.describe(L & cga.plane(CGA3, [0.0, 0.0, 1.0], -3.0)).centre))


def test_drawings_return_their_axes():
    S1, S2 = cga.sphere(CGA3, [0.0, 0.0, 0.0], 1.0), cga.sphere(CGA3, [1.0, 0.0, 0.0], 0.8)
    _, ninf = cga.null_basis(CGA3)
    line = cga.up(CGA3, [0.0, -1.0, 0.0]) ^ cga.up(CGA3, [0.0, 1.0, 0.5]) ^ ninf
    ax = draw_cga(S1, S2, S1 & S2, line & S1, line, cga.plane(CGA3, [0.0, 0.0, 1.0], 1.0),
                  cga.up(CGA3, [[0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]), labels=list("abcdefg"))
    assert ax.name == "3d" and ax.get_legend() is not None
    flat = draw_cga(S1, S1 & S2)  # a 3D scene on 2D axes: its projection on the xy plane
    assert draw_cga(S1, ax=flat) is flat
    ax2 = draw_cga(cga.circle_through(CGA2, [1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]), cga.plane(CGA2, [1.0, 1.0], -1.0),
                   cga.up(CGA2, [[1.0, 0.0], [0.0, 1.0]]))
    assert ax2.name != "3d"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="Algebra\\(4, 1\\)"):
        cga.up(Algebra(3, 0, 1), [0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="one grade"):
        cga.describe(cga.up(CGA3, [0.0, 0.0, 0.0]) + 1.0)
    with pytest.raises(ValueError, match="one multivector"):
        cga.describe(cga.up(CGA3, [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]))
