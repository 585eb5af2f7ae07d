"""Summaries of finished ``galinear train-lm`` runs: a markdown table, a JSON summary and the
held-out ln PPL curves against steps and against training seconds.

Runs are grouped by their folder name without the ``-seed<k>`` suffix; a group's row gives the
mean and sample standard deviation over its seeds.
"""
from __future__ import annotations

import statistics
from pathlib import Path

from galinear import _io
from galinear.train.lm_loop import LM_RUNS
from galinear.train.run_folder import mean_std

__all__ = ["collect_lm_runs", "summarise_lm", "lm_markdown_table", "plot_lm_curves", "write_lm_report"]

def collect_lm_runs(root) -> dict[str, dict[int, dict]]:
    """{group: {seed: history}} of every run folder under ``root`` with at least one evaluation."""
    return LM_RUNS.collect(root, lambda history: bool(history.get("evals")))


def summarise_lm(groups: dict[str, dict[int, dict]]) -> list[dict]:
    """One row per group: sizes, final / best held-out ln PPL, tokens per second, peak memory."""
    rows = []
    for name, runs in groups.items():
        histories = list(runs.values())
        first = histories[0]
        model, train = first["config"]["model"], first["config"]["train"]
        final_mean, final_std = mean_std(h["evals"][-1]["heldout_ln_ppl"] for h in histories)
        speeds = [h["tokens_per_second"] for h in histories if h.get("tokens_per_second")]
        rows.append({
            "name": name, "projection": model["projection"], "width": model["width"], "layers": model["layers"],
            "context": model["context"], "parameters": first["parameters"],
            "projection_parameters": first["projection_parameters"],
            "matching": first.get("matching"), "seeds": sorted(runs),
            "steps": [h["step"] for h in histories], "planned_steps": train["steps"],
            "precision": train["precision"], "lr": train["lr"], "rotor_lr": train.get("rotor_lr"),
            "final_ln_ppl_mean": final_mean, "final_ln_ppl_std": final_std,
            "best_ln_ppl_mean": statistics.fmean(min(e["heldout_ln_ppl"] for e in h["evals"]) for h in histories),
            "train_seconds_mean": statistics.fmean(h["train_seconds"] for h in histories),
            "tokens_per_second": statistics.median(speeds) if speeds else None,
            "peak_memory_bytes": max(h.get("peak_memory_bytes", 0) for h in histories),
            "peak_memory": first.get("peak_memory"),
        })
    return rows


def lm_markdown_table(rows: list[dict]) -> str:
    lines = [
        "| model | width x layers | parameters | projection parameters | seeds | steps | held-out ln PPL (final, mean ± std) "
        "| best | train s | tokens / s | peak memory (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        steps = ", ".join(sorted({str(s) for s in r["steps"]}))
        if any(s < r["planned_steps"] for s in r["steps"]):
            steps += f" (of {r['planned_steps']})"
        speed = f"{r['tokens_per_second']:,.0f}" if r["tokens_per_second"] else "-"
        lines.append(
            f"| {r['name']} | {r['width']} x {r['layers']} | {r['parameters']:,} | {r['projection_parameters']:,} | "
            f"{', '.join(map(str, r['seeds']))} | {steps} | {r['final_ln_ppl_mean']:.4f} ± {r['final_ln_ppl_std']:.4f} | "
            f"{r['best_ln_ppl_mean']:.4f} | {r['train_seconds_mean']:.0f} | {speed} | "
            f"{r['peak_memory_bytes'] / 2**20:,.0f} |")
    return "\n".join(lines) + "\n"


def plot_lm_curves(groups: dict[str, dict[int, dict]], path, title: str = "", *,
                   seconds_per_step: dict[str, float] | None = None, labels: dict[str, str] | None = None,
                   log_time: bool = False) -> None:
    """Held-out ln PPL against steps (left) and seconds (right): mean over seeds, with the
    min..max band over seeds.

    The seconds are the runs' own training seconds, or with ``seconds_per_step`` ({group: s})
    each evaluation's step times that cost (one idle measurement, for runs made on a shared
    machine). ``labels``: legend text per group (default: its name and seed count). ``log_time``:
    a logarithmic seconds axis, without the points at 0 s (step 0). The ln PPL is per byte when
    every run used the byte tokenizer, per token otherwise.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (by_step, by_time) = plt.subplots(1, 2, figsize=(10, 4), dpi=120, sharey=True)
    tokenizers = set()
    for name, runs in groups.items():
        length = min(len(h["evals"]) for h in runs.values())
        evals = [[h["evals"][i] for h in runs.values()] for i in range(length)]
        mean = [statistics.fmean(e["heldout_ln_ppl"] for e in row) for row in evals]
        low = [min(e["heldout_ln_ppl"] for e in row) for row in evals]
        high = [max(e["heldout_ln_ppl"] for e in row) for row in evals]
        steps = [row[0]["step"] for row in evals]
        if seconds_per_step is None:
            seconds = [statistics.fmean(e["train_seconds"] for e in row) for row in evals]
        else:
            seconds = [step * seconds_per_step[name] for step in steps]
        tokenizers |= {h["config"].get("data", {}).get("tokenizer") for h in runs.values()}
        label = (labels or {}).get(name) or f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})"
        line, = by_step.plot(steps, mean, label=label)
        by_step.fill_between(steps, low, high, color=line.get_color(), alpha=0.2)
        shown = [point for point in zip(seconds, mean, low, high) if point[0] > 0 or not log_time]  # log: no 0 s
        times, means, lows, highs = (list(column) for column in zip(*shown)) if shown else ([], [], [], [])
        by_time.plot(times, means, color=line.get_color(), label=label)
        by_time.fill_between(times, lows, highs, color=line.get_color(), alpha=0.2)
    by_step.set_xlabel("step")
    by_time.set_xlabel("training seconds" if seconds_per_step is None
                       else "seconds (steps x the step benchmark's seconds per step)")
    if log_time:
        by_time.set_xscale("log")
    by_step.set_ylabel(f"held-out ln PPL (nats per {'byte' if tokenizers == {'byte'} else 'token'})")
    for axis in (by_step, by_time):
        axis.grid(alpha=0.3)
    by_time.legend(fontsize=8)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    _io.atomic_write(path, lambda tmp: figure.savefig(tmp, format=Path(path).suffix[1:] or "png"))
    plt.close(figure)


def write_lm_report(root, title: str = "") -> list[dict]:
    """Write ``summary.json``, ``results.md`` and (with matplotlib) ``curves.png`` into ``root``."""
    root = Path(root)
    groups = collect_lm_runs(root)
    rows = summarise_lm(groups)
    _io.save_json(root / "summary.json", rows)
    _io.atomic_write_text(root / "results.md", lm_markdown_table(rows))
    if rows:
        try:
            plot_lm_curves(groups, root / "curves.png", title)
        except ImportError:
            print("curves.png not written: matplotlib is missing (pip install 'galinear[plot]')")
    return rows
