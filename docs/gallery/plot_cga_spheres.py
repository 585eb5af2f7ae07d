"""CGA: spheres, planes, lines and their meets in 3D

In `galinear.Algebra(4, 1)` a sphere is the outer product of four points (or the undual of the
dual sphere `up(c) - r**2/2 ninf`). Two spheres meet in a circle, a sphere and a plane in a
circle, and a line pierces a sphere in a point pair: each meet is `A & B`, and what it is (its
centre, radius and plane) is read back from the result.
"""
import os
from pathlib import Path

import galinear
from galinear.plot import cga, draw_cga

alg = galinear.Algebra(4, 1)
_, ninf = cga.null_basis(alg)
S1 = cga.sphere(alg, centre=[0.0, 0.0, 0.0], radius=1.0)
S2 = cga.up(alg, [1.6, 0.0, 0.0]) ^ cga.up(alg, [0.8, 0.8, 0.0]) ^ cga.up(alg, [0.8, 0.0, 0.8]) \
    ^ cga.up(alg, [0.0, 0.0, 0.0])  # through four points
plane = cga.plane(alg, normal=[0.0, 0.0, 1.0], offset=-0.6)  # z = 0.6
line = cga.up(alg, [-1.5, -1.5, -0.2]) ^ cga.up(alg, [1.5, 1.5, 0.2]) ^ ninf
for name, X in [("S1 & S2", S1 & S2), ("S1 & plane", S1 & plane), ("line & S1", line & S1)]:
    shape = cga.describe(X)
    print(f"{name}: a {shape.kind}, centre {shape.centre.round(3)}, radius {shape.radius:.3f}")

ax = draw_cga(S1, S2, S1 & S2, S1 & plane, line, line & S1,
              labels=["sphere S1", "sphere S2 (through 4 points)", "S1 & S2", "S1 & plane z = 0.6", "a line",
                      "line & S1"])
ax.view_init(elev=20, azim=-62)
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(-0.05, 1.0))
ax.set_title("3D CGA: spheres and their meets", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
ax.figure.savefig(out / "cga_spheres.png", dpi=100, bbox_inches="tight")
