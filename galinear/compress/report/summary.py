"""Summaries of a study: JSON, a markdown table and a plot of ln PPL against parameter count."""
from __future__ import annotations

import os

import numpy as np

from galinear import _io
from galinear.compress.methods.records import RECORDS, base_name, colour, display_name
from galinear.compress.study.sequential import compact
from galinear.compress.methods.targets import short
from galinear.lm.models import PROJECTIONS

DATASET_TITLES = {"wikitext2": "WikiText-2 test", "wikipedia": "Wikipedia", "shakespeare": "Shakespeare", "kjv": "KJV"}
PAPER_SETS_NOTE = ("The texts Wikipedia (lead paragraphs), Shakespeare (modern spelling) and the King "
                   "James Bible stand in for the paper's C4 and PTB, which are not available offline; the "
                   "WikiText-2 test split ships with galinear (--wikitext).")
_TEXT_DESCRIPTIONS = {"wikipedia": "Wikipedia (lead paragraphs)", "shakespeare": "Shakespeare (modern spelling)",
                      "kjv": "the King James Bible"}


def texts_note(datasets) -> str:
    """The sentence naming the built-in texts among ``datasets`` (those used, not all three) and
    what they stand in for; "" when none is built in."""
    used = [_TEXT_DESCRIPTIONS[d] for d in datasets if d in _TEXT_DESCRIPTIONS]
    if not used:
        return ""
    names = used[0] if len(used) == 1 else ", ".join(used[:-1]) + " and " + used[-1]
    verb = "stands" if len(used) == 1 else "stand"
    return (f"The built-in text{'s' if len(used) > 1 else ''} {names} {verb} in for the paper's C4 and PTB, which "
            "are not available offline; the WikiText-2 test split ships with galinear (--wikitext).")


def summarize(entries: dict, datasets) -> list:
    """One row per (layer set, method tag): mean, std and seeds of ln PPL per dataset, params, test MSE."""
    rows = {}
    original = {}
    for e in entries.values():
        if e["method"] == "original":
            original[e["dataset"]] = e
            continue
        key = (tuple(e["layers"]), e["tag"])
        row = rows.setdefault(key, {"layers": list(e["layers"]), "method": e["method"], "tag": e["tag"],
                                    "params_per_layer": e["params_per_layer"],
                                    "dense_params_per_layer": e["dense_params_per_layer"],
                                    "log_ppl": {}, "seeds": {}, "test_mse": {}, "test_rel_mse": {},
                                    "fit": e.get("fit"), "blocks": e.get("blocks"),
                                    "targets": list(e.get("targets") or PROJECTIONS),
                                    **{k: e[k] for k in _SHARE if k in e}})
        row["log_ppl"].setdefault(e["dataset"], {})[e["seed"]] = e["log_ppl"]
        row["seeds"][e["seed"]] = True
        row["test_mse"][e["seed"]] = e["test_mse"]
        row["test_rel_mse"][e["seed"]] = e.get("test_rel_mse", {})
    out = []
    if original:
        out.append({"layers": [], "method": "original", "tag": "original", "params_per_layer": None,
                    "log_ppl": {d: {"mean": original[d]["log_ppl"], "std": 0.0, "n": 1,
                                    "values": [original[d]["log_ppl"]]} for d in original},
                    "seeds": [], "test_mse": None, "tokens": {d: original[d]["tokens"] for d in original},
                    "windows": {d: original[d]["windows"] for d in original}})
    for key in sorted(rows, key=lambda k: (len(k[0]), k[0], _method_order(rows[k]["method"]))):
        row = rows[key]
        stats = {}
        for d, per_seed in row["log_ppl"].items():
            values = [per_seed[s] for s in sorted(per_seed)]
            stats[d] = {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                        "n": len(values), "values": values, "seeds": sorted(per_seed)}
        mse = {p: float(np.mean([row["test_mse"][s][p] for s in row["test_mse"]])) for p in row["targets"]}
        rel = {p: float(np.mean([row["test_rel_mse"][s].get(p, np.nan) for s in row["test_rel_mse"]]))
               for p in row["targets"]}
        out.append({"layers": row["layers"], "method": row["method"], "tag": row["tag"],
                    "params_per_layer": row["params_per_layer"],
                    "dense_params_per_layer": row["dense_params_per_layer"],
                    "log_ppl": stats, "seeds": sorted(row["seeds"]), "test_mse": mse, "test_rel_mse": rel,
                    "fit": row["fit"], "blocks": row["blocks"], "targets": row["targets"],
                    **{k: row[k] for k in _SHARE if k in row}})
    return out


#: The whole-model budget of a row (galinear.compress.Study): replaced parameters and the share kept.
_SHARE = ("replaced_params", "replaced_dense_params", "model_params", "model_params_kept", "model_share")


def _method_order(name: str) -> int:
    order = ["dense", "zero", "lr1", "lr1-cf", "lr4", "lr4-cf", "bh1", "bh1-cf", "rotorlin-m", "rotor"]
    return order.index(name) if name in order else len(order)


