"""Compression: held-out ln PPL against the parameter budget

Four consecutive attention layers (12-15) of SmolLM2-135M compressed at about 0.5 %, 2 % and 8 %
of their q/k/v parameters by each method, fitted to the attention output and then distilled, and
scored on 8 WikiText-2 windows (docs/results.md, "Budgets, the whole model, and the front"). The
numbers are read from that committed table; the dashed line is the original model.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt

from galinear.plot.results import find_table, mean_std, number

root = Path(__file__).resolve().parents[2]
rows = find_table(["budget", "method", "params / layer", "% of q/k/v (these layers)"],
                  [root / "docs", root / "benchmarks"])
methods = {}
for row in rows:
    name = row["method"].split(",")[0].split("(")[0].strip()
    mean, std = mean_std(row["+ distillation"])
    methods.setdefault(name, []).append((number(row["% of q/k/v (these layers)"]), mean, std))

fig, ax = plt.subplots(figsize=(7.2, 4.6))
for k, (name, points) in enumerate(methods.items()):
    points.sort()
    x, y, e = zip(*points)
    ax.errorbar(x, y, yerr=e, marker="os^Dv<>"[k % 7], capsize=3, linewidth=1.4, label=name)
ax.axhline(3.0866, color="black", linestyle="--", linewidth=0.8, label="original (3.0866)")
ax.set_xscale("log")
ax.set_xticks([0.5, 1, 2, 4, 8], minor=False)
ax.set_xticks([], minor=True)
ax.set_xticklabels(["0.5", "1", "2", "4", "8"])
ax.set_xlabel("parameters, % of the dense q/k/v of these layers")
ax.set_ylabel("held-out ln PPL after distillation (lower is better)")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
ax.set_title("layers 12-15 of SmolLM2-135M, WikiText-2 (one seed; 0.5 %: mean ± std of 3)", fontsize=9)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "compression_front.png", dpi=100, bbox_inches="tight")
