"""The size / quality front of compressed models: ln PPL against the share of q/k/v parameters kept.

Reads the ``results.json`` of one or more ``galinear compress --out`` folders (plain JSON, nothing
executed) and puts every fitted configuration on one axis: ``kept``, the fraction of the whole
model's attention q/k/v parameters that remain when the replaced layers hold ``params_per_layer``
each and the other layers stay dense::

    kept = (n_replaced * params_per_layer + (layers_total - n_replaced) * dense_params_per_layer)
           / (layers_total * dense_params_per_layer)

The model's number of decoder layers is not recorded in ``results.json`` or ``summary.json``, so
it is an argument (``layers_total``, ``--layers-total``; 30 is SmolLM2-135M). Seeds of one
(tag, layer set, evaluation subset) are one point: mean and sample std of ln PPL. :func:`front`
keeps the points no other point beats on both axes; :func:`table` and :func:`plot` show them::

    python -m galinear.compress.report.pareto runs/l12-15 runs/all-rotor --png front.png --md front.md

Points scored on different subsets of WikiText-2 (``--wikitext-windows``) are not comparable and
are refused on one front unless ``mixed_subsets=True`` (``--mixed-subsets``).
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from dataclasses import dataclass

import numpy as np

from galinear import _io
from galinear.compress.methods.records import RECORDS, colour, display_name
from galinear.compress.study.sequential import compact

#: how far two scores of the same entry (or of the original model) may differ across folders
TOLERANCE = 1e-6
_SUBSET_FIX = "rerun with the same --wikitext-windows (and --wikitext-window), or pass --mixed-subsets"


@dataclass(frozen=True)
class Point:
    """One configuration (or the original model) on the front: ln PPL over its seeds and the share kept."""

    method: str
    name: str
    tag: str
    objective: str
    distilled: bool
    layers: tuple
    seeds: tuple
    log_ppl: float
    std: float | None
    params_per_layer: int | None
    kept: float
    subset: tuple  # (windows, of, window): the evaluation windows, of how many, and their length
    folders: tuple


def objective_of(method: str, tag: str) -> str:
    """'attention' / 'logits' from the tag's ``-obj...`` part; 'qkv' otherwise and for closed forms."""
    if method in RECORDS and not RECORDS[method].adam_fitted:
        return "qkv"
    match = re.search(r"-obj([a-z]+)(?=-|$)", tag)
    return match.group(1) if match else "qkv"


def kept_fraction(n_replaced: int, params_per_layer: int, dense_params_per_layer: int, layers_total: int) -> float:
    """Fraction of the model's q/k/v parameters kept when ``n_replaced`` of ``layers_total`` layers are replaced."""
    if not 0 <= n_replaced <= layers_total:
        raise ValueError(f"{n_replaced} layers replaced but the model has {layers_total} (--layers-total)")
    return ((n_replaced * params_per_layer + (layers_total - n_replaced) * dense_params_per_layer)
            / (layers_total * dense_params_per_layer))


#: Largest results.json read: a study of every method, seed and layer set writes a few MB.
RESULTS_BYTES = 256 << 20
_RERUN = "rerun `galinear compress` into a fresh folder"


def _read(folder: str) -> dict:
    path = os.path.join(folder, "results.json")
    if not os.path.lexists(path):
        raise ValueError(f"{folder}: no results.json there; each RUN must be a folder written by `galinear compress --out`")
    if not os.path.exists(path):
        raise ValueError(f"{path} is a link to {os.readlink(path)}, which does not exist; {_RERUN}")
    # a folder, a FIFO or a device (a link to /dev/zero) is named as such, never read
    payload = _io.load_json(path, fix=_RERUN, max_bytes=RESULTS_BYTES)
    if not isinstance(payload, dict) or not isinstance(payload.get("entries"), dict):
        raise ValueError(f"{path}: no \"entries\" mapping; not a `galinear compress --out` results file")
    return payload["entries"]


