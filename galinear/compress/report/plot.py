"""The distillation figure of a study: ln PPL of each method before and after the joint distillation
(``--distill``) on one measure, with the original model's line (``distillation.png``, written by
``galinear demo``)."""
from __future__ import annotations

import os
import types

from galinear import _io
from galinear.compress.methods.records import colour, display_name



def distillation_pairs(summary: dict, dataset: str) -> dict:
    """``{"original": ln PPL or None, "methods": [(name, before, after), ...]}`` on ``dataset`` from a
    study's summary.json (:func:`galinear.compress.report.summary.write`): for each method of each layer set,
    its row as fitted and its row after the distillation (None where a row is missing), in the
    order of the methods in the study's settings."""
    from galinear.compress.fitting import distill

    config = summary["config"]
    tag = distill.settings_tag(types.SimpleNamespace(**config)) if config.get("distill") else None
    original, before, after = None, {}, {}
    for row in summary["rows"]:
        value = row["log_ppl"].get(dataset, {}).get("mean")
        if row["method"] == "original":
            original = value
            continue
        key = (tuple(row["layers"]), row["method"])
        (after if tag and row["tag"].endswith("-" + tag) else before)[key] = value
    order = {name: i for i, name in enumerate(config["methods"])}
    keys = sorted(set(before) | set(after), key=lambda k: (len(k[0]), k[0], order.get(k[1], len(order))))
    return {"original": original, "methods": [(k, before.get(k), after.get(k)) for k in keys]}


def distillation_figure(summary: dict, path: str, dataset: str = "wikitext2", title: str | None = None):
    """Write the figure of :func:`distillation_pairs` to ``path`` (PNG, matplotlib's Agg backend):
    one column per method, a hollow marker as fitted, a filled one after the distillation, an arrow
    between them and a dashed line at the original model. Returns ``path``, or None when matplotlib
    is not installed (``pip install galinear[plot]``) or no row has a value on ``dataset``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    from galinear.compress.study.sequential import compact

    pairs = distillation_pairs(summary, dataset)
    points = [(k, b, a) for k, b, a in pairs["methods"] if b is not None or a is not None]
    if not points:
        return None
    several_sets = len({k[0] for k, _, _ in points}) > 1
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(points), 4.2))
    for x, ((layers, method), fitted, distilled) in enumerate(points):
        color = colour(method)
        if fitted is not None:
            ax.plot(x, fitted, marker="o", markersize=8, markerfacecolor="white", color=color, linestyle="none")
            ax.annotate(f"{fitted:.3f}", (x, fitted), textcoords="offset points", xytext=(8, -3), fontsize=7)
        if distilled is not None:
            ax.plot(x, distilled, marker="o", markersize=8, color=color, linestyle="none")
            ax.annotate(f"{distilled:.3f}", (x, distilled), textcoords="offset points", xytext=(8, -3), fontsize=7)
        if fitted is not None and distilled is not None:
            ax.annotate("", xy=(x, distilled), xytext=(x, fitted),
                        arrowprops=dict(arrowstyle="->", color=color, shrinkA=6, shrinkB=6))
    for label, face in (("as fitted", "white"), ("after the distillation", "gray")):  # legend entries only
        ax.plot([], [], marker="o", markersize=8, color="gray", markerfacecolor=face, linestyle="none", label=label)
    if pairs["original"] is not None:
        ax.axhline(pairs["original"], color="black", linestyle="--", linewidth=1,
                   label=f"original {pairs['original']:.3f}")
    names = [display_name(m) + (f"\nL{compact(layers)}" if several_sets else "") for (layers, m), _, _ in points]
    ax.set_xticks(range(len(points)), names, fontsize=8)
    ax.set_xlim(-0.6, len(points) - 0.2)
    ax.set_ylabel("ln PPL")
    from galinear.compress.report.summary import DATASET_TITLES

    subset = summary.get("wikitext") or {}
    if dataset == "wikitext2" and subset.get("windows", 0) < subset.get("of", 0):
        where = f"{DATASET_TITLES[dataset]} ({subset['windows']} of its {subset['of']} windows)"
    else:
        where = DATASET_TITLES.get(dataset, dataset)
    ax.set_title(title or f"{where}: before and after the distillation", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    _io.atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, format="png"))
    plt.close(fig)
    return path


def write_distillation_figure(out_dir: str, dataset: str = "wikitext2", title: str | None = None):
    """:func:`distillation_figure` of the study in ``out_dir`` (its summary.json), written to
    ``out_dir/distillation.png``; the path, or None as there."""
    summary = _io.load_json(os.path.join(out_dir, "summary.json"))
    return distillation_figure(summary, os.path.join(out_dir, "distillation.png"), dataset, title)


__all__ = ["distillation_pairs", "distillation_figure", "write_distillation_figure"]
