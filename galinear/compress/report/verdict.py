"""The paper's claim tested on a study's rows: the rotor network against the best baseline.

Pence, Yamada & Singh (NeurIPS 2025, Section 5) claim that with one layer's q/k/v replaced the
rotor network matches or beats BH1 and LR4 in ln PPL with a fraction of their parameters. For
every layer set and text :func:`claim_rows` compares the rotor network's mean ln PPL over seeds
with the best (lowest mean) of the named baselines, each fit counted (Adam and closed form), and
with the best LR1 fit, which has about the rotor network's parameter count.

The difference of means gets the standard error ``sqrt(s_r**2 / n_r + s_b**2 / n_b)`` from the
seed spreads (a closed-form fit has no seed and contributes 0). Verdict: "better" when the
difference plus two standard errors is below 0, "worse" when the difference minus two is above
0, else "level". With one seed on both sides the sign alone decides, so such rows say so.
"""
from __future__ import annotations

import math

from galinear.compress.methods.catalogue import base_name, display_name

__all__ = ["claim_rows", "claim_markdown", "CLAIM_BASELINES", "SAME_SIZE_BASELINE"]

#: The baselines of the claim (every fit of each: Adam and closed form).
CLAIM_BASELINES = ("lr4", "bh1")
#: The baseline with about the rotor network's parameter count.
SAME_SIZE_BASELINE = "lr1"


def _fit_name(method: str) -> str:
    """LR4* for a closed-form fit, "LR4 Adam" for the Adam fit of the same module."""
    shown = display_name(method)
    return shown if shown != method else f"{method.upper()} Adam"


def _best(candidates: list, dataset: str):
    """(row, stats) of the lowest mean ln PPL on ``dataset`` among candidate rows, or None."""
    scored = [(r["log_ppl"][dataset]["mean"], i, r) for i, r in enumerate(candidates) if dataset in r["log_ppl"]]
    if not scored:
        return None
    _, _, row = min(scored)
    return row, row["log_ppl"][dataset]


def _difference(rotor: dict, base: dict) -> tuple:
    """(rotor mean - baseline mean, standard error of that difference, seeds on both sides > 1)."""
    se = math.sqrt(rotor["std"] ** 2 / rotor["n"] + base["std"] ** 2 / base["n"])
    return rotor["mean"] - base["mean"], se, rotor["n"] > 1 or base["n"] > 1


def _verdict(diff: float, se: float, spread: bool) -> str:
    if diff + 2 * se < 0:
        word = "better"
    elif diff - 2 * se > 0:
        word = "worse"
    else:
        word = "level"
    return word if spread else word + " (one seed: sign only)"


def claim_rows(rows: list, datasets) -> list:
    """One dict per (layer set with a rotor row, dataset): the comparison of the module docstring."""
    by_set = {}
    for r in rows:
        if r["method"] != "original":
            by_set.setdefault(tuple(r["layers"]), []).append(r)
    out = []
    for layers, group in by_set.items():
        rotors = [r for r in group if r["method"] == "rotor"]
        if not rotors:
            continue
        claim = [r for r in group if base_name(r["method"]) in CLAIM_BASELINES]
        same = [r for r in group if base_name(r["method"]) == SAME_SIZE_BASELINE]
        for d in datasets:
            if d not in rotors[0]["log_ppl"]:
                continue
            rotor = rotors[0]["log_ppl"][d]
            entry = {"layers": list(layers), "dataset": d, "rotor": rotor["mean"], "rotor_std": rotor["std"],
                     "rotor_n": rotor["n"], "rotor_params": rotors[0]["params_per_layer"]}
            for label, candidates in (("claim", claim), ("same_size", same)):
                best = _best(candidates, d)
                if best is None:
                    continue
                row, stats = best
                diff, se, spread = _difference(rotor, stats)
                entry[label] = {"method": row["method"], "name": _fit_name(row["method"]), "mean": stats["mean"],
                                "std": stats["std"], "n": stats["n"], "params": row["params_per_layer"],
                                "difference": diff, "se": se, "verdict": _verdict(diff, se, spread)}
            out.append(entry)
    return out


def claim_markdown(rows: list, datasets, titles: dict | None = None) -> str:
    """The claim table of :func:`claim_rows` in markdown ("" when no set has a rotor row)."""
    titles = titles or {}
    entries = claim_rows(rows, datasets)
    if not entries:
        return ""
    head = ["layers", "text", "rotor ln PPL", "best of LR4/BH1 (fit)", "rotor − it (± 2 s.e.)", "verdict",
            "best LR1 (fit)", "rotor − it (± 2 s.e.)", "verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def cells(c):
        if c is None:
            return ["-", "-", "-"]
        return [f"{c['mean']:.4f} ({c['name']})", f"{c['difference']:+.4f} ± {2 * c['se']:.4f}", c["verdict"]]

    for e in entries:
        rotor = f"{e['rotor']:.4f}" + (f" ± {e['rotor_std']:.4f}" if e["rotor_n"] > 1 else "")
        lines.append("| " + " | ".join([",".join(map(str, e["layers"])), titles.get(e["dataset"], e["dataset"]), rotor]
                                        + cells(e.get("claim")) + cells(e.get("same_size"))) + " |")
    return "\n".join(lines) + "\n"
