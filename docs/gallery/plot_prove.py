"""Prove: which identities hold in which signature

`galinear.prove` decides an identity `lhs == rhs` per signature (p, q, r): a numeric look first,
then an exact step on symbolic coefficients that either proves it or finds an exact rational
counterexample. The map shows three identities over seven signatures: every bivector squares to a
scalar in n <= 3 but not in 3D PGA; a vector commutes with its dual only where the pseudoscalar
is central and the dual is a product with it.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

import galinear
from galinear.compiler import dual

signatures = [(2, 0, 0), (1, 1, 0), (2, 0, 1), (3, 0, 0), (2, 1, 0), (1, 2, 0), (3, 0, 1)]
identities = [
    ("a * a == a | a  (vectors)", lambda a: (a * a, a | a), {"a": 1}),
    ("B * B == <B * B>_0  (bivectors)", lambda B: (B * B, (B * B).grade(0)), {"B": 2}),
    ("a * dual(a) == dual(a) * a", lambda a: (a * dual(a), dual(a) * a), {"a": 1}),
]
status = np.zeros((len(identities), len(signatures)), dtype=int)  # 1 proved, -1 refuted, 0 undecided
notes = {}
for i, (name, identity, inputs) in enumerate(identities):
    report = galinear.prove(identity, inputs, signatures, timeout=30)
    for j, result in enumerate(report):
        status[i, j] = {"proved": 1, "refuted": -1}.get(result.status, 0)
        if result.status == "refuted":
            notes[i, j] = " ".join(f"{blade}:{value}" for blade, value in list(result.nonzero.items())[:1])
    print(report)

fig, ax = plt.subplots(figsize=(8.6, 3.0))
ax.imshow(status, cmap=plt.matplotlib.colors.ListedColormap(["#f4a582", "#dddddd", "#92c5de"]), vmin=-1, vmax=1)
for (i, j), word in np.ndenumerate(status):
    text = {1: "proved", -1: "refuted", 0: "undecided"}[word]
    ax.text(j, i, text + ("\n" + notes[i, j] if (i, j) in notes else ""), ha="center", va="center", fontsize=7)
ax.set_xticks(range(len(signatures)))
ax.set_xticklabels([f"Cl{s}" for s in signatures], fontsize=8)
ax.set_yticks(range(len(identities)))
ax.set_yticklabels([name for name, _, _ in identities], fontsize=8)
ax.set_title("galinear.prove: exact verdicts per signature (refuted: a nonzero blade of lhs - rhs "
             "at the counterexample)", fontsize=9)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "prove.png", dpi=100, bbox_inches="tight")
