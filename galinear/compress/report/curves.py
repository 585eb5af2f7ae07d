"""Learning curves of a study: validation MSE against Adam steps, every method, per projection.

Written by :func:`galinear.compress.report.summary.write` into the run folder: ``learning_curves.json``
(every fitted run: method, seed, layer set, and per projection the list of [step, validation MSE]
and the validation rows' target mean square) and, with matplotlib, ``learning_curves.png``: one
panel per projection (q, k, v) for the first layer of the first layer set, the relative
validation MSE (MSE / mean square of the target; 1 = predicting 0) against steps on a log-scaled
y axis. Closed-form fits (LR1*, LR4*, BH1*) have no steps: they are horizontal dashed lines at
their relative MSE on the same validation rows.
"""
from __future__ import annotations

import os

from galinear import _io
from galinear.compress.methods.records import ADAM, CLOSED_FORM, MOMENTS, RECORDS, colour, display_name
from galinear.lm.models import ALL_PROJECTIONS, PROJECTIONS



def collect(entries: dict) -> list:
    """One record per (tag, seed, layer set) with curves (the curves do not depend on the text)."""
    out, seen = [], set()
    for e in entries.values():
        if e.get("method") == "original" or not e.get("curves"):
            continue
        key = (e["tag"], e["seed"], tuple(e["layers"]))
        if key in seen:
            continue
        seen.add(key)
        out.append({"method": e["method"], "tag": e["tag"], "seed": e["seed"], "layers": list(e["layers"]),
                    "fit": e.get("fit"), "curves": e["curves"],
                    "valid_target_mean_square": e.get("valid_target_mean_square", {})})
    return out


def plot(records: list, path: str, layers=None) -> str | None:
    """Relative validation MSE against steps, one panel per projection; None without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator, NullFormatter
    except ImportError:
        return None
    if layers is not None:
        records = [r for r in records if r["layers"] == list(layers)]
    if not records:
        return None
    names = [p for p in ALL_PROJECTIONS if any(p in r["curves"] for r in records)] or list(PROJECTIONS)
    fig, axes = plt.subplots(1, len(names), figsize=(4.4 * len(names), 4.2), squeeze=False)
    for ax, proj in zip(axes[0], names):
        labelled = set()
        longest = max((c[-1][0] for r in records for p, c in r["curves"].items() if p == proj and c), default=1)
        for r in records:
            curve = r["curves"].get(proj)
            scale = r["valid_target_mean_square"].get(proj) or 1.0
            if not curve:
                continue
            name = display_name(r["method"])
            color = colour(r["method"], "k")
            label = None if name in labelled else name
            labelled.add(name)
            fit = RECORDS[r["method"]].fit if r["method"] in RECORDS else ADAM
            if fit in (CLOSED_FORM, MOMENTS):  # one point: the fit's validation MSE
                ax.axhline(curve[0][1] / scale, color=color, linestyle="--", linewidth=1.2,
                           label=None if label is None else (f"{name} (closed form)" if fit == CLOSED_FORM
                                                             else name))
                continue
            steps = [c[0] for c in curve]
            values = [c[1] / scale for c in curve]
            ax.plot(steps, values, color=color, linewidth=1.2, alpha=0.85, label=label)
        ax.set_xlim(0, max(longest, 1))
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(MaxNLocator(nbins=5, integer=True))
        ax.yaxis.set_minor_formatter(NullFormatter())  # minor labels of a log axis overlap
        ax.set_xlabel("Adam steps")
        ax.set_ylabel("validation MSE / target mean square")
        ax.set_title(f"{proj} (layer {records[0]['layers'][0]})")
        ax.grid(alpha=0.3, which="both")
        ax.tick_params(labelsize=7)
    # one legend for the figure, in a band reserved under the panels (never cut at the sides)
    handles = {}
    for ax in axes[0]:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(name, handle)
    columns = min(len(handles), 4) or 1
    rows = -(-len(handles) // columns)
    band = (0.12 + 0.2 * rows) / fig.get_figheight()  # inches of legend rows, as a fraction
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=columns, fontsize=8,
                   frameon=False, bbox_to_anchor=(0.5, 0.0))
    fig.tight_layout(rect=(0.0, band, 1.0, 1.0))
    _io.atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path


def write(entries: dict, out_dir: str, layers=None, plot: bool = True) -> list:
    """Write learning_curves.json (and .png with ``plot``, the runs of the layer set ``layers``)
    into ``out_dir`` from a study's evaluations ``entries``; returns the records."""
    records = collect(entries)
    if not records:
        return records
    os.makedirs(out_dir, exist_ok=True)
    _io.save_json(os.path.join(out_dir, "learning_curves.json"), {"runs": records})
    if plot:
        globals()["plot"](records, os.path.join(out_dir, "learning_curves.png"), layers=layers)
    return records


__all__ = ["collect", "plot", "write"]
