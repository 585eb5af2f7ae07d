"""STA: a boost of the light cone

In the spacetime algebra (`galinear.Algebra(3, 1)`, `e4` the time axis) a boost of rapidity phi
along x is the rotor `exp(phi/2 e4^2 e1 e4)` (`sta.boost`). It maps the light cone onto itself,
null vectors stay null, but moves light rays along the cone: seen after the boost, the rays crowd
towards the direction of motion (aberration). Right: the same boost in a spacetime diagram.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt

import galinear
from galinear.plot import draw_boost_diagram, draw_light_cone_boost, sta

alg = galinear.Algebra(3, 1)
R = sta.boost(alg, rapidity=0.9, direction=[1.0, 0.0, 0.0])
rays = R @ sta.null_directions(alg, 24)
print("largest |k . k| after the boost:", abs(rays.scalar_product(rays)).max())

fig = plt.figure(figsize=(11.5, 5.0))
draw_light_cone_boost(R, ax=fig.add_subplot(1, 2, 1, projection="3d"))
draw_boost_diagram(R, ax=fig.add_subplot(1, 2, 2))
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "sta_boost.png", dpi=100, bbox_inches="tight")
