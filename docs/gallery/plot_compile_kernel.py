"""Compile: a generated PGA kernel moving a cube

`galinear.compile` traces `M * x * ~M` once with symbolic multivectors and writes a straight-line
numba kernel that reads only the blades a motor and a point hold (8 and 4) and writes only the 4
the result can hold. Here it moves the 27 points of a cube by 40 motors `exp(t B)` in one call
(broadcast over both batches); the same motion through `galinear.MultiVector` gives the same
points (the difference is printed in the title).
"""
import os
from pathlib import Path

import numpy as np

import galinear
from galinear.plot import pga

alg = galinear.Algebra(3, 0, 1)


def motor_on_point(M, x):
    return M * x * ~M


kernel = galinear.compile(motor_on_point, alg, {"M": "even", "x": 3})
grid = np.stack(np.meshgrid(*[np.linspace(-0.5, 0.5, 3)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
points = pga.point(alg, grid + [1.5, 0.0, 0.0])
B = pga.screw(alg, angle=np.pi, distance=1.5, axis=[0.0, 0.3, 1.0])
t = np.linspace(0.0, 1.0, 40)[:, None, None]
motors = galinear.MultiVector(alg, t * B.values).exp()  # (40, 1) motors

names = alg.blade_names
M_in = motors.values[..., [names.index(b) for b in kernel.input_blades["M"]]]
x_in = points.values[..., [names.index(b) for b in kernel.input_blades["x"]]]
moved = kernel(M_in, x_in)  # (40, 27, 4), the output blades only
values = np.zeros(moved.shape[:-1] + (alg.dim,))
values[..., [names.index(b) for b in kernel.output_blades]] = moved
path = pga.coordinates(galinear.MultiVector(alg, values))
reference = pga.coordinates(motors @ points)
difference = float(np.abs(path - reference).max())
print(f"{kernel.operations['multiplications']} multiplications per row; largest difference {difference:.1e}")

import matplotlib.pyplot as plt  # noqa: E402

fig = plt.figure(figsize=(6.4, 5.6))
ax = fig.add_subplot(projection="3d")
for j in range(path.shape[1]):
    ax.plot(*path[:, j].T, color="0.7", linewidth=0.6)
for step, colour in zip((0, 13, 26, 39), ("#1f77b4", "#2ca02c", "#ff7f0e", "#d62728")):
    ax.scatter(*path[step].T, color=colour, s=14, depthshade=False, label=f"t = {t[step, 0, 0]:.2f}")
ax.set_box_aspect((1, 1, 1))
ax.view_init(elev=20, azim=-60)
ax.legend(fontsize=8, loc="upper left")
ax.set_title(f"galinear.compile(M * x * ~M): {kernel.operations['multiplications']} multiplications per row\n"
             f"40 motors x 27 points, largest difference to MultiVector {difference:.0e}", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "compile_kernel.png", dpi=100, bbox_inches="tight")
