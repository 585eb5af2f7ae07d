"""Equal-step and equal-time comparison of `galinear train-lm` runs (docs/results.md, "Training a transformer").

``python benchmarks/lm_comparison.py RUNS/TEXT --costs benchmarks/results/bench_lm_step.json
[--threads 2] [--time-of rotor] [--plot docs/results-train-lm.png]``

Held-out ln PPL depends only on the steps taken (the batches of step s are fixed by the seed), not
on how busy the machine was; the time a step takes does. So the runs may be made on a shared
machine, and time is put back from one idle measurement: ``benchmarks/bench_lm_step.py`` gives the
seconds of one step of every model at a thread count, and a run's evaluation at step s is placed
at s times that cost ("idle seconds"). The table gives, per run group (mean ± sample std over
seeds): parameters, the final step, held-out ln PPL at the final step, the idle seconds of the
whole run, tokens per second and peak memory from the step benchmark, and the held-out ln PPL
reached at the idle time of the ``--time-of`` group's whole run (linear interpolation between
evaluations; "-" where a group's run ended earlier; then see its final value and its time).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, markdown_table  # noqa: E402
from galinear.train.lm_report import collect_lm_runs, plot_lm_curves  # noqa: E402


def model_key(config: dict) -> str:
    """The bench_lm_step name of a run's model: its kind plus the settings that differ from the default."""
    model = config["model"]
    key = model["projection"]
    if model["width"] != 256:
        key += f",width={model['width']}"
    if model["projection"] == "lowrank" and model.get("rank", 8) != 8:
        key += f",rank={model['rank']}"
    return key


def at_time(history: dict, seconds_per_step: float, seconds: float):
    """Held-out ln PPL at ``seconds`` idle seconds, interpolated between evaluations (None past the end)."""
    points = [(e["step"] * seconds_per_step, e["heldout_ln_ppl"]) for e in history["evals"]]
    if seconds > points[-1][0] + 1e-9:
        return None
    previous = (0.0, None)
    for time, value in points:
        if time >= seconds:
            if previous[1] is None:
                return value
            share = (seconds - previous[0]) / (time - previous[0])
            return previous[1] + share * (value - previous[1])
        previous = (time, value)
    return points[-1][1]


def mean_std(values):
    values = list(values)
    return statistics.fmean(values), (statistics.stdev(values) if len(values) > 1 else 0.0)


def compare(runs_root, costs_path, threads: int = 2, time_of: str = "rotor") -> tuple[list[dict], float]:
    groups = collect_lm_runs(runs_root)
    costs = {(row["kind"], row["threads"]): row for row in json.loads(Path(costs_path).read_text())["rows"]}
    rows = []
    for name, runs in groups.items():
        histories = list(runs.values())
        key = model_key(histories[0]["config"])
        cost = costs.get((key, threads))
        if cost is None:
            raise SystemExit(f"no step cost for {key!r} at {threads} threads in {costs_path}; run bench_lm_step.py "
                             f"--models {key} --threads {threads}")
        rows.append({"name": name, "model": key, "runs": runs, "histories": histories, "cost": cost,
                     "seeds": sorted(runs),
                     "steps": max(h["evals"][-1]["step"] for h in histories)})
    reference = next((r for r in rows if r["name"] == time_of), None)
    budget = reference["steps"] * reference["cost"]["step_seconds"] if reference else None
    for row in rows:
        spt = row["cost"]["step_seconds"]
        row["final"] = mean_std(h["evals"][-1]["heldout_ln_ppl"] for h in row["histories"])
        row["idle_seconds"] = row["steps"] * spt
        values = [at_time(h, spt, budget) for h in row["histories"]] if budget else []
        row["at_budget"] = mean_std(values) if values and None not in values else None
    return rows, budget


def markdown(rows: list[dict], budget, threads: int, time_of: str) -> str:
    def spread(pair):
        return f"{pair[0]:.4f} ± {pair[1]:.4f}"

    table = markdown_table(
        ["model", "parameters", "in projections", "seeds", "steps", "held-out ln PPL at the last step",
         f"s per step ({threads} thread(s), bench_lm_step)", "s of the run", "tokens/s", "peak RSS (MiB)",
         f"ln PPL at {budget:.0f} s (= {time_of}'s run)"],
        ([r["name"], f"{r['cost']['parameters']:,}", f"{r['cost']['projection_parameters']:,}",
          ", ".join(map(str, r["seeds"])), r["steps"], spread(r["final"]), f"{r['cost']['step_seconds']:.3f}",
          f"{r['idle_seconds']:.0f}", f"{r['cost']['tokens_per_second']:,.0f}",
          f"{r['cost']['peak_rss_bytes'] / 2**20:,.0f}",
          spread(r["at_budget"]) if r["at_budget"] else "- (ended earlier)"]
         for r in sorted(rows, key=lambda r: r["final"][0])))
    return table + "\n"


def plot(rows: list[dict], path) -> None:
    """The train-lm curves of the groups, the time axis from the step benchmark (idle seconds, log scale)."""
    plot_lm_curves({r["name"]: r["runs"] for r in rows}, path,
                   seconds_per_step={r["name"]: r["cost"]["step_seconds"] for r in rows},
                   labels={r["name"]: f"{r['name']} ({r['cost']['parameters']:,} params, {len(r['seeds'])} "
                                      f"seed{'s' if len(r['seeds']) > 1 else ''})" for r in rows},
                   log_time=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", help="the OUT/TEXT folder of the train-lm runs")
    parser.add_argument("--costs", default=str(RESULTS / "bench_lm_step.json"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--time-of", default="rotor", help="the run group whose idle time sets the equal-time column")
    parser.add_argument("--plot", default=None)
    args = parser.parse_args(argv)
    rows, budget = compare(args.runs, args.costs, args.threads, args.time_of)
    print(markdown(rows, budget or 0.0, args.threads, args.time_of))
    if args.plot:
        plot(rows, args.plot)
        print(f"plot: {args.plot}")


if __name__ == "__main__":
    main()
