"""PGA: points, lines, planes and where they meet

In plane-based PGA (`galinear.Algebra(3, 0, 1)`, with `e1` the null vector) planes are vectors and
points trivectors. The line through two points is their regressive product `P & Q`; the meet of
a line and a plane (a point) and of two planes (a line) is the outer product `^`.
"""
import os
from pathlib import Path

import galinear
from galinear.plot import draw_pga, pga

alg = galinear.Algebra(3, 0, 1)
points = pga.point(alg, [[1.0, 0.5, 1.5], [-0.5, -0.5, 0.5]])
P, Q = points[0], points[1]
floor = pga.plane(alg, normal=[0.0, 0.0, 1.0], offset=0.0)  # z = 0
wall = pga.plane(alg, normal=[1.0, 0.0, 0.0], offset=-1.5)  # x = 1.5
line = P & Q
crossing = line ^ floor  # where the line PQ meets the floor
edge = floor ^ wall  # where the two planes meet

print("line PQ crosses the floor at", pga.coordinates(crossing).round(3))
labels = ["P, Q", "line P & Q", "floor z = 0", "wall x = 1.5", "(P & Q) ^ floor", "floor ^ wall"]
ax = draw_pga(points, line, floor, wall, crossing, edge, labels=labels, extent=2.0)
ax.view_init(elev=22, azim=-58)
ax.set_title("3D PGA: points, lines, planes and their meets", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
ax.figure.savefig(out / "pga_points_lines_planes.png", dpi=100, bbox_inches="tight")
