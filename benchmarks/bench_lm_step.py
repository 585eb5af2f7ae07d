"""Cost of one training step of the `galinear train-lm` transformer, every projection kind side by side.

``python benchmarks/bench_lm_step.py [--models dense rotor givens kron,terms=2 lowrank,rank=1 dense,width=48 ...]
[--threads 1 2 auto] [--batch-size 8] [--steps 5] [--warmup 2] [--width 256] [--layers 4] [--context 256]
[--backends dense spinor numba auto] [--baseline REV] [--busy] [--no-write]``

A model is a projection kind (by default every one: ``dense``, ``rotor`` (RotorLinear),
``rotor-network`` (RotorNetwork), ``givens`` (GivensNetwork, the rotor network's Givens control),
``kron`` (a Kronecker sum), ``lowrank`` and ``monarch``), optionally followed by ``,field=value``
settings of ``galinear.train.lm_config.LMConfig`` (``dense,width=48``: the dense model of width 48;
``kron,terms=4``: four Kronecker terms; ``rotor-network,recompute=true``: its activations recomputed in
the backward pass).
``--backends`` runs every rotor model (``rotor``, ``rotor-network``) once per sandwich backend
named (``rotor-network,backend=spinor`` and so on), so that one run compares the backends the
dispatcher can pick (``python benchmarks/bench_lm_step.py --models dense rotor-network
--backends dense spinor numba auto``).
For every model and thread count, a fresh subprocess builds the model of
``galinear.train.lm`` (random token windows, byte vocabulary), runs ``--warmup`` steps, then
times ``--steps`` optimiser steps of the loop train-lm runs (:func:`galinear.optim.loop.train`:
forward, cross-entropy, backward, clip, AdamW) with the round-robin timer of ``_common`` (one
step per sample), and reports:

- the median wall seconds of one step (``time.perf_counter``) and the median CPU seconds of the
  process (``time.process_time``, all its threads) over the same steps;
- tokens per second (batch x context / median wall seconds);
- the peak resident set size of that subprocess (Linux ``VmHWM``), so no kind inherits another
  kind's memory;
- the ratio of each kind's step time to the dense model's at the same thread count, and each
  kind's 2-thread / 1-thread speed-up;
- a summary with one row per kind: its step time and peak memory over the dense model's, one
  column per thread count.

``--threads auto`` runs a model as ``galinear train-lm --threads auto`` does: a
:class:`galinear.optim.threads.ThreadGovernor` sets each step's count (at most the CPU cores) from
the measured step times; its warm-up step and probes are steps like any other, so they are in the
timings (the row also gives the mean step and the governor's choices). With ``--steps 12 --warmup 1``
the probe takes 4 of the 13 steps.

The kinds run one after another in the same invocation, so the ratios compare like with like; the
absolute numbers depend on the machine and on what else runs on it. ``--baseline REV`` also runs
every model with the galinear of git revision REV (its files extracted by ``git archive`` into a
temporary folder; the working tree is not touched), right after the same model of the working
tree, labelled ``model@REV``: before and after side by side in one run. On a loaded machine the
CPU seconds of the process are the steadier figure; their ratio to dense is reported too.
``--busy`` measures every model beside one busy process (a pure-Python loop started before the
first model and killed after the last). The results start with how they were measured (command,
date, CPU, versions) and are written atomically to ``benchmarks/results/bench_lm_step.{md,json}``
unless ``--no-write``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, ROOT, BusyProcess, command_line, header, markdown_table, metadata,  # noqa: E402
                     ratio, round_robin, thread_setting, write_results)

KINDS = ("dense", "rotor", "rotor-network", "givens", "kron", "lowrank", "monarch")


def parse_model(text: str) -> tuple[str, dict]:
    """``"kind,field=value,..."`` -> (kind, {field: bool (``true``/``false``) or int or float or str})."""
    kind, *settings = text.split(",")
    if kind not in KINDS:
        raise SystemExit(f"unknown projection kind {kind!r} in {text!r}; choose from {', '.join(KINDS)}")
    extra = {}
    for setting in settings:
        field, _, value = setting.partition("=")
        if value.lower() in ("true", "false"):
            extra[field] = value.lower() == "true"
            continue
        for convert in (int, float, str):
            try:
                extra[field] = convert(value)
                break
            except ValueError:
                continue
    return kind, extra


def measure(name: str, threads, batch_size: int, steps: int, warmup: int, width: int, layers: int,
            context: int) -> dict:
    """One model at one thread count (or ``auto``: every step's count chosen by the governor that
    ``--threads auto`` installs, its warm-up and probes included in the timed steps), in this process."""
    import os

    import torch

    from galinear.optim import loop as optimise
    from galinear.train.lm import build_lm, count_parameters, projection_parameters
    from galinear.train.lm_config import LMConfig
    from galinear.optim import threads as thread_policy
    from galinear.train.lm_loop import peak_memory

    kind, extra = parse_model(name)
    governor = thread_policy.ThreadGovernor(os.cpu_count() or 1) if threads == "auto" else None
    if governor is not None:
        governor.calibrate()  # as --threads auto does before the model is built
    else:
        thread_policy.set_counts(threads)
    torch.manual_seed(0)
    config = LMConfig(**{"projection": kind, "width": width, "layers": layers, "context": context, **extra})
    model = build_lm(config)
    optimizer = optimise.make_optimizer("adamw", model.parameters(), 1e-3, weight_decay=0.1, betas=(0.9, 0.95))
    parameters = list(model.parameters())
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch_size, context + 1), generator=generator)
    model.train()

    def loss(step):
        logits = model(ids[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))

    cpu = []  # the CPU seconds of every call, warm-up ones first

    def step():
        started = time.process_time()
        if governor is not None:  # the steps of one loop: train-lm's loop under --threads auto
            governor.before_step()
            wall_start = time.perf_counter()
        optimise.train(optimizer, loss, steps=1, grad_clip=1.0, clip_params=parameters)
        if governor is not None:
            governor.after_step(time.perf_counter() - wall_start)
        cpu.append(time.process_time() - started)

    wall = round_robin({"step": step}, steps, warmup=warmup)["step"]
    seconds = wall.median
    extra_fields = {} if governor is None else {"chosen": governor.summary(), "mean_step_seconds":
                                                statistics.fmean(wall.samples)}
    return {**extra_fields, "kind": name, "threads": threads, "parameters": count_parameters(model),
            "projection_parameters": projection_parameters(config), "step_seconds": seconds,
            "step_cpu_seconds": statistics.median(cpu[warmup:]), "tokens_per_second": batch_size * context / seconds,
            "peak_rss_bytes": peak_memory(torch.device("cpu"))[0], "batch_size": batch_size, "context": context}


def run_child(args, name: str, threads: int, root: Path = ROOT) -> dict:
    """One model in a fresh subprocess, with the galinear under ``root``."""
    script = root / "benchmarks" / "bench_lm_step.py"
    command = [sys.executable, str(script), "--child", name, str(threads), "--batch-size", str(args.batch_size),
               "--steps", str(args.steps), "--warmup", str(args.warmup), "--width", str(args.width),
               "--layers", str(args.layers), "--context", str(args.context)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"{name} at {threads} thread(s) failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def extract(revision: str) -> Path:
    """The tracked files of ``revision`` in a new temporary folder (``git archive``)."""
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="bench_lm_step_"))
    archive = subprocess.run(["git", "archive", "--format=tar", revision], cwd=ROOT, capture_output=True, check=False)
    if archive.returncode != 0:
        raise SystemExit(f"git archive {revision} failed: {archive.stderr.decode()[-500:]}")
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive.stdout, check=True)
    return folder


TABLE = ("kind", "threads", "parameters", "in projections", "step s (wall)", "step s (CPU)", "tokens/s",
         "step / dense step", "CPU / dense CPU", "2-thread speed-up", "peak RSS (MiB)", "RSS / dense RSS")


def table(rows: list[dict]) -> str:
    """One row per model and thread count, with its ratios to the dense model at that thread count."""
    dense = {row["threads"]: row for row in rows if row["kind"] == "dense"}
    one = {row["kind"]: row["step_seconds"] for row in rows if row["threads"] == 1}
    cells = []
    for row in rows:
        base = dense.get(row["threads"])
        ratios = [row[key] / base[key] if base else float("nan")
                  for key in ("step_seconds", "step_cpu_seconds", "peak_rss_bytes")]
        speedup = (one[row["kind"]] / row["step_seconds"]
                   if row["threads"] != 1 and row["kind"] in one else None)
        cells.append([row["kind"], row["threads"], row["parameters"], row["projection_parameters"],
                      row["step_seconds"], row["step_cpu_seconds"], row["tokens_per_second"], *ratios[:2], speedup,
                      row["peak_rss_bytes"] / 2**20, ratios[2]])
    return markdown_table(TABLE, cells, formats=[None, None, ",", ",", ".3f", ".3f", ",.0f", ".2f", ".2f",
                                                 lambda x: ratio(x, suffix="x"), ",.0f", ".2f"])


def summary(rows: list[dict]) -> str:
    """Step time and peak RSS over the dense model's, one row per kind, one column pair per thread count."""
    dense = {row["threads"]: row for row in rows if row["kind"] == "dense"}
    threads = list(dict.fromkeys(row["threads"] for row in rows))
    kinds = list(dict.fromkeys(row["kind"] for row in rows))
    cells = {(row["kind"], row["threads"]): row for row in rows}
    columns = ["kind"] + [f"{name} / dense ({t} thr)" for t in threads for name in ("step", "RSS")]
    lines = []
    for kind in kinds:
        values = [kind]
        for t in threads:
            row, base = cells.get((kind, t)), dense.get(t)
            if row is None or base is None:
                values += [None, None]
            else:
                values += [row["step_seconds"] / base["step_seconds"], row["peak_rss_bytes"] / base["peak_rss_bytes"]]
        lines.append(values)
    return markdown_table(columns, lines, formats=[None] + [".2f"] * (len(columns) - 1))


