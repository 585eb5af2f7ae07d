"""Compiled kernels against kingdon

`benchmarks/bench_compile.py` (`make bench-compile`) times `galinear.compile`'s numba kernels and
kingdon's generated code (`add_operator`, numba wrapper) on the same expressions, side by side in
one process. This picture reads the committed `benchmarks/results/bench_compile.json` (it runs no
benchmark): kingdon's time over galinear's per expression and batch size, above 1 where galinear
is faster.
"""
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np

from galinear.plot.results import read_json

root = Path(__file__).resolve().parents[2]
data = read_json(root / "benchmarks" / "results" / "bench_compile.json")
rows = data["rows"]
batches = [str(b) for b in data["meta"]["batches"]]
ratio = np.array([[row["times"][b]["kingdon_over_galinear"] for b in batches] for row in rows])

fig, ax = plt.subplots(figsize=(9.0, 4.2))
x = np.arange(len(rows))
width = 0.8 / len(batches)
for k, batch in enumerate(batches):
    ax.bar(x + (k - (len(batches) - 1) / 2) * width, ratio[:, k], width, label=f"{int(batch):,} rows")
ax.axhline(1.0, color="black", linewidth=0.8)
ax.set_yscale("log")
ax.set_yticks([0.5, 1, 2, 5, 10, 20])
ax.set_yticklabels(["0.5", "1", "2", "5", "10", "20"])
ax.set_xticks(x)
ax.set_xticklabels([row["name"] for row in rows], rotation=25, ha="right", fontsize=8)
ax.set_ylabel("kingdon time / galinear time")
ax.grid(axis="y", alpha=0.3)
ax.legend(fontsize=8, title="batch", title_fontsize=8)
meta = data["meta"]
ax.set_title(f"galinear.compile against kingdon {meta['kingdon']} (numba {meta['numba']}, {meta['date']}, "
             f"{meta['machine']['logical_cpus']} cores)", fontsize=9)
out = Path(os.environ.get("GALLERY_OUT", Path(__file__).resolve().parent / "images"))
out.mkdir(parents=True, exist_ok=True)
fig.savefig(out / "kernel_speed.png", dpi=100, bbox_inches="tight")
