"""Cost of fitting one layer in `galinear compress`: every method side by side, the demo's objective and sizes.

``python benchmarks/bench_compress_fit.py [--methods rotor kron givens lr lr-cf] [--layer 13]
[--steps 64] [--eval-every 16] [--train-windows 8] [--budget FRACTION] [--hidden 512]
[--threads 1 2 auto] [--repeats 1] [--warmup 2] [--model smollm2-135m] [--busy] [--quick] [--no-write]``

The question it answers: does a rotor network ("rotor") fit a layer in no more time than the
one-term Kronecker sum ("kron"), and its Givens control ("givens") in at most 1.5x the rotor
network's time? Low rank fitted by Adam ("lr") and LR* in closed form ("lr-cf") run beside them.

Every method fits the q, k and v projections of one layer (``--layer``, default 13, the second
layer of the demo) of the embedded SmolLM2-135M (``--model``: another model the study loads) the
way ``galinear compress --preset demo`` does: a :class:`galinear.compress.orchestrator.Study` is
built from the ``demo`` preset with that one layer and one method, and
:func:`galinear.compress.study.layers.fit_layer_set` fits the layer. The Adam methods fit q, k and
v jointly to the layer's attention output (the ``attention`` objective,
:func:`galinear.compress.fitting.objective.fit_joint`) with the demo's stopping rule (a validation
check every ``--eval-every`` steps, at most ``--steps``); at ``--steps`` up to 8 x ``--eval-every``
the rule cannot stop a fit early (patience 4, one decay), so every Adam method takes exactly
``--steps`` steps and the step counts are reported. LR* is set from the second moments of the
training rows (no Adam step), as in the demo. The sizes are the demo's, about 0.5 % of the dense
q/k/v: the rotor network and its control at hidden width 512 (``--hidden``), rank 1, one
Kronecker term; ``--budget FRACTION`` sets every method's size knob to that fraction of each
projection's dense parameters instead (:mod:`galinear.compress.methods.budgets`).

The layer's inputs are captured once per thread count in a fresh subprocess, timed and reported as
"capture" (the training, held-out and validation rows of the original network; the study's own
cache, in a temporary folder removed at the end). Then, per method and thread count, a fresh
subprocess loads the model, reads the capture from that cache before the clock starts, runs one
untimed warm-up fit of ``--warmup`` steps (0: none), and times ``--repeats`` fits with the
round-robin timer of ``_common`` (each fit starts from its seeded initialisation; earlier fits'
checkpoints and second moments are removed, untimed, before each one). Reported per method:

- the parameters of its q/k/v replacements (and their share of the dense q/k/v);
- the median wall seconds of a fit (``time.perf_counter``: the Adam steps with their validation
  checks, the attention targets, the held-out MSE and the checkpoint; for LR* the moment pass over
  the captured rows and the solve) and the CPU seconds of the process over it;
- the Adam loop's seconds per step (the loop's time, validation checks included, over its steps);
- the peak resident set size of the subprocess during the fit (Linux ``VmHWM``, reset before it:
  the loaded model included, so no method inherits another's memory);
- each method's fit time and step time over the Kronecker sum's at the same thread count, and
  the Givens control's over the rotor network's.

``--threads auto`` fits as ``galinear compress --threads auto`` does: every Adam step's thread
count chosen by a :class:`galinear.optim.threads.ThreadGovernor` from the measured step times (its
warm-up step and probes are steps of the timed fit).

``--quick`` is a smoke run (2 steps, 1 training window, 1 validation window, no warm-up).
``--busy`` measures everything beside one busy process (a pure-Python loop). The results start with
how they were measured (command, date, CPU, versions) and are written atomically to
``benchmarks/results/bench_compress_fit.{md,json}`` unless ``--no-write``.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, ROOT, BusyProcess, Contender, command_line, header, markdown_table,  # noqa: E402
                     metadata, ratio, round_robin, thread_setting, write_results)

METHODS = ("rotor", "kron", "givens", "lr", "lr-cf")
#: The child that captures the layer's inputs (not a method).
CAPTURE = "capture"
#: The method every ratio is taken to, and the two questions: (numerator, denominator, at most).
BASE = "kron"
QUESTIONS = (("rotor", "kron", 1.0), ("givens", "rotor", 1.5))


def study_config(args, method: str, threads: int, work: str):
    """The demo preset cut to one layer and one method, its files under ``work``."""
    from galinear.compress.study.config import PRESETS

    return dataclasses.replace(
        PRESETS["demo"], model=args.model, layer_sets=((args.layer,),), methods=(method,), seeds=(0,),
        train_windows=args.train_windows, valid_windows=args.valid_windows, max_steps=args.steps,
        eval_every=args.eval_every, distill=False, wikitext="off", wikitext_windows=None, budget=args.budget,
        hidden=args.hidden, threads=threads, progress=False, verbose=False, save_models=False,
        out_dir=os.path.join(work, f"out-{method}-{threads}"), cache_dir=os.path.join(work, "cache"), overwrite=True)


def _clear(study, *parts: str) -> None:
    """Remove the parts (``fits``, ``moments``, ``captures``) of the study's cache folder."""
    for part in parts:
        shutil.rmtree(os.path.join(study.store.work, part), ignore_errors=True)


