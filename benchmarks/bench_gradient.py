"""Gradient of rotor layers: accuracy against central differences, and cost, exact vs paper.

Part 1 (accuracy, float64, eval mode): the relative error of autograd's gradient in
``left_bivectors`` against fourth-order central differences of the layer's own forward (loss
sum(w * layer(x)**2), 5 random tokens), for RotorLinear(d, d) with d = 8, 16, 64, at B = 0,
B ~ N(0, 0.1) and B ~ N(0, 1), on every backend, with ``gradient="exact"`` (galinear.nn.dexp)
and ``gradient="power-step"`` (the paper's one-step approximation, power decomposition).

Part 2 (cost, float32, training mode, CPU): forward + backward, and the backward alone, of
RotorLinear(2048, 2048) on 2048 tokens and one Adam step of the q-network RotorNetwork(2048, 2048) on 256 tokens, exact vs
power-step, interleaved rounds, medians and the ratio exact / power-step measured in one run.

    python benchmarks/bench_gradient.py [--rounds 5] [--threads 2] [--skip-cost]

Writes benchmarks/results/bench_gradient.{md,json}.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.testing import central_difference_gradient  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
BACKENDS = ("dense", "factored", "numba")
GRADIENTS = {"exact": {"gradient": "exact"}, "power-step": {"gradient": "power-step", "decomposition": "power"}}


def gradient_error(d: int, scale: float, backend: str, gradient: str) -> float:
    torch.manual_seed(0)
    layer = RotorLinear(d, d, backend=backend, dtype=torch.float64, **GRADIENTS[gradient]).eval()
    with torch.no_grad():
        layer.left_bivectors.normal_(0.0, 1.0).mul_(scale)
    x = torch.randn(5, d, dtype=torch.float64)
    w = torch.randn(5, d, dtype=torch.float64)

    def loss(b):
        return (w * torch.func.functional_call(layer, {"left_bivectors": b}, (x,)) ** 2).sum()

    point = layer.left_bivectors.detach().clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(loss(point), [point])
    fd = central_difference_gradient(loss, point.detach())
    return float((grad - fd).norm() / fd.norm())


def accuracy_table() -> list[dict]:
    rows = []
    for d in (8, 16, 64):
        for label, scale in (("B = 0", 0.0), ("|B| ~ 0.1", 0.1), ("|B| ~ 1", 1.0)):
            for backend in BACKENDS:
                row = {"layer": f"RotorLinear({d}, {d})", "point": label, "backend": backend}
                for gradient in GRADIENTS:
                    row[gradient] = gradient_error(d, scale, backend, gradient)
                rows.append(row)
    return rows


def _timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def cost_table(rounds: int) -> list[dict]:
    torch.manual_seed(0)
    cases = {}
    for gradient, options in GRADIENTS.items():
        layer = RotorLinear(2048, 2048, backend="numba", **options).train()
        x = torch.randn(2048, 2048)

        def layer_step(layer=layer, x=x):
            layer.zero_grad(set_to_none=True)
            return _timed(lambda: layer(x).pow(2).mean().backward())

        def layer_backward(layer=layer, x=x):  # the backward alone, after an untimed forward
            layer.zero_grad(set_to_none=True)
            loss = layer(x).pow(2).mean()
            return _timed(loss.backward)

        net = RotorNetwork(2048, 2048, backend="numba", **options).train()
        optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
        xq, target = torch.randn(256, 2048), torch.randn(256, 2048)

        def net_step(net=net, optimizer=optimizer, xq=xq, target=target):
            def step():
                optimizer.zero_grad(set_to_none=True)
                torch.nn.functional.mse_loss(net(xq), target).backward()
                optimizer.step()
            return _timed(step)

        cases[("RotorLinear(2048, 2048) forward + backward, 2048 tokens", gradient)] = layer_step
        cases[("RotorLinear(2048, 2048) backward alone, 2048 tokens", gradient)] = layer_backward
        cases[("q-network RotorNetwork(2048, 2048) Adam step, 256 tokens", gradient)] = net_step
    for fn in cases.values():  # warm-up (numba compilation, caches)
        fn()
    timings = {key: [] for key in cases}
    for _ in range(rounds):
        for key, fn in cases.items():
            timings[key].append(fn())
    rows = []
    for measure in dict.fromkeys(key[0] for key in cases):
        exact = statistics.median(timings[(measure, "exact")])
        paper = statistics.median(timings[(measure, "power-step")])
        rows.append({"measure": measure, "exact_s": exact, "power_step_s": paper, "ratio": exact / paper})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-cost", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    lines = ["## Gradient accuracy: relative error against central differences (float64, eval)", "",
             "| layer | point | backend | exact | power-step (paper) |", "|---|---|---|---|---|"]
    accuracy = accuracy_table()
    for row in accuracy:
        lines.append(f"| {row['layer']} | {row['point']} | {row['backend']} | {row['exact']:.1e} | "
                     f"{row['power-step']:.2g} |")
    cost = []
    if not args.skip_cost:
        cost = cost_table(args.rounds)
        lines += ["", f"## Cost (float32, numba backend, {args.threads} threads, median of {args.rounds} "
                  "interleaved rounds)", "", "| measure | exact s | power-step s | exact / power-step |",
                  "|---|---|---|---|"]
        for row in cost:
            lines.append(f"| {row['measure']} | {row['exact_s']:.3f} | {row['power_step_s']:.3f} | "
                         f"{row['ratio']:.2f}x |")
    text = "\n".join(lines)
    print(text)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_gradient.md").write_text(text + "\n")
    (RESULTS / "bench_gradient.json").write_text(json.dumps({"accuracy": accuracy, "cost": cost}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