def expand(models: list[str], backends: list[str] | None) -> list[str]:
    """Every rotor model once per backend of ``backends`` (None: as given)."""
    if not backends:
        return list(models)
    out = []
    for name in models:
        kind, extra = parse_model(name)
        if kind in ("rotor", "rotor-network") and "backend" not in extra:
            out += [f"{name},backend={backend}" for backend in backends]
        else:
            out.append(name)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(KINDS),
                        help="projection kinds, each optionally with ,field=value LMConfig settings")
    parser.add_argument("--threads", nargs="+", type=thread_setting, default=[1, 2],
                        help="thread counts, and 'auto' for train-lm's --threads auto (default 1 2)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--backends", nargs="+", metavar="BACKEND",
                        help="run every rotor model once per sandwich backend (dense, spinor, numba, factored, auto)")
    parser.add_argument("--baseline", metavar="REV",
                        help="also run every model at git revision REV, right after the working tree's")
    parser.add_argument("--busy", action="store_true",
                        help="measure every model beside one busy process (a pure-Python loop)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, threads = args.child
        row = measure(name, thread_setting(threads), args.batch_size, args.steps, args.warmup, args.width, args.layers,
                      args.context)
        print(json.dumps(row))
        return
    for name in args.models:
        parse_model(name)  # refuse a bad model before anything runs
    args.models = expand(args.models, args.backends)
    roots = [("", ROOT)]
    if args.baseline:
        roots.append((f"@{args.baseline}", extract(args.baseline)))
    meta = metadata(command_line(__file__, argv), thread_counts=False, threads=list(args.threads),
                    load="beside one busy process" if args.busy else "idle", baseline=args.baseline)
    load = " Measured beside one busy process (a pure-Python loop)." if args.busy else ""
    print(header(meta) + load, flush=True)
    rows = []
    with BusyProcess() if args.busy else contextlib.nullcontext():
        for name in args.models:
            for threads in args.threads:
                for suffix, root in roots:
                    row = run_child(args, name, threads, root)
                    row["kind"] = name + suffix
                    rows.append(row)
                    print(f"{row['kind']:18s} {threads} thread(s): {row['step_seconds']:.3f} s/step "
                          f"({row['step_cpu_seconds']:.3f} s CPU), {row['tokens_per_second']:,.0f} tokens/s"
                          + (f"; mean {row['mean_step_seconds']:.3f} s; {row['chosen']}" if "chosen" in row else ""),
                          flush=True)
    text = table(rows) + "\n\n" + summary(rows)
    print(text)
    if not args.no_write:
        write_results(RESULTS / "bench_lm_step", {"meta": meta, "rows": rows}, f"{header(meta)}{load}\n\n{text}\n")


if __name__ == "__main__":
    main()
