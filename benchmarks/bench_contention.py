"""Rotor layers beside a busy process: every backend at 1 and 2 threads, idle and loaded.

    python benchmarks/bench_contention.py [--sizes 1024 2048 4096] [--tokens 2048] [--repeats 11]
    python benchmarks/bench_contention.py --quick          # small sizes: a smoke run
    python benchmarks/bench_contention.py --training       # forward + backward in training mode

For each load, each thread count (torch's intra-op pool and numba's, set together) and each d,
side by side in one run: ``torch.nn.functional.linear`` with a (d, d) weight and a whole
``RotorLinear(d, d)`` (eval mode, ``torch.no_grad()``, float32, --tokens tokens) with each backend
("dense", "numba", "spinor", "factored" up to d = --factored-max, and "auto"), plus the "spinor"
map alone (``F.rotor_sandwich`` on the layer's one chunk), which runs with the caller's threads:
the layers follow the thread policy of :mod:`galinear.nn.functional.plan`, the bare map does not.
Each round times every contender at every thread count, the counts alternating inside the round
(a change of load falls on both alike), each timed call after one untimed call of the same
contender (so it does not pay for the OpenMP workers the previous contender left spinning);
times are wall-clock (``time.perf_counter``) medians of --repeats rounds, after a warm-up.

Loads: "idle" (nothing else started), then "busy": one other process at normal priority (the
benchmark's own) spinning a pure-Python loop, started by this benchmark before the busy cells and
killed at the end (also on an error or Ctrl-C); its CPU seconds are reported.

Reported per cell: ms per call, F.linear time / ours (above 1: faster than the dense layer),
each contender's 2-thread / 1-thread time under the same load (above 1: slower with 2 threads),
and whether the backend ``auto`` runs is within 10 % of the fastest backend of the cell (both timed as
named layers), beside auto's own layer timed the same way (the same computation plus the dispatcher,
whose cost per call is reported: the gap between the two is the run's noise). Writes --out.{md,json}
(default benchmarks/results/bench_contention).
"""
from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, BusyProcess, Contender, command_line, header, markdown_table, metadata,  # noqa: E402
                     ratio, round_robin, set_threads, write_results)

OUT = RESULTS / "bench_contention"
BACKENDS = ("dense", "numba", "spinor", "factored", "auto")
MAP = "spinor map, caller's threads"


def cell(d: int, tokens: int, repeats: int, factored_max: int, threads: list, training: bool = False) -> list:
    """Seconds per call of every contender at every thread count, and auto's plan, for one d.

    Each round times every contender once at each thread count, the counts alternating inside the
    round, so a change of load during the run (the scheduler moving the busy process) falls on both
    counts alike. Before each timed call the contender runs once untimed: the timed call does not
    pay for OpenMP workers that the previous contender left spinning."""
    import torch

    from galinear.nn import RotorLinear
    from galinear.nn import functional as F

    torch.manual_seed(0)
    x = torch.randn(tokens, d)
    weight = torch.randn(d, d) / d**0.5
    names = [b for b in BACKENDS if (b != "factored" or d <= factored_max) and not (training and b == "factored")]
    layers = {name: RotorLinear(d, d, backend=name).train(training) for name in names}
    for layer in layers.values():
        layer.load_state_dict(layers["auto"].state_dict())
    if training:  # forward + backward: gradients for x and the parameters (F.linear: x and W)
        x.requires_grad_(True)
        weight.requires_grad_(True)

        def step(fn):
            def call():
                fn().sum().backward()
            return call

        calls = {"F.linear": step(lambda: torch.nn.functional.linear(x, weight))}
        calls.update({name: step(lambda layer=layer: layer(x)) for name, layer in layers.items()})
    else:
        calls = {"F.linear": lambda: torch.nn.functional.linear(x, weight)}
        calls.update({name: (lambda layer=layer: layer(x)) for name, layer in layers.items()})
    spinor = layers["spinor"]
    if spinor.pairs == 1 and not training:
        left, right = spinor.rotor_factors()
        chunks = x.view(tokens, 1, d)
        calls[MAP] = lambda: F.rotor_sandwich(chunks, left, right, backend="spinor")
    effect, plans = {}, {}
    with torch.set_grad_enabled(training):
        for t in threads:  # the counts in effect, and auto's plan, at every count
            effect[t] = set_threads(t)
            plans[t] = layers["auto"]._plan(tokens, x, training)

        def settled(t, fn):  # untimed: the count set, and one call that leaves the contender's workers warm
            def setup():
                set_threads(t)
                fn()
            return setup

        timings = round_robin({(t, name): Contender(lambda _, fn=fn: fn(), setup=settled(t, fn))
                               for t in threads for name, fn in calls.items()}, repeats)
        plan_us = _plan_cost(layers["auto"], tokens, x, training)
    out = []
    for t in threads:
        seconds = {name: timings[(t, name)].median for name in calls}
        plan = plans[t]
        runs = "decode" if plan.decode else plan.backend or "dense"  # the named layer that runs it
        fastest = min((b for b in names if b != "auto"), key=seconds.get)
        out.append({"threads": t, "torch_threads": effect[t][0], "numba_threads": effect[t][1], "seconds": seconds,
                    "auto_runs": runs, "auto_rule": plan.rule, "auto_threads": plan.threads, "fastest": fastest,
                    "plan_microseconds": plan_us,
                    # auto's choice against the fastest backend, both timed as named layers
                    "auto_choice_within_10pct": runs in seconds and seconds[runs] <= 1.1 * seconds[fastest],
                    # auto's own layer, timed like the others (the same computation as its choice plus the plan,
                    # so its gap to the chosen backend's layer is the run's noise)
                    "auto_within_10pct": seconds["auto"] <= 1.1 * seconds[fastest]})
    return out


