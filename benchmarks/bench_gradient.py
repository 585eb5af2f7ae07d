"""Gradient of rotor layers: accuracy against central differences, and cost, exact vs paper.

Part 1 (accuracy, float64, eval mode): the relative error of autograd's gradient in
``left_bivectors`` against fourth-order central differences of the layer's own forward (loss
sum(w * layer(x)**2), 5 random tokens), for RotorLinear(d, d) with d = 8, 16, 64, at B = 0,
B ~ N(0, 0.1) and B ~ N(0, 1), on every backend, with ``gradient="exact"`` (galinear.nn.dexp)
and ``gradient="power-step"`` (the paper's one-step approximation, power decomposition).

Part 2 (cost, float32, training mode, CPU): forward + backward, and the backward alone, of
RotorLinear(2048, 2048) on 2048 tokens and one Adam step of the q-network RotorNetwork(2048, 2048) on 256 tokens, exact vs
power-step, interleaved rounds, medians and the ratio exact / power-step measured in one run.

    python benchmarks/bench_gradient.py [--rounds 5] [--threads 2] [--skip-cost] [--quick] [--out FOLDER]

Writes benchmarks/results/bench_gradient.{md,json}.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (RESULTS, Contender, command_line, header, markdown_table, metadata, ratio,  # noqa: E402
                     round_robin, set_threads, statistic, write_results)
from galinear.nn import RotorLinear, RotorNetwork  # noqa: E402
from galinear.testing import central_difference_gradient  # noqa: E402
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


def accuracy_table(sizes=(8, 16, 64)) -> list[dict]:
    rows = []
    for d in sizes:
        for label, scale in (("B = 0", 0.0), ("|B| ~ 0.1", 0.1), ("|B| ~ 1", 1.0)):
            for backend in BACKENDS:
                row = {"layer": f"RotorLinear({d}, {d})", "point": label, "backend": backend}
                for gradient in GRADIENTS:
                    row[gradient] = gradient_error(d, scale, backend, gradient)
                rows.append(row)
    return rows


def cost_table(rounds: int, size: int = 2048, tokens: int = 2048, network_tokens: int = 256) -> list[dict]:
    torch.manual_seed(0)
    cases = {}
    for gradient, options in GRADIENTS.items():
        layer = RotorLinear(size, size, backend="numba", **options).train()
        x = torch.randn(tokens, size)

        def zero_grad(layer=layer):
            layer.zero_grad(set_to_none=True)

        def forward(layer=layer, x=x):  # untimed before the backward alone
            layer.zero_grad(set_to_none=True)
            return layer(x).pow(2).mean()

        net = RotorNetwork(size, size, backend="numba", **options).train()
        optimizer = torch.optim.Adam(net.parameters(), lr=0.05)
        xq, target = torch.randn(network_tokens, size), torch.randn(network_tokens, size)

        def net_step(net=net, optimizer=optimizer, xq=xq, target=target):
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(net(xq), target).backward()
            optimizer.step()

        layer_name = f"RotorLinear({size}, {size})"
        cases[(f"{layer_name} forward + backward, {tokens} tokens", gradient)] = Contender(
            lambda _, layer=layer, x=x: layer(x).pow(2).mean().backward(), setup=zero_grad)
        cases[(f"{layer_name} backward alone, {tokens} tokens", gradient)] = Contender(
            lambda loss: loss.backward(), setup=forward)
        cases[(f"q-network RotorNetwork({size}, {size}) Adam step, {network_tokens} tokens", gradient)] = net_step
    median = statistic(round_robin(cases, rounds))
    rows = []
    for measure in dict.fromkeys(key[0] for key in cases):
        exact, paper = median[(measure, "exact")], median[(measure, "power-step")]
        rows.append({"measure": measure, "exact_s": exact, "power_step_s": paper, "ratio": exact / paper})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: accuracy at d = 8 only, cost of RotorLinear(64, 64) on 64 tokens")
    parser.add_argument("--out", type=Path, default=RESULTS, help="folder for bench_gradient.{md,json}")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    accuracy = accuracy_table(sizes=(8,) if args.quick else (8, 16, 64))
    cost = []
    if not args.skip_cost:
        cost = cost_table(args.rounds, **(dict(size=64, tokens=64, network_tokens=16) if args.quick else {}))
    meta = metadata(command_line(__file__, argv, make_target="bench-gradient"), rounds=args.rounds)
    lines = [header(meta), "", "## Gradient accuracy: relative error against central differences (float64, eval)", ""]
    lines.append(markdown_table(["layer", "point", "backend", "exact", "power-step (paper)"],
                                ([row["layer"], row["point"], row["backend"], row["exact"], row["power-step"]]
                                 for row in accuracy), formats=[None, None, None, ".1e", ".2g"]))
    if cost:
        lines += ["", f"## Cost (float32, numba backend, {args.threads} threads, median of {args.rounds} "
                  "interleaved rounds)", ""]
        lines.append(markdown_table(
            ["measure", "exact s", "power-step s", "exact / power-step"],
            ([row["measure"], row["exact_s"], row["power_step_s"], ratio(row["ratio"], suffix="x")] for row in cost),
            formats=[None, ".3f", ".3f", None]))
    text = "\n".join(lines)
    print(text)
    write_results(args.out / "bench_gradient", {"meta": meta, "accuracy": accuracy, "cost": cost}, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