def measure(kind: str, threads, args, work: str) -> dict:
    """One method (or the capture, ``kind == "capture"``) at one thread count, in this process;
    the study's files under ``work``. ``threads="auto"``: the study's ThreadGovernor chooses every
    fit step's count (its warm-up step and probes timed with the fit), removed afterwards."""
    from galinear.optim import threads as thread_policy

    try:
        return _measure(kind, threads, args, work)
    finally:
        if threads == "auto":
            thread_policy.use(None)


def _measure(kind: str, threads, args, work: str) -> dict:
    import torch

    from galinear.compress.methods import catalogue as methods
    from galinear.compress.study import layers
    from galinear.compress.orchestrator import Study
    from galinear.train.lm_loop import peak_memory, reset_peak_memory

    started = time.perf_counter()
    study = Study(study_config(args, METHODS[0] if kind == CAPTURE else kind, threads, work))
    load_seconds = time.perf_counter() - started
    layer, captures, cpu = args.layer, study.captures, torch.device("cpu")
    row = {"kind": kind, "threads": threads, "layer": layer, "load_seconds": load_seconds,
           "torch_threads": torch.get_num_threads()}
    if kind == CAPTURE:
        _clear(study, "captures", "moments", "fits")
        reset_peak_memory(cpu)
        wall, clock = time.perf_counter(), time.process_time()
        train, test = captures.original(layer, "attn_in", whole=True)
        valid, _ = captures.valid(layer, {}, None)
        row.update(seconds=time.perf_counter() - wall, cpu_seconds=time.process_time() - clock,
                   rows={"train": int(train.shape[0]), "test": int(test.shape[0]), "valid": int(valid.shape[0])},
                   peak_rss_bytes=peak_memory(cpu)[0])
        return row

    captures.original(layer, "attn_in", whole=True)  # read from the cache before the clock starts
    spec = study.config.method_spec(kind)
    layer_set = (layer,)
    if args.warmup and spec.max_steps:
        layers.fit_layer_set(study.fitting, dataclasses.replace(spec, max_steps=args.warmup), 0, layer_set)
    elif args.warmup:
        layers.fit_layer_set(study.fitting, spec, 0, layer_set)
    fits, cpu_seconds = [], []

    def fit(_):
        clock = time.process_time()
        fits.append(layers.fit_layer_set(study.fitting, spec, 0, layer_set))
        cpu_seconds.append(time.process_time() - clock)

    reset_peak_memory(cpu)
    timing = round_robin({"fit": Contender(fit, setup=lambda: _clear(study, "fits", "moments"))}, args.repeats,
                         warmup=0)["fit"]
    peak = peak_memory(cpu)[0]
    stats = {key: value.to_dict() for key, value in fits[-1].stats.items()}
    units = [stats[(layer, p)] for p in study.config.targets]
    steps = int(units[0].get("steps", 0) or 0)
    loop = units[0].get("joint_seconds") if steps else None
    dense = sum(int(u["dense_params"]) for u in units)
    parameters = sum(int(u["params"]) for u in units)
    modules = fits[-1].replacements
    if parameters != sum(methods.count_parameters(modules[(layer, p)]) for p in study.config.targets):
        raise RuntimeError(f"{kind}: the recorded parameter count {parameters} is not the modules' own")
    row.update(method=kind, tag=spec.tag(), size=size_label(spec), parameters=parameters, dense_parameters=dense,
               share=parameters / dense, steps=steps, asked_steps=spec.max_steps or 0, fit_seconds=timing.median,
               fit_samples=list(timing.samples), fit_cpu_seconds=sorted(cpu_seconds)[len(cpu_seconds) // 2],
               loop_seconds=loop, step_seconds=loop / steps if steps else None,
               test_rel_mse={p: u["test_mse"] / max(u["target_mean_square"], 1e-30)
                             for p, u in zip(study.config.targets, units)},
               peak_rss_bytes=peak)
    if study.governor is not None:
        row["chosen"] = study.governor.summary()
    return row


def size_label(spec) -> str:
    """What sets a method's size: ``hidden 512``, ``rank 1``, ``1 term`` or ``budget 0.5 %``."""
    from galinear.compress.methods import catalogue as methods

    base = methods.base_name(spec.name)
    if spec.budget is not None:
        return f"budget {100 * spec.budget:g} %" + (f", hidden {spec.hidden}" if spec.hidden else "")
    if base in ("rotor", "givens"):
        return f"hidden {spec.hidden}" + (f", chunk {spec.chunk}" if spec.chunk else "")
    if base == "lr":
        return f"rank {spec.rank or methods.DEFAULT_LOW_RANK}"
    if base == "kron":
        terms = spec.terms or methods.DEFAULT_KRONECKER_TERMS
        return f"{terms} term{'s' if terms != 1 else ''}"
    return "-"


def child_command(args, kind: str, threads: int, work: str) -> list[str]:
    """The command line of the subprocess that measures ``kind`` at ``threads``."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", kind, str(threads), "--work", work,
               "--model", args.model, "--layer", str(args.layer), "--steps", str(args.steps),
               "--eval-every", str(args.eval_every), "--train-windows", str(args.train_windows),
               "--valid-windows", str(args.valid_windows), "--hidden", str(args.hidden),
               "--repeats", str(args.repeats), "--warmup", str(args.warmup)]
    if args.budget is not None:
        command += ["--budget", str(args.budget)]
    return command


def run_child(args, kind: str, threads: int, work: str) -> dict:
    """One method (or the capture) in a fresh subprocess."""
    done = subprocess.run(child_command(args, kind, threads, work), capture_output=True, text=True, check=False,
                          cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{kind} at {threads} thread(s) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------ tables
TABLE = ("method", "size", "threads", "parameters (q/k/v)", "% of dense", "steps", "fit s (wall)", "fit s (CPU)",
         "s / step", "fit / kron fit", "step / kron step", "peak RSS (MiB)")


def _over(row: dict | None, base: dict | None, key: str) -> float | None:
    if row is None or base is None or not row.get(key) or not base.get(key):
        return None
    return row[key] / base[key]


def table(rows: list[dict]) -> str:
    """One row per method and thread count, with its ratios to the Kronecker sum's at that thread count."""
    fits = [row for row in rows if row["kind"] != CAPTURE]
    base = {row["threads"]: row for row in fits if row["kind"] == BASE}
    cells = [[row["method"], row["size"], row["threads"], row["parameters"], 100 * row["share"], row["steps"] or "-",
              row["fit_seconds"], row["fit_cpu_seconds"], row["step_seconds"],
              _over(row, base.get(row["threads"]), "fit_seconds"),
              _over(row, base.get(row["threads"]), "step_seconds"), row["peak_rss_bytes"] / 2**20]
             for row in fits]
    return markdown_table(TABLE, cells, formats=[None, None, None, ",", ".2f", None, ".2f", ".2f", ".3f",
                                                 lambda x: ratio(x, suffix="x"), lambda x: ratio(x, suffix="x"),
                                                 ",.0f"])


def capture_table(rows: list[dict]) -> str:
    """The capture of the layer's inputs, one row per thread count."""
    cells = [[row["threads"], row["rows"]["train"], row["rows"]["test"], row["rows"]["valid"], row["seconds"],
              row["cpu_seconds"], row["load_seconds"], row["peak_rss_bytes"] / 2**20]
             for row in rows if row["kind"] == CAPTURE]
    return markdown_table(("threads", "training rows", "test rows", "validation rows", "capture s (wall)",
                           "capture s (CPU)", "model and texts s", "peak RSS (MiB)"), cells,
                          formats=[None, ",", ",", ",", ".2f", ".2f", ".2f", ",.0f"])


def answers(rows: list[dict]) -> list[dict]:
    """The two questions at every thread count: ``{"question", "threads", "fit_ratio", "step_ratio", "holds"}``
    (``holds``: the whole fit's ratio is at most the bound; None where a method was not run)."""
    fits = {(row["kind"], row["threads"]): row for row in rows if row["kind"] != CAPTURE}
    out = []
    for threads in dict.fromkeys(t for _, t in fits):
        for top, bottom, bound in QUESTIONS:
            a, b = fits.get((top, threads)), fits.get((bottom, threads))
            if a is None or b is None:
                continue
            fit = _over(a, b, "fit_seconds")
            out.append({"question": f"{top} fit <= {bound:g} x {bottom} fit", "threads": threads, "fit_ratio": fit,
                        "step_ratio": _over(a, b, "step_seconds"), "holds": None if fit is None else fit <= bound})
    return out


def answer_table(rows: list[dict]) -> str:
    return markdown_table(("question", "threads", "fit ratio", "step ratio", "holds"),
                          [[a["question"], a["threads"], a["fit_ratio"], a["step_ratio"],
                            "-" if a["holds"] is None else ("yes" if a["holds"] else "no")] for a in answers(rows)],
                          formats=[None, None, lambda x: ratio(x, suffix="x"), lambda x: ratio(x, suffix="x"), None])


# -------------------------------------------------------------------------------------------- main
def check_args(args) -> None:
    """Refuse bad settings in one line before anything runs."""
    for name in ("steps", "eval_every", "train_windows", "valid_windows", "repeats", "hidden"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    if args.warmup < 0:
        raise SystemExit(f"--warmup must be 0 or more steps, got {args.warmup}")
    if args.layer < 0:
        raise SystemExit(f"--layer must be 0 or more (layers are numbered from 0), got {args.layer}")
    if args.budget is not None and not 0 < args.budget <= 1:
        raise SystemExit(f"--budget must be a fraction in (0, 1] of the dense parameters (0.005 for 0.5 %), "
                         f"got {args.budget}")
    repeated = sorted({m for m in args.methods if args.methods.count(m) > 1})
    if repeated:
        raise SystemExit(f"method {repeated[0]} is given twice; drop the repeat")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--layer", type=int, default=13, help="the layer fitted (default 13, the demo's second)")
    parser.add_argument("--steps", type=int, default=64, help="Adam steps of a fit (the demo: 64)")
    parser.add_argument("--eval-every", type=int, default=16, help="steps between validation checks (the demo: 16)")
    parser.add_argument("--train-windows", type=int, default=8, help="training windows of 512 tokens (the demo: 8)")
    parser.add_argument("--valid-windows", type=int, default=2, help="validation windows (the demo: 2)")
    parser.add_argument("--budget", type=float, help="every method's size as a fraction of the dense parameters "
                        "(default: the demo's sizes, hidden 512, rank 1, one term)")
    parser.add_argument("--hidden", type=int, default=512, help="hidden width of rotor and givens (the demo: 512)")
    parser.add_argument("--threads", nargs="+", type=thread_setting, default=[1, 2],
                        help="thread counts, and 'auto' for compress's --threads auto (default 1 2)")
    parser.add_argument("--repeats", type=int, default=1, help="timed fits per method (the median is reported)")
    parser.add_argument("--warmup", type=int, default=2, help="steps of the untimed warm-up fit (0: none)")
    parser.add_argument("--model", default="smollm2-135m", help="the model (default: the embedded SmolLM2-135M)")
    parser.add_argument("--busy", action="store_true", help="measure beside one busy process (a pure-Python loop)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 2 steps, 1 training and 1 validation window, no warm-up")
    parser.add_argument("--in-process", action="store_true",
                        help="measure everything in this process, one after another (no subprocess start-up; "
                        "each peak RSS is reset before its fit, but memory the process kept from an earlier "
                        "fit still counts)")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "THREADS"), help=argparse.SUPPRESS)
    parser.add_argument("--work", help=argparse.SUPPRESS)
    return parser


def main(argv=None) -> list[dict]:
    """Run the benchmark; returns its rows (the capture's and every method's)."""
    args = build_parser().parse_args(argv)
    if args.child:
        kind, threads = args.child
        print(json.dumps(measure(kind, thread_setting(threads), args, args.work)))
        return []
    if args.quick:
        args.steps, args.train_windows, args.valid_windows, args.warmup = 2, 1, 1, 0
        args.eval_every = min(args.eval_every, args.steps)
    check_args(args)
    if args.steps > 8 * args.eval_every:
        print(f"note: beyond 8 x --eval-every ({8 * args.eval_every}) steps the stopping rule may end a fit early; "
              "compare the steps column", flush=True)
    meta = metadata(command_line(__file__, argv, make_target="bench-compress-fit"), thread_counts=False,
                    threads=list(args.threads), load="beside one busy process" if args.busy else "idle",
                    subprocesses=not args.in_process,
                    model=args.model, layer=args.layer, steps=args.steps, eval_every=args.eval_every,
                    train_windows=args.train_windows, budget=args.budget, hidden=args.hidden)
    load = " Measured beside one busy process (a pure-Python loop)." if args.busy else ""
    print(header(meta) + load, flush=True)
    work = tempfile.mkdtemp(prefix="bench_compress_fit_")
    one = (lambda kind, threads: measure(kind, threads, args, work)) if args.in_process else \
        (lambda kind, threads: run_child(args, kind, threads, work))
    rows = []
    try:
        with BusyProcess() if args.busy else contextlib.nullcontext():
            for threads in args.threads:
                row = one(CAPTURE, threads)
                rows.append(row)
                print(f"capture   {threads} thread(s): {row['seconds']:.2f} s ({row['rows']['train']:,} training rows)",
                      flush=True)
                for method in args.methods:
                    row = one(method, threads)
                    rows.append(row)
                    per_step = f", {row['step_seconds']:.3f} s/step" if row["step_seconds"] else ""
                    chosen = f"; {row['chosen']}" if "chosen" in row else ""
                    print(f"{row['method']:9s} {threads} thread(s): {row['parameters']:,} parameters, "
                          f"fit {row['fit_seconds']:.2f} s ({row['steps']} steps{per_step}){chosen}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = (f"Fit of layer {args.layer}, q/k/v to its attention output:\n\n{table(rows)}\n\n"
            f"{answer_table(rows)}\n\nThe capture of the layer's inputs (once, before the fits):\n\n"
            f"{capture_table(rows)}")
    print(text)
    if not args.no_write:
        write_results(RESULTS / "bench_compress_fit", {"meta": meta, "rows": rows, "answers": answers(rows)},
                      f"{header(meta)}{load}\n\n{text}\n")
    return rows


if __name__ == "__main__":
    main()
