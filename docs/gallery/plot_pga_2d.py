"""2D PGA: lines, their meet, and a rotation about a point

In `galinear.Algebra(2, 0, 1)` lines are vectors (`a x + b y + d = 0` is `d e1 + a e2 + b e3`)
and points bivectors. Two lines meet in the point `l1 ^ l2`; a rotation about a point c is the
motor `exp(-angle/2 * c)` (`pga.rotation`), drawn here moving the corners of a square by a
quarter turn about the meet.
"""
import os
from pathlib import Path

import numpy as np

import galinear
from galinear.plot import draw_motor_path, draw_pga, pga

alg = galinear.Algebra(2, 0, 1)
l1 = pga.plane(alg, normal=[1.0, -1.0], offset=0.0)  # y = x
l2 = pga.plane(alg, normal=[1.0, 1.0], offset=-2.0)  # x + y = 2
meet = l1 ^ l2
centre = pga.coordinates(meet)
print("the lines meet at", centre.round(3))
square = pga.point(alg, [[2.0, 0.0], [3.0, 0.0], [3.0, 1.0], [2.0, 1.0]])

ax = draw_pga(l1, l2, meet, square, labels=["y = x", "x + y = 2", "l1 ^ l2", "square"])
draw_motor_path(pga.rotation(alg, np.pi / 2, centre=centre), square, ax=ax, color="#9467bd",
                label="exp(t B) @ corners, a quarter turn")
ax.set_xlim(-1.0, 4.0)
ax.set_ylim(-1.5, 3.5)
ax.set_title("2D PGA: two lines, their meet, a rotation about it", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
ax.figure.savefig(out / "pga_2d.png", dpi=100, bbox_inches="tight")
