"""Summaries of finished runs: a markdown table, a JSON summary and a plot of test accuracy.

Runs are grouped by their folder name without the ``-seed<k>`` suffix, so seeds of one model
are pooled: the table gives mean and sample standard deviation over seeds.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from galinear import _io
from galinear.train.loop import MLP_RUNS, atomic_write_json
from galinear.train.run_folder import mean_std

__all__ = ["collect_runs", "summarise", "markdown_table", "plot_accuracy", "write_report"]

def collect_runs(root, log=None) -> dict[str, dict[int, dict]]:
    """{group name: {seed: history}} for every run folder under ``root`` with a finished epoch (a
    missing or damaged ``history.json`` is rewritten from the run's checkpoint, ``log`` is told)."""
    return MLP_RUNS.collect(root, lambda history: bool(history["epochs"]), log)


def summarise(groups: dict[str, dict[int, dict]]) -> list[dict]:
    """One row per group: parameters, seeds, final / best test accuracy, seconds per epoch."""
    rows = []
    for name, runs in groups.items():
        histories = list(runs.values())
        final = [h["epochs"][-1]["test_accuracy"] for h in histories]
        best = [max(e["test_accuracy"] for e in h["epochs"]) for h in histories]
        seconds = [e["seconds"] for h in histories for e in h["epochs"]]
        final_mean, final_std = mean_std(final)
        model = histories[0]["config"]["model"]
        rows.append({
            "name": name,
            "kind": model["kind"],
            "hidden": model["hidden"],
            "depth": model["depth"],
            "parameters": histories[0]["parameters"],
            "seeds": sorted(runs),
            "epochs": [len(h["epochs"]) for h in histories],
            "planned_epochs": histories[0]["config"]["train"]["epochs"],
            "lr": histories[0]["config"]["train"]["lr"],
            "batch_size": histories[0]["config"]["train"]["batch_size"],
            "final_accuracy_mean": final_mean,
            "final_accuracy_std": final_std,
            "final_accuracy_min": min(final),
            "final_accuracy_max": max(final),
            "best_accuracy_mean": statistics.fmean(best),
            "seconds_per_epoch": statistics.median(seconds),
            "final_train_loss_mean": statistics.fmean(h["epochs"][-1]["train_loss"] for h in histories),
        })
    dense = [r["parameters"] for r in rows if r["kind"] == "dense"]
    for row in rows:
        row["parameter_ratio_vs_dense"] = (dense[0] / row["parameters"]) if dense else None
    return rows


def markdown_table(rows: list[dict]) -> str:
    """The summary as a markdown table (accuracies in %)."""
    lines = [
        "| model | hidden x depth | parameters | dense / model | lr | seeds | epochs | final test acc. (mean ± std) | min - max | best-epoch acc. (mean) | final train loss | s / epoch (median) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ratio = f"{r['parameter_ratio_vs_dense']:.0f}x" if r["parameter_ratio_vs_dense"] else "-"
        epochs = ", ".join(sorted({str(e) for e in r["epochs"]}))
        if any(e < r["planned_epochs"] for e in r["epochs"]):
            epochs += f" (of {r['planned_epochs']})"
        lines.append(
            f"| {r['name']} | {r['hidden']} x {r['depth']} | {r['parameters']:,} | {ratio} | {r['lr']:g} | "
            f"{', '.join(map(str, r['seeds']))} | {epochs} | "
            f"{100 * r['final_accuracy_mean']:.2f} ± {100 * r['final_accuracy_std']:.2f} | "
            f"{100 * r['final_accuracy_min']:.2f} - {100 * r['final_accuracy_max']:.2f} | "
            f"{100 * r['best_accuracy_mean']:.2f} | {r['final_train_loss_mean']:.4f} | {r['seconds_per_epoch']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def plot_accuracy(groups: dict[str, dict[int, dict]], path, title: str = "", references=None) -> None:
    """Test accuracy vs epoch: the mean over seeds as a line, min..max over seeds as a band.

    ``references``: optional {label: accuracy in %} drawn as dashed horizontal lines (e.g. the
    published numbers). Models whose final mean accuracy is under 50 % are listed in the legend
    with that number but left off the axis, so that the others stay readable.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    lowest = []
    for name, runs in groups.items():
        length = min(len(h["epochs"]) for h in runs.values())
        epochs = list(range(1, length + 1))
        per_epoch = [[100 * h["epochs"][i]["test_accuracy"] for h in runs.values()] for i in range(length)]
        mean = [statistics.fmean(v) for v in per_epoch]
        label = f"{name} ({len(runs)} seeds)"
        if mean[-1] < 50:
            axis.plot([], [], " ", label=f"{label}: {mean[-1]:.1f}% (off scale)")
            continue
        lowest.append(min(min(v) for v in per_epoch))
        line, = axis.plot(epochs, mean, marker="o", markersize=3, label=label)
        axis.fill_between(epochs, [min(v) for v in per_epoch], [max(v) for v in per_epoch],
                          color=line.get_color(), alpha=0.2)
    for label, value in (references or {}).items():
        axis.axhline(value, linestyle="--", linewidth=1, color="grey")
        axis.annotate(label, (1, value), textcoords="offset points", xytext=(2, 2), fontsize=7, color="grey")
    if lowest:
        axis.set_ylim(bottom=max(0.0, min(lowest) - 1.0))
    axis.set_xlabel("epoch")
    axis.set_ylabel("test accuracy (%)")
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8)
    if title:
        axis.set_title(title, fontsize=10)
    figure.tight_layout()
    _io.atomic_write(path, lambda tmp: figure.savefig(tmp, format=Path(path).suffix[1:] or "png"))
    plt.close(figure)


def write_report(root, title: str = "", references=None, log=None) -> list[dict]:
    """Write ``summary.json``, ``results.md`` and (with matplotlib) ``accuracy.png`` into ``root``."""
    root = Path(root)
    groups = collect_runs(root, log)
    rows = summarise(groups)
    atomic_write_json(root / "summary.json", rows)
    _io.atomic_write_text(root / "results.md", markdown_table(rows))
    if rows:
        try:
            plot_accuracy(groups, root / "accuracy.png", title, references)
        except ImportError:
            print("accuracy.png not written: matplotlib is missing (pip install 'galinear[plot]')")
    return rows
