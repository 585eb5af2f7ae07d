"""train-lm: held-out ln PPL by projection kind, against size and time

Small byte-level transformers trained from scratch on Shakespeare with every projection of one
kind (`galinear train-lm`, 400 steps; docs/results.md, "Training a transformer from scratch").
Each run's held-out ln PPL at its last step, read from that committed table, against the
parameters in its projections (left) and against the seconds its run took (right). At equal
steps the rotor model comes within a few hundredths of a nat of models with far more projection
parameters; at equal time it is behind them.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt

from galinear.plot.results import find_table, mean_std, number

root = Path(__file__).resolve().parents[2]
rows = find_table(["model", "parameters", "in projections", "seeds", "steps"], [root / "docs", root / "benchmarks"])
fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.4), sharey=True)
for k, row in enumerate(rows):
    name = row["model"].split("(")[0].strip()
    ln_ppl, spread = mean_std(row["held-out ln PPL at the last step"])
    seconds = number(row["s of the run"])
    style = dict(marker="os^Dv<>P"[k % 8], markersize=7, capsize=3, linestyle="none", label=name,
                 color=f"C{k}")
    axes[0].errorbar(number(row["in projections"]), ln_ppl, yerr=spread, **style)
    axes[1].errorbar(seconds, ln_ppl, yerr=spread, **style)
axes[0].set_xscale("log")
axes[0].set_xlabel("parameters in the projections")
axes[0].set_ylabel("held-out ln PPL at the last step (nats per byte)")
axes[1].set_xscale("log")
axes[1].set_xlabel("seconds of the run (1 thread)")
for ax in axes:
    ax.grid(alpha=0.3)
axes[1].legend(fontsize=8, loc="upper right")
fig.suptitle("galinear train-lm on Shakespeare (width 256, 4 blocks, 400 steps; ± over 3 seeds where run)",
             fontsize=10)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "train_lm.png", dpi=100, bbox_inches="tight")