def _plan_cost(layer, tokens, x, training=False) -> float:
    """Microseconds per call of the dispatcher (what auto adds to the backend it picks)."""
    timing = round_robin({"plan": lambda: layer._plan(tokens, x, training)}, 1, min_sample_seconds=0.05)
    return timing["plan"].best * 1e6


def run(args) -> dict:
    cells = []
    loads = ["idle", "busy"]
    busy_cpu = None
    for load in loads:
        with (BusyProcess() if load == "busy" else _Idle()) as neighbour:
            for d in args.sizes:
                for result in cell(d, args.tokens, args.repeats, args.factored_max, args.threads, args.training):
                    result.update(load=load, d=d, tokens=args.tokens)
                    cells.append(result)
                    s = result["seconds"]
                    print(f"{load:4s} {result['threads']} thread(s) d={d}: " + ", ".join(
                        f"{name} {t * 1e3:.1f} ms" for name, t in s.items())
                        + f" | auto runs {result['auto_runs']}, fastest {result['fastest']}"
                        + ("" if result["auto_choice_within_10pct"] else " (auto's choice NOT within 10 %)"),
                        flush=True)
        if load == "busy":
            busy_cpu = {"cpu_seconds": neighbour.cpu, "wall_seconds": neighbour.wall}
    return metadata(command_line(__file__, args.argv), thread_counts=False, training=args.training, tokens=args.tokens,
                    repeats=args.repeats, sizes=args.sizes, threads=args.threads, busy_process=busy_cpu, cells=cells)


class _Idle:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _find(cells, load, threads, d):
    for c in cells:
        if (c["load"], c["threads"], c["d"]) == (load, threads, d):
            return c
    return None


