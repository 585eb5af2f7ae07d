"""PGA: the screw motion of a motor

A motor is the exponential of a bivector, `M = exp(B)`. Here B turns by 270 degrees about the
z axis and slides 2 units along it (`pga.screw`); `exp(t B) @ X` for t from 0 to 1 moves the
corners of a triangle along helices about the screw axis, and a line through the triangle with
them (drawn at five times, fading in).
"""
import os
from pathlib import Path

import numpy as np

import galinear
from galinear.plot import draw_motor_path, pga

alg = galinear.Algebra(3, 0, 1)
B = pga.screw(alg, angle=1.5 * np.pi, distance=2.0, centre=[0.0, 0.0, 0.0], axis=[0.0, 0.0, 1.0])
corners = pga.point(alg, [[1.0, 0.0, 0.0], [0.0, 0.6, 0.0], [0.6, -0.6, 0.2]])
line = pga.line_through(corners[0], corners[1])

ax = draw_motor_path(B, corners, label="triangle corners", steps=80)
draw_motor_path(B, line, ax=ax, color="#2ca02c", label="a line through two corners", axis=False)
end = B.exp() @ corners  # the motor itself, applied once
print("corners after the motor:\n", pga.coordinates(end).round(3))
ax.view_init(elev=18, azim=-50)
ax.set_title("exp(t B) @ X for t in [0, 1]: a screw about the z axis", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
ax.figure.savefig(out / "pga_motor.png", dpi=100, bbox_inches="tight")
