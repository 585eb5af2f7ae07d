"""A rotor layer's planes and angles

A `galinear.nn.RotorLinear` maps each pair of 16-wide chunks by `x -> alpha R x ~S`, with rotors
`R = exp(B)` of Cl(4). Each bivector B splits into two simple parts on orthogonal planes (the
invariant decomposition), and the rotor turns plane j by `2 theta_j`. Left: the turn of both
planes of the left rotor of each chunk pair. Middle: the planes of pair 0 as wedges of their turn,
named by their unit bivectors. Right: the coefficients `b_ij` of that bivector.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt
import torch

from galinear.nn import RotorLinear
from galinear.plot import draw_bivector_matrix, draw_rotor_angles, draw_rotor_planes, rotors

torch.manual_seed(0)
layer = RotorLinear(32, 32, chunk_size=16).double()  # Cl(4), 2 x 2 chunk pairs
with torch.no_grad():
    layer.left_bivectors.normal_(0.0, 0.6)
planes = rotors.rotor_planes(layer)
print("turns (degrees) of each pair's planes:\n", planes.turns_degrees.round(1))

fig = plt.figure(figsize=(15.0, 4.4))
draw_rotor_angles(layer, ax=fig.add_subplot(1, 3, 1))
draw_rotor_planes(layer, index=0, ax=fig.add_subplot(1, 3, 2, projection="polar"))
draw_bivector_matrix(layer, index=0, ax=fig.add_subplot(1, 3, 3))
fig.tight_layout()
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "rotor_layer.png", dpi=100, bbox_inches="tight")