def markdown(result) -> str:
    cells = result["cells"]
    threads = result["threads"]
    low, high = min(threads), max(threads)
    busy = result["busy_process"] or {}
    lines = [header(result) + f" Float32, {result['tokens']} tokens, "
             + ("training mode, forward + backward (gradients for x and the parameters)"
                if result.get("training") else "eval mode, no autograd")
             + f"; medians of {result['repeats']} rounds, each timing every contender at "
             "every thread count (the counts alternating inside the round), every timed call after one untimed "
             "call of the same contender.", ""]
    if busy.get("cpu_seconds") is not None:
        lines += [f"Busy process: {busy['cpu_seconds']:.1f} CPU seconds in {busy['wall_seconds']:.1f} s while the "
                  "busy cells ran.", ""]
    lines += ["Ratio = F.linear time / ours (above 1: faster than the dense layer); "
              f"{high}t/{low}t = time with {high} threads / time with {low} under the same load (above 1: slower "
              f"with {high}). \"{MAP}\" is F.rotor_sandwich alone, outside the layers' thread policy.", ""]
    for load in ("idle", "busy"):
        for d in result["sizes"]:
            by_threads = {t: _find(cells, load, t, d) for t in threads}
            if any(c is None for c in by_threads.values()):
                continue
            names = list(by_threads[low]["seconds"])
            lines += [f"### {load}, d = {d}", ""]
            rows = []
            for name in names:
                times = [by_threads[t]["seconds"][name] for t in threads]
                ratios = [by_threads[t]["seconds"]["F.linear"] / by_threads[t]["seconds"][name] for t in threads]
                scaling = by_threads[high]["seconds"][name] / by_threads[low]["seconds"][name]
                rows.append([name, *(f"{v * 1e3:.1f}" for v in times), *(ratio(r, suffix="x") for r in ratios),
                             ratio(scaling)])
            lines.append(markdown_table(["contender", *(f"{t} thread{'s' if t > 1 else ''} (ms)" for t in threads),
                                         *(f"ratio {t}t" for t in threads), f"{high}t/{low}t"], rows))
            lines.append("")
            for t in threads:
                c = by_threads[t]
                numba = "" if c["numba_threads"] is None else f", numba {c['numba_threads']}"
                lines.append(f"- {t} thread{'s' if t > 1 else ''} (in effect: torch {c['torch_threads']}{numba}): "
                             f"auto runs {c['auto_runs']} ({c['auto_rule']}; threads {c['auto_threads'] or 'as set'}); "
                             f"fastest backend {c['fastest']}; auto's choice within 10 % of it: "
                             f"{'yes' if c['auto_choice_within_10pct'] else 'NO'}; auto's own layer within 10 %: "
                             f"{'yes' if c['auto_within_10pct'] else 'no'} (plan {c['plan_microseconds']:.0f} us a call)")
            lines.append("")
    within = sum(c["auto_choice_within_10pct"] for c in cells)
    own = sum(c["auto_within_10pct"] for c in cells)
    slower = [f"{name} ({load}, d = {d}: {ratio(scaling)})"
              for load in ("idle", "busy") for d in result["sizes"]
              for name, scaling in _scaling(cells, load, d, low, high).items() if name in BACKENDS and scaling > 1.1]
    lines += [f"auto's choice within 10 % of the fastest backend in {within} of {len(cells)} cells (auto's own "
              f"layer, timed separately, in {own}).",
              "Layers more than 10 % slower with "
              f"{high} threads than with {low}: " + (", ".join(slower) if slower else "none") + ".", ""]
    return "\n".join(lines)


def _scaling(cells, load, d, low, high) -> dict:
    a, b = _find(cells, load, low, d), _find(cells, load, high, d)
    if a is None or b is None:
        return {}
    return {name: b["seconds"][name] / a["seconds"][name] for name in a["seconds"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--repeats", type=int, default=11)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--factored-max", type=int, default=2048, help="largest d timed with the factored backend")
    parser.add_argument("--quick", action="store_true", help="d = 256 and 512, 256 tokens, 3 rounds (a smoke run)")
    parser.add_argument("--out", type=Path, default=OUT, help="results path without suffix (.md and .json are added)")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument("--training", action="store_true",
                        help="forward + backward in training mode (without factored); default --out "
                             "benchmarks/results/bench_contention_training")
    args = parser.parse_args(argv)
    if args.training and args.out == OUT:
        args.out = OUT.with_name(OUT.name + "_training")
    args.argv = list(argv if argv is not None else sys.argv[1:])
    if args.quick:
        args.sizes, args.tokens, args.repeats = [256, 512], 256, 3
    for d in args.sizes:
        if d < 2 or d & (d - 1):
            parser.error(f"--sizes must be powers of two >= 2, got {d}")
    if len(args.threads) < 2 or min(args.threads) < 1:
        parser.error("--threads needs at least two counts >= 1 (e.g. 1 2)")
    args.threads = sorted(set(args.threads))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the busy process is killed on the way out
    result = run(args)
    text = markdown(result)
    print()
    print(text)
    if not args.no_write:
        written = write_results(args.out, result, text)
        print(f"wrote {written[1]} and {written[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
