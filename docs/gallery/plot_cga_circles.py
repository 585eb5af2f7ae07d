"""CGA: the circle through three points, and its meets

In the conformal algebra of the plane (`galinear.Algebra(3, 1)`) the circle through three points
is `up(a) ^ up(b) ^ up(c)`. Its centre and radius come back from the multivector itself (the dual
sphere `C (C ^ ninf)^-1`). A line `up(p) ^ up(q) ^ ninf` or a second circle meets it in a point
pair (`&`, the regressive product).
"""
import os
from pathlib import Path

import galinear
from galinear.plot import cga, draw_cga

alg = galinear.Algebra(3, 1)
_, ninf = cga.null_basis(alg)
abc = [[3.0, 1.0], [1.0, 3.0], [-1.0, 1.0]]
C = cga.circle_through(alg, *abc)
shape = cga.describe(C)
print(f"circle: centre {shape.centre.round(6)}, radius {shape.radius:.6f}")  # (1, 1) and 2
line = cga.up(alg, [-2.0, -0.5]) ^ cga.up(alg, [4.0, 2.5]) ^ ninf
D = cga.circle_through(alg, [2.0, -1.5], [4.5, 1.0], [2.0, 3.5])

ax = draw_cga(cga.up(alg, abc), C, line, D, C & line, C & D,
              labels=["a, b, c", f"a ^ b ^ c: centre (1, 1), r = {shape.radius:.3g}", "a line", "a second circle",
                      "circle & line", "circle & circle"])
ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
ax.set_title("2D CGA: circles, a line and their point pairs", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
ax.figure.savefig(out / "cga_circles.png", dpi=100, bbox_inches="tight")
