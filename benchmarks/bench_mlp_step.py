"""CPU cost of one training step of the MLPs, every sandwich backend side by side in one run.

``python benchmarks/bench_mlp_step.py [--hidden H] [--chunk-size C] [--batch-size B] [--steps 5]``
(defaults: those of ``galinear train-mlp``, the fields of MLPConfig and TrainConfig) prints, for
the dense MLP and for the rotor MLP on every registered sandwich backend, the median CPU
seconds (``time.process_time``: all threads of this process, so the number does not depend
on how busy the other processes on the machine are) of one step: forward, backward, Adam.
The ratios to the dense MLP are what to compare; absolute numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from galinear.train.config import MLPConfig, TrainConfig  # noqa: E402
from galinear.train.models import build_mlp, count_parameters  # noqa: E402

__all__ = ["step_seconds", "compare_backends"]


def step_seconds(config: MLPConfig, batch_size: int, steps: int = 5, warmup: int = 2) -> float:
    """Median CPU seconds of one optimiser step of the MLP of ``config`` on random data."""
    torch.manual_seed(0)
    model = build_mlp(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch_size, config.in_features)
    y = torch.randint(0, config.num_classes, (batch_size,))
    timings = []
    for step in range(warmup + steps):
        started = time.process_time()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= warmup:
            timings.append(time.process_time() - started)
    return statistics.median(timings)


def compare_backends(hidden: int, depth: int, batch_size: int, steps: int = 5, backends=None,
                     chunk_size: int | None = None, activation: str = "relu",
                     gradients=("exact",)) -> list[dict]:
    """Rows {model, backend, parameters, cpu_seconds, ratio_to_dense} measured in this one call."""
    from galinear.nn import functional

    if backends is None:
        backends = functional.available_sandwich_backends(torch.device("cpu"), torch.float32)
    base = MLPConfig(hidden=hidden, depth=depth, activation=activation)
    rows = []
    dense_seconds = step_seconds(base, batch_size, steps)
    rows.append({"model": "dense", "backend": "-", "parameters": count_parameters(build_mlp(base)),
                 "cpu_seconds": dense_seconds})
    for backend in backends:
        for gradient in gradients:
            config = MLPConfig(kind="rotor", hidden=hidden, depth=depth, activation=activation, backend=backend,
                               rotor_init_std=1.0, chunk_size=chunk_size, rotor_gradient=gradient)
            rows.append({"model": f"rotor ({gradient} gradient)", "backend": backend,
                         "parameters": count_parameters(build_mlp(config)),
                         "cpu_seconds": step_seconds(config, batch_size, steps)})
    for row in rows:
        row["ratio_to_dense"] = row["cpu_seconds"] / dense_seconds
    return rows


def main(argv=None) -> int:
    # the model and batch defaults are those of `galinear train-mlp`: the fields of its dataclasses
    model, train = MLPConfig(), TrainConfig()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=model.hidden)
    parser.add_argument("--depth", type=int, default=model.depth)
    parser.add_argument("--chunk-size", type=int, default=model.chunk_size)
    parser.add_argument("--activation", default=model.activation)
    parser.add_argument("--batch-size", type=int, default=train.batch_size)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--backends", nargs="+", default=None,
                        help="sandwich backends to time (default: every one registered for CPU float32)")
    parser.add_argument("--gradients", nargs="+", default=["exact"], choices=("exact", "power-step"),
                        help="rotor gradients to time side by side (default: exact)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = compare_backends(args.hidden, args.depth, args.batch_size, args.steps, args.backends, args.chunk_size,
                            args.activation, args.gradients)
    print(f"one training step, batch {args.batch_size}, MLP {args.hidden} x {args.depth}, "
          f"rotor chunk {args.chunk_size}, {args.activation}, "
          f"torch threads {args.threads}: median CPU seconds of {args.steps} steps")
    print("| model | backend | parameters | CPU s / step | ratio to dense MLP |")
    print("|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['model']} | {row['backend']} | {row['parameters']:,} | {row['cpu_seconds']:.3f} | "
              f"{row['ratio_to_dense']:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