def _integer(value, minimum: int = 0) -> bool:
    """True for a JSON integer (not a bool, not a float such as 1e400 or 1.5) >= ``minimum``."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


def _entry_fields(folder: str, key: str, e: dict):
    """(tag, layers, seed, params_per_layer, dense_params_per_layer) of a results entry, checked:
    a ValueError names the folder, the entry and the field that is not what `galinear compress` writes."""
    def bad(field, value, what):
        return ValueError(f"{folder}: entry {key!r} has {field} = {value!r}, not {what}; the results.json was "
                          "changed or damaged: rerun `galinear compress` into a fresh folder")

    missing = [name for name in ("tag", "layers", "seed", "params_per_layer", "dense_params_per_layer") if name not in e]
    if missing:
        raise ValueError(f"{folder}: entry {key!r} lacks {', '.join(missing)}; not a `galinear compress` results entry")
    layers = e["layers"]
    if not isinstance(layers, list) or not layers or not all(_integer(x) for x in layers):
        raise bad("layers", layers, "a non-empty list of layer indices >= 0")
    if len(set(layers)) != len(layers):
        raise bad("layers", layers, "a list of distinct layer indices")
    for name, minimum in (("seed", 0), ("params_per_layer", 0), ("dense_params_per_layer", 1)):
        if not _integer(e[name], minimum):
            raise bad(name, e[name], f"an integer >= {minimum}")
    if not isinstance(e["tag"], str):
        raise bad("tag", e["tag"], "a string")
    return e["tag"], tuple(layers), e["seed"], e["params_per_layer"], e["dense_params_per_layer"]


def _subset(folder: str, key: str, e: dict) -> tuple:
    """(windows, of, window) of an entry: each an integer >= 1 or absent (None)."""
    subset = (e.get("windows"), e.get("of"), e.get("window"))
    for name, value in zip(("windows", "of", "window"), subset):
        if value is not None and not _integer(value, 1):
            raise ValueError(f"{folder}: entry {key!r} has {name} = {value!r}, not a count of windows (an integer "
                             ">= 1); the results.json was changed or damaged: rerun `galinear compress` into a fresh "
                             "folder")
    return subset


def _describe(subset: tuple) -> str:
    windows, of, window = subset
    return f"{windows} of {of} windows of {window} tokens" if of is not None else f"{windows} windows"


def collect(run_folders, dataset: str = "wikitext2", layers_total: int = 30, mixed_subsets: bool = False,
            per_layer: bool = False) -> list:
    """The points of every ``dataset`` entry of ``run_folders``, the original model first (kept = 1).

    Raises ValueError when a folder holds no results.json, when the same entry (or the original
    model on the same subset) is scored differently in two folders, or when points come from
    different evaluation subsets and ``mixed_subsets`` is False.

    ``per_layer`` puts the budget itself on the axis: ``kept`` is then params_per_layer /
    dense_params_per_layer, the share kept in the replaced layers, which compares budgets at one
    layer set (the whole-model share of four replaced layers differs only in its third digit); the
    points must then share one layer set.
    """
    if isinstance(layers_total, bool) or not isinstance(layers_total, int) or layers_total < 1:
        raise ValueError(f"layers_total must be a positive integer, got {layers_total!r}")
    run_folders = [os.fspath(f) for f in run_folders]
    seen, subsets, groups, originals = {}, {}, {}, {}
    for folder in run_folders:
        for key, e in sorted(_read(folder).items()):
            if not isinstance(e, dict) or e.get("dataset") != dataset:
                continue
            log_ppl = e.get("log_ppl")
            if isinstance(log_ppl, bool) or not isinstance(log_ppl, (int, float)) or not math.isfinite(log_ppl):
                raise ValueError(f"{folder}: entry {key!r} has no finite log_ppl ({log_ppl!r})")
            subset = _subset(folder, key, e)
            subsets.setdefault(subset, folder)
            other = next((s for s in subsets if s != subset), None)
            if other is not None and not mixed_subsets:
                raise ValueError(f"{subsets[other]} scores {dataset} on {_describe(other)} but {folder} on "
                                 f"{_describe(subset)}; points of different subsets are not comparable: {_SUBSET_FIX}")
            earlier = seen.setdefault((key, subset), (folder, log_ppl))
            if abs(earlier[1] - log_ppl) > TOLERANCE:
                what = "the original model" if e.get("method") == "original" else f"entry {key!r}"
                raise ValueError(f"{earlier[0]} and {folder} disagree on {what} ({dataset}, {_describe(subset)}): "
                                 f"ln PPL {earlier[1]:.6f} vs {log_ppl:.6f}; they were not scored the same way")
            if earlier[0] != folder:
                continue  # the same entry in a later folder: kept once
            if e.get("method") == "original":
                originals.setdefault(subset, (folder, log_ppl))
                continue
            tag, layers, seed, _, _ = _entry_fields(folder, key, e)
            group = groups.setdefault((tag, layers, subset), {"e": e, "scores": {}, "folders": []})
            group["scores"][seed] = float(log_ppl)
            if folder not in group["folders"]:
                group["folders"].append(folder)
    points = []
    if originals:
        folder, log_ppl = min(originals.values(), key=lambda o: run_folders.index(o[0]))
        subset = next(s for s, o in originals.items() if o[0] == folder)
        points.append(Point("original", "original", "original", "-", False, (), (), log_ppl, None, None, 1.0,
                            subset, (folder,)))
    for (tag, layers, subset), group in groups.items():
        e, scores = group["e"], [group["scores"][s] for s in sorted(group["scores"])]
        params, dense = int(e["params_per_layer"]), int(e["dense_params_per_layer"])
        if max(layers, default=0) >= layers_total:
            raise ValueError(f"{group['folders'][0]}: {tag} replaces layer {max(layers)} but the model has "
                             f"{layers_total} layers (--layers-total)")
        distilled = e.get("distill") is not None
        points.append(Point(e["method"], display_name(e["method"]) + (" + distillation" if distilled else ""), tag,
                            objective_of(e["method"], tag), distilled, layers, tuple(sorted(group["scores"])),
                            float(np.mean(scores)), float(np.std(scores, ddof=1)) if len(scores) > 1 else None,
                            params, params / dense if per_layer else kept_fraction(len(layers), params, dense,
                                                                                   layers_total), subset,
                            tuple(group["folders"])))
    sets = sorted({p.layers for p in points if p.method != "original"})
    if per_layer and len(sets) > 1:
        raise ValueError(f"the per-layer share compares budgets at one layer set, but the runs replace "
                         f"{' and '.join(compact(s) for s in sets[:3])}{' ...' if len(sets) > 3 else ''}: "
                         "pass folders of one layer set, or drop --per-layer")
    return points


def front(points) -> list:
    """The Pareto-optimal points (no other point has kept <= and ln PPL <=, one of them strictly), by kept."""
    ordered = sorted(points, key=lambda p: (p.kept, p.log_ppl))
    out, best, i = [], math.inf, 0
    while i < len(ordered):
        j = i
        while j < len(ordered) and ordered[j].kept == ordered[i].kept:
            j += 1
        lowest = ordered[i].log_ppl  # the group's lowest ln PPL; the others in the group are beaten by it
        if lowest < best:
            out += [p for p in ordered[i:j] if p.log_ppl == lowest]
            best = lowest
        i = j
    return out


def table(points) -> str:
    """A markdown table of ``points`` by kept (descending) then ln PPL, the front marked in its last column."""
    optimal = {id(p) for p in front(points)}
    mixed = len({p.subset for p in points}) > 1
    head = ["method", "objective", "distilled", "layers replaced", "seeds", "params per layer",
            "% of q/k/v kept", "ln PPL"] + (["evaluated on"] if mixed else []) + ["front"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in sorted(points, key=lambda p: (-p.kept, p.log_ppl)):
        original = p.method == "original"
        score = f"{p.log_ppl:.4f}" + (f" ± {p.std:.4f}" if p.std is not None else "")
        cells = [p.name, p.objective, "-" if original else ("yes" if p.distilled else "no"),
                 compact(p.layers) if p.layers else "-", ",".join(map(str, p.seeds)) or "-",
                 "-" if p.params_per_layer is None else f"{p.params_per_layer:,}", f"{100 * p.kept:.3g}", score]
        cells += [_describe(p.subset)] if mixed else []
        lines.append("| " + " | ".join(cells + ["yes" if id(p) in optimal else ""]) + " |")
    return "\n".join(lines) + "\n"


_MARKERS = "osD^v<>pPhX*"


def plot(points, path: str, per_layer: bool = False) -> str:
    """ln PPL against % of q/k/v kept (log x) as a PNG at ``path``: colour per method family, marker
    per method, hollow when fitted only and filled when distilled, the front as a step line and the
    original model as a dashed line. Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter
    except ImportError:
        raise ImportError("the front plot needs matplotlib: pip install matplotlib") from None
    fig, ax = plt.subplots(figsize=(7.5, 5.0))
    methods = sorted({p.method for p in points if p.method != "original"})
    style = {m: (colour(m, "tab:brown"), _MARKERS[i % len(_MARKERS)]) for i, m in enumerate(methods)}
    for p in points:
        if p.method == "original":
            ax.axhline(p.log_ppl, color="k", linestyle="--", linewidth=1.0)
            continue
        color, marker = style[p.method]
        ax.errorbar(100 * p.kept, p.log_ppl, yerr=p.std, color=color, marker=marker, markersize=7, capsize=3,
                    markerfacecolor=color if p.distilled else "none", linestyle="none")
    optimal = front(points)
    ax.step([100 * p.kept for p in optimal], [p.log_ppl for p in optimal], where="post", color="0.4", linewidth=1.0)
    # the legend: one hollow glyph per method, then what filled means, the front and the original
    handles = [Line2D([], [], color=c, marker=m, markerfacecolor="none", linestyle="none") for c, m in style.values()]
    names = [display_name(m) for m in methods] + ["hollow: fitted only", "filled: + distillation", "front"]
    handles += [Line2D([], [], color="0.3", marker="o", markerfacecolor="none", linestyle="none"),
                Line2D([], [], color="0.3", marker="o", linestyle="none"), Line2D([], [], color="0.4")]
    handles += [Line2D([], [], color="k", linestyle="--") for p in points if p.method == "original"]
    names += [f"original ({p.log_ppl:.4f})" for p in points if p.method == "original"]
    ax.set_xscale("log")
    plain, xs = FuncFormatter(lambda value, _: f"{value:g}"), [100 * p.kept for p in points] or [1.0]
    ax.xaxis.set_major_formatter(plain)
    if max(xs) < 10 * min(xs):  # less than a decade: label the minor ticks too (over more they crowd)
        ax.xaxis.set_minor_formatter(plain)
    ax.set_xlabel("% of q/k/v parameters kept in the replaced layers" if per_layer
                  else "% of the model's attention q/k/v parameters kept")
    ax.set_ylabel("ln PPL")
    ax.grid(alpha=0.3, which="both")
    ax.legend(handles, names, fontsize=8, loc="best")
    fig.tight_layout()
    _io.atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=120, format="png"))
    plt.close(fig)
    return path


