"""Where the time of a ``RotorLinear(d, d)`` on the spinor backend goes, stage by stage.

    python benchmarks/profile_spinor.py [--sizes 2048 4096] [--tokens 2048] [--threads 1] [--repeats 5]

Float32, --tokens tokens, --threads torch and numba threads, times in CPU seconds of this process (--clock
cpu, the default: with one thread, what a busy neighbour takes from the core is left out) or wall-clock
seconds (--clock wall). For each d, the layer in eval mode under
``torch.no_grad()`` and a training step (forward + backward, invariant decomposition and exact gradient
included, gradients for x and both bivectors) are run --repeats times after a warm-up, with timers wrapped
around each stage (exclusive times: a stage's time excludes the stages it calls):

- ``to matrix`` / ``from matrix``: the transforms between coefficients and matrices (signed gathers, the
  Walsh-Hadamard butterflies, the xor placement) of :mod:`galinear.nn.functional.spinor`;
- ``GEMM``: the batched products by the rotor matrices (the arithmetic);
- ``rotor matrices``: the matrices of the rotors from their factors;
- ``decomposition``: the bivectors' planes and spectra (:func:`galinear.nn.functional.exact_factors`);
- ``bivector parts`` and ``phi(ad_B)``: the backward pass's parameter gradient;
- ``spinor call``: the backend's own remaining work (copies, buffers, token blocks);
- ``layer, rest``: the layer's work outside these (chunk views, alpha and the averaging pass, autograd).

Alongside, F.linear (eval) and nn.Linear's forward + backward (training) at the same shapes, and the
arithmetic limit: the spinor GEMMs' multiply-adds at the dense GEMM's measured rate (training: the forward's
products, the input gradient's and the two correlations of the parameter gradient). Prints a markdown
table; --json writes the numbers.
"""
from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, header, markdown_table, metadata, round_robin, set_threads, write_json  # noqa: E402
from bench_spinor import spinor_macs  # noqa: E402

#: (module, attribute, stage): the functions whose exclusive time makes a stage
STAGES = (
    ("galinear.nn.functional.spinor", "_Transforms.to_matrix", "to matrix"),
    ("galinear.nn.functional.spinor", "_Transforms.from_matrix", "from matrix"),
    ("galinear.nn.functional.spinor", "_products", "GEMM"),
    ("galinear.nn.functional.spinor", "rotor_matrices", "rotor matrices"),
    ("galinear.nn.functional.spinor", "spinor_sandwich", "spinor call"),
    ("galinear.nn.functional.spinor", "_correlations", "GEMM"),
    ("galinear.nn.functional", "exact_factors", "decomposition"),
    ("galinear.nn.dexp", "bivector_parts", "bivector parts"),
    ("galinear.nn.dexp", "phi_ad", "phi(ad_B)"),
)
ORDER = ("GEMM", "to matrix", "from matrix", "spinor call", "rotor matrices", "decomposition", "bivector parts",
         "phi(ad_B)", "layer, rest")


class StageTimers:
    """Exclusive seconds per stage of the wrapped functions while active (a stack of open timers)."""

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds = defaultdict(float)
        self.stack = []
        self.saved = []

    def wrap(self, fn, stage):
        @functools.wraps(fn)   # attributes too (a backend function's fused backward pass)
        def timed(*args, **kwargs):
            start = self.clock()
            self.stack.append(0.0)
            try:
                return fn(*args, **kwargs)
            finally:
                inner = self.stack.pop()
                elapsed = self.clock() - start
                self.seconds[stage] += elapsed - inner
                if self.stack:
                    self.stack[-1] += elapsed
        return timed

    def __enter__(self):
        import importlib

        for module_name, attribute, stage in STAGES:
            owner = importlib.import_module(module_name)
            *path, attribute = attribute.split(".")
            for name in path:   # a method: wrapped on its class
                owner = getattr(owner, name, None)
            fn = getattr(owner, attribute, None)
            if fn is None:
                continue
            self.saved.append((owner, attribute, fn))
            setattr(owner, attribute, self.wrap(fn, stage))
        from galinear.nn.functional import backends

        entry = backends._REGISTRY["spinor"]   # the registry holds the backend function itself once loaded
        self.entry = (entry, entry.load())
        entry.fn = getattr(importlib.import_module("galinear.nn.functional.spinor"), "spinor_sandwich")
        entry.fn.backward = self.wrap(self.entry[1].backward, "spinor call")
        return self

    def __exit__(self, *exc):
        entry, fn = self.entry
        entry.fn = fn
        for owner, attribute, fn in reversed(self.saved):
            setattr(owner, attribute, fn)
        self.saved = []
        return False