def markdown(rows: list, datasets) -> str:
    """A markdown table: layers, method, params per layer (of the replaced projections) and % of
    their dense parameters, the % of the whole model's parameters kept, test MSE, ln PPL.

    The relative test MSE is MSE / mean square of the target: 1 means no better than predicting 0.
    """
    names = list(dict.fromkeys(p for r in rows for p in r.get("targets") or ()))
    names = names if names else list(PROJECTIONS)
    shown = short(names)
    share = any("model_share" in r for r in rows)
    head = ["layers", "method", "fit", f"params/layer ({shown.replace(',', '+')})", "% of dense"]
    head += ["% of model kept"] if share else []
    head += [f"test MSE {shown.replace(',', ' / ')}", f"relative test MSE {shown.replace(',', ' / ')}", "seeds"]
    head += [f"ln PPL {DATASET_TITLES.get(d, d)}" for d in datasets]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["method"] == "original":
            cells = ["-", "original", "-", "-", "100"] + (["100"] if share else []) + ["-", "-", "-"]
        else:
            frac = 100.0 * r["params_per_layer"] / r["dense_params_per_layer"]
            mse = " / ".join(f"{r['test_mse'][p]:.3g}" if p in r["test_mse"] else "-" for p in names)
            rel = " / ".join(f"{r['test_rel_mse'][p]:.2f}" if p in r["test_rel_mse"] else "-" for p in names)
            method = display_name(r["method"]) + (f" ({r['blocks']} blocks)" if r.get("blocks") else "")
            cells = [compact(r["layers"]), method, r.get("fit") or "-", f"{r['params_per_layer']:,}", f"{frac:.3g}"]
            cells += ([f"{100.0 * r['model_share']:.2f}" if "model_share" in r else "-"] if share else [])
            cells += [mse, rel, ",".join(map(str, r["seeds"]))]
        for d in datasets:
            s = r["log_ppl"].get(d)
            if s is None:
                cells.append("(missing)")
            elif s["n"] > 1:
                cells.append(f"{s['mean']:.4f} ± {s['std']:.4f}")
            else:
                cells.append(f"{s['mean']:.4f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_figure(rows: list, datasets, path: str) -> str | None:
    """ln PPL against parameters per layer (log x), one panel per text; None if matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    markers = {1: "o", 2: "s", 3: "^"}
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.8), squeeze=False)
    for ax, d in zip(axes[0], datasets):
        seen = set()
        for r in rows:
            s = r["log_ppl"].get(d)
            if s is None:
                continue
            if r["method"] == "original":
                ax.axhline(s["mean"], color="black", linestyle="--", linewidth=1, label="original")
                continue
            if not r["params_per_layer"]:  # the zero baseline has no place on a log axis: a dotted line
                ax.axhline(s["mean"], color=colour("zero"), linestyle=":", linewidth=1,
                           label=None if "zero" in seen else "zero (L" + ",".join(map(str, r["layers"])) + ")")
                seen.add("zero")
                continue
            label = f"{display_name(r['method'])} ({len(r['layers'])} layer{'s' if len(r['layers']) > 1 else ''})"
            exact = r["method"] in RECORDS and RECORDS[r["method"]].exact  # hollow, in the Adam fit's colour
            color = colour(r["method"], "k")
            ax.errorbar(r["params_per_layer"], s["mean"], yerr=s["std"] if s["n"] > 1 else None,
                        color=color, marker=markers.get(len(r["layers"]), "D"), markerfacecolor="none" if exact else color,
                        linestyle="none", capsize=2, alpha=0.8, label=None if label in seen else label)
            seen.add(label)
            ax.annotate("L" + ",".join(map(str, r["layers"])), (r["params_per_layer"], s["mean"]),
                        textcoords="offset points", xytext=(4, 2), fontsize=6)
        ax.set_xscale("log")
        ax.set_xlabel(f"parameters per replaced layer ({short(rows[-1].get('targets') or PROJECTIONS).replace(',', '+')})")
        ax.set_ylabel("ln PPL (held-out)")
        ax.set_title(DATASET_TITLES.get(d, d))
        ax.grid(alpha=0.3)
        ax.tick_params(axis="x", labelsize=7)
    handles = {}
    for ax in axes[0]:  # one legend for all panels, below them, so it covers no point at any size
        for handle, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, handle)
    width = fig.get_size_inches()[0]
    columns = max(1, min(len(handles), 7, int(width // 1.35)))  # an entry takes about 1.3 inches
    lines = -(-len(handles) // columns)
    fig.set_size_inches(width, 3.8 + 0.2 * lines)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=columns, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, (0.2 * lines + 0.1) / (3.8 + 0.2 * lines), 1, 1))
    _io.atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=130, format=os.path.splitext(path)[1][1:] or "png"))
    plt.close(fig)
    return path


def write(entries: dict, config, *, model: str, windows: dict, datasets=None, wikitext: dict | None = None,
          plot: bool = True) -> dict:
    """Write summary.json, results.md, logppl_vs_params.png and the learning curves
    (:func:`galinear.compress.report.curves.write`) into ``config.out_dir``.

    Parameters
    ----------
    entries : dict
        The study's evaluations (``results["entries"]``).
    config : StudyConfig
    model : str
        The model's name.
    windows : dict
        ``{text: {"train": windows, "heldout": windows, "tokens": tokens}}``.
    datasets : list, optional
        What ln PPL is measured on, in the table's order (default ``config.datasets``).
    wikitext : dict, optional
        The WikiText-2 measure when on: ``{"source", "tokens", "window", "windows"}``.
    """
    from galinear.compress.report import curves

    datasets = list(config.datasets if datasets is None else datasets)
    rows = summarize(entries, datasets)
    os.makedirs(config.out_dir, exist_ok=True)
    note = texts_note(datasets)
    user = [f"{d} ({path})" for d, path in config.text_files]
    if user:
        note = (note + " " if note else "") + "Own texts: " + ", ".join(user) + "."
    info = {
        "model": model,
        "note": note,
        "config": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(config).items()},
        "windows": {d: {"train": w["train"], "heldout": w["heldout"], "tokens": w["tokens"]} for d, w in windows.items()},
        "rows": rows,
    }
    table = markdown(rows, datasets)
    windows_line = ", ".join(f"{d}: {w['train']} training / {w['heldout']} held-out windows" for d, w in windows.items())
    standard = ""
    if wikitext is not None:
        every = wikitext.get("of", wikitext["windows"])
        subset = wikitext["windows"] < every
        standard = (f"The standard measure is ln PPL over the whole WikiText-2 (raw) test split "
                    f"({wikitext['source']}): {wikitext['tokens']:,} tokens tokenised once and cut into "
                    f"{every} consecutive non-overlapping windows of {wikitext['window']} tokens (the last "
                    "one shorter), every predicted token of every window scored (each window's first token is context "
                    "only), ln PPL = total NLL / tokens predicted; it is never used for fitting. "
                    + (f"**This run scores a subset: {wikitext['windows']} of the {every} windows, spread evenly over "
                       f"the split ({wikitext.get('scored_tokens', 0):,} tokens, --wikitext-windows); its WikiText-2 "
                       "column is not the standard measure.** " if subset else "")
                    + "The texts' columns are secondary measures on their held-out windows.\n\n")
        info["wikitext"] = {k: wikitext[k] for k in ("source", "tokens", "window", "windows", "of", "scored_tokens")
                            if k in wikitext}
    _io.save_json(os.path.join(config.out_dir, "summary.json"), info, default=str)
    fits = (f"Adam fits until the validation MSE stops improving (at most {config.max_steps} steps, checked every "
            f"{config.eval_every}, patience {config.patience})" if config.until_converged else f"Adam epochs {config.epochs:g}")
    text = (f"# Compression of {model}\n\n" + standard + (f"{note}\n\n" if note else "")
            + f"Windows of {config.window} tokens, stride {config.stride}; {windows_line}. "
            f"{fits}; LR1*, LR4*, BH1*: closed-form optimum over all training rows (second moments); "
            f"rotor hidden width {config.hidden}; o_proj refit "
            f"{'on' if config.refit_o_proj else 'off'}. ln PPL is mean ± sample std over seeds where "
            f"several seeds ran.\n\n{table}" + block_note(rows) + _claim_section(rows, datasets))
    md_path = os.path.join(config.out_dir, "results.md")
    _io.atomic_write_text(md_path, text)
    curves.write(entries, config.out_dir, layers=config.layer_sets[0], plot=plot)
    if plot:
        plot_figure(rows, datasets, os.path.join(config.out_dir, "logppl_vs_params.png"))
    return {"rows": rows, "table": table, "markdown": text}


def _claim_section(rows: list, datasets) -> str:
    from galinear.compress.report.verdict import claim_markdown

    table = claim_markdown(rows, datasets, DATASET_TITLES)
    if not table:
        return ""
    return ("\n## The paper's claim (rotor network vs the best LR4 / BH1 fit, and vs the best LR1 fit)\n\n"
            "Differences of mean ln PPL (negative: the rotor network is better) with two standard errors "
            "from the seed spreads; verdict rule in galinear/compress/report/verdict.py.\n\n" + table)


def block_note(rows: list) -> str:
    """One line per BH1 variant: the block count used and its parameters against the rotor network's."""
    rotor = {tuple(r["layers"]): r["params_per_layer"] for r in rows if r["method"] == "rotor"}
    lines = []
    for r in rows:
        if base_name(r["method"]) != "bh1" or not r.get("blocks"):
            continue
        ratio = rotor.get(tuple(r["layers"]))
        lines.append(f"{display_name(r['method'])} on layers {','.join(map(str, r['layers']))}: {r['blocks']} blocks, "
                     f"{r['params_per_layer']:,} parameters per layer"
                     + (f" = {r['params_per_layer'] / ratio:.1f} x the rotor network's {ratio:,}" if ratio else ""))
    return ("\n" + "\n".join(f"- {line}" for line in dict.fromkeys(lines)) + "\n") if lines else ""
