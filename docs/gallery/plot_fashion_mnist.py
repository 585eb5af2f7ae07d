"""Fashion-MNIST: a rotor MLP against a dense MLP

Two-hidden-layer MLPs trained from scratch (`galinear train-mlp`, 10 epochs), rotor layers
(`RotorLinear`, chunk 128 at width 1024 and 256 at width 2048) against `torch.nn.Linear`,
beside the numbers that Pence, Yamada and Singh (2025) published. Final test accuracy against
parameters, read from the first two committed tables of docs/results.md ("Fashion-MNIST");
bars are the spread over seeds.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt

from galinear.plot.results import find_table, find_tables, mean_std, number

root = Path(__file__).resolve().parents[2]
sources = [root / "docs", root / "benchmarks"]
tables = find_tables(["model", "hidden x depth", "parameters", "dense / model"], sources)
published = next(row for row in find_table(["", "rotor MLP", "dense MLP", "gap"], sources)
                 if row[""].startswith("Pence"))

fig, ax = plt.subplots(figsize=(7.6, 4.8))
for row in (row for table in tables[:2] for row in table if row["model"] in ("rotor", "dense")):
    mean, std = mean_std(row["final test acc. (mean ± std)"])
    colour = "#d62728" if row["model"] == "rotor" else "#1f77b4"
    parameters = number(row["parameters"])
    ax.errorbar(parameters, mean, yerr=std, marker="o", color=colour, capsize=3)
    wide = row["hidden x depth"].startswith("2048")
    place = {"rotor": ((8, -22), "left"), "dense": ((-8, 8 if wide else -26), "right")}[row["model"]]
    ax.annotate(f"{row['model']} {row['hidden x depth']}\n{mean:.2f} ± {std:.2f} %, seeds {row['seeds']}",
                (parameters, mean), textcoords="offset points", xytext=place[0], ha=place[1], fontsize=8, color=colour)
for column, colour in (("rotor MLP", "#d62728"), ("dense MLP", "#1f77b4")):
    ax.axhline(number(published[column]), color=colour, linestyle=":", linewidth=1,
               label=f"{column}, Pence et al. 2025: {number(published[column]):.2f} %")
ax.set_xscale("log")
ax.set_xlim(8e3, 2e7)
ax.set_ylim(87.0, 91.2)
ax.set_xlabel("parameters (every one, head and biases included)")
ax.set_ylabel("Fashion-MNIST test accuracy after the last epoch (%)")
ax.grid(alpha=0.3)
ax.legend(fontsize=8, loc="lower right")
ax.set_title("rotor MLPs against dense MLPs of the same depth and width", fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "fashion_mnist.png", dpi=100, bbox_inches="tight")