def correlation_macs(n: int) -> float:
    """Real multiply-adds per token of the backward pass's two correlations of whole N x N matrices."""
    from galinear import matrix_rep

    tab = matrix_rep.representation(n)
    return 2 * tab.irreps * tab.N**3 * (1 if tab.real else 4)


def profile(call, repeats, clock=time.perf_counter):
    """(total seconds per call, stage -> seconds per call) over ``repeats`` timed calls after one warm-up."""
    call()
    with StageTimers(clock) as timers:
        start = clock()
        for _ in range(repeats):
            call()
        total = (clock() - start) / repeats
    stages = {k: v / repeats for k, v in timers.seconds.items()}
    stages["layer, rest"] = max(0.0, total - sum(stages.values()))
    return total, stages


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2048, 4096])
    parser.add_argument("--tokens", type=int, default=2048)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                        help="cpu: this process's CPU seconds (time.process_time; with one thread the time "
                             "other processes take from its core is left out), wall: time.perf_counter")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers to this file")
    args = parser.parse_args(argv)

    import torch

    from galinear.nn import RotorLinear

    odd = [d for d in args.sizes if d < 2 or d & (d - 1)]
    if odd:
        parser.error(f"--sizes must be powers of two >= 2, got {odd}")
    set_threads(args.threads)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.manual_seed(0)
    rows = []
    for d in args.sizes:
        T, n = args.tokens, d.bit_length() - 1
        layer = RotorLinear(d, d, backend="spinor")
        params = [p for p in layer.parameters() if p.requires_grad]
        x, g = torch.randn(T, d), torch.randn(T, d)
        weight = torch.randn(d, d) / d**0.5
        xg, wg = x.clone().requires_grad_(True), weight.clone().requires_grad_(True)

        def dense_eval():
            with torch.no_grad():
                torch.nn.functional.linear(x, weight)

        def dense_train():
            torch.autograd.grad(torch.nn.functional.linear(xg, wg), (xg, wg), g)

        def layer_eval():
            layer.eval()
            with torch.no_grad():
                layer(x)

        def layer_train():
            layer.train()
            torch.autograd.grad(layer(xg), [xg] + params, g)

        dense = {k: v.median for k, v in round_robin({"eval": dense_eval, "train": dense_train},
                                                      max(1, args.repeats // 2), clock=clock).items()}
        rate = d * d * T / dense["eval"]
        for mode, call in (("eval", layer_eval), ("train", layer_train)):
            total, stages = profile(call, args.repeats, clock)
            macs = spinor_macs(n) if mode == "eval" else 2 * spinor_macs(n) + correlation_macs(n)
            limit = macs * T / rate
            rows.append({"d": d, "mode": mode, "total_s": total, "dense_s": dense[mode], "limit_s": limit,
                         "stages_s": stages})
            shares = ", ".join(f"{k} {stages.get(k, 0.0) / total:.0%}" for k in ORDER if stages.get(k, 0.0) > 0)
            print(f"d={d} {mode}: {total * 1e3:.1f} ms (dense {dense[mode] * 1e3:.1f} ms, "
                  f"{dense[mode] / total:.2f}x); {shares}", flush=True)

    result = metadata(command_line(__file__, argv), threads=args.threads, tokens=args.tokens, clock=args.clock,
                      rows=rows)
    print()
    print(header(result))
    print()
    print(markdown_table(
        ["d", "mode", "ours (ms)", "dense (ms)", "dense / ours", "GEMM MACs at dense rate (ms)",
         *(f"{k} (%)" for k in ORDER)],
        ([r["d"], r["mode"], r["total_s"] * 1e3, r["dense_s"] * 1e3, r["dense_s"] / r["total_s"],
          r["limit_s"] * 1e3, *(100 * r["stages_s"].get(k, 0.0) / r["total_s"] for k in ORDER)] for r in rows),
        formats=[None, None, ".1f", ".1f", ".2f", ".1f", *([".0f"] * len(ORDER))]))
    if args.json is not None:
        write_json(args.json, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