def main(argv=None) -> int:
    """``python -m galinear.compress.report.pareto RUN [RUN ...]``: print the table; 2 on bad input."""
    parser = argparse.ArgumentParser(prog="python -m galinear.compress.report.pareto",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN", help="a folder written by `galinear compress --out`")
    parser.add_argument("--dataset", default="wikitext2", help="the text whose ln PPL is compared (default wikitext2)")
    parser.add_argument("--layers-total", type=int, default=30,
                        help="decoder layers of the model (not recorded in the run; default 30 = SmolLM2-135M)")
    parser.add_argument("--mixed-subsets", action="store_true", help="allow points scored on different subsets")
    parser.add_argument("--per-layer", action="store_true",
                        help="the share kept in the replaced layers (params per layer / dense) on the axis, for "
                             "budgets at one layer set")
    parser.add_argument("--png", help="write the plot there")
    parser.add_argument("--md", help="write the table there")
    args = parser.parse_args(argv)
    try:
        for flag, path in (("--md", args.md), ("--png", args.png)):
            if path is not None and (os.path.isdir(path) or path.endswith(os.sep)):
                raise ValueError(f"{flag} {path} is a folder; give the file to write, e.g. "
                                 f"{os.path.join(path, 'front.' + flag[2:])}")
        points = collect(args.runs, args.dataset, args.layers_total, args.mixed_subsets, args.per_layer)
        if not points:
            raise ValueError(f"no {args.dataset} entries in {', '.join(args.runs)}")
        text = table(points)
        if args.md:
            _io.atomic_write_text(args.md, text)
        if args.png:
            plot(points, args.png, args.per_layer)
    except (ValueError, OSError, ImportError) as error:
        parser.exit(2, f"pareto: error: {' '.join(str(error).split())}\n")
    sys.stdout.write(text)
    return 0


__all__ = ["Point", "TOLERANCE", "collect", "front", "table", "plot", "kept_fraction", "objective_of", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
