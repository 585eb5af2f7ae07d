"""CPU cost of one training step of the MLPs, every sandwich backend side by side in one run.

``python benchmarks/bench_mlp_step.py [--hidden H] [--chunk-size C] [--batch-size B] [--steps 5]``
(defaults: those of ``galinear train-mlp``, the fields of MLPConfig and TrainConfig) prints, for
the dense MLP and for the rotor MLP on every registered sandwich backend, the median CPU
seconds (``time.process_time``: all threads of this process, so the number does not depend
on how busy the other processes on the machine are) of one step: forward, backward, Adam.
The models' steps are interleaved (one step of each per round, after two warm-up rounds). The
ratios to the dense MLP are what to compare; absolute numbers depend on the machine.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import command_line, header, markdown_table, metadata, ratio, round_robin, statistic  # noqa: E402
from galinear.train.config import MLPConfig, TrainConfig  # noqa: E402
from galinear.train.models import build_mlp, count_parameters  # noqa: E402

__all__ = ["step_seconds", "compare_backends"]


def _stepper(config: MLPConfig, batch_size: int):
    """One optimiser step of the MLP of ``config`` on random data, as a callable."""
    torch.manual_seed(0)
    model = build_mlp(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch_size, config.in_features)
    y = torch.randint(0, config.num_classes, (batch_size,))

    def step():
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


def _cpu_medians(steppers: dict, steps: int, warmup: int) -> dict:
    return statistic(round_robin(steppers, steps, warmup=warmup, clock=time.process_time))


def step_seconds(config: MLPConfig, batch_size: int, steps: int = 5, warmup: int = 2) -> float:
    """Median CPU seconds of one optimiser step of the MLP of ``config`` on random data."""
    return _cpu_medians({"step": _stepper(config, batch_size)}, steps, warmup)["step"]


def compare_backends(hidden: int, depth: int, batch_size: int, steps: int = 5, backends=None,
                     chunk_size: int | None = None, activation: str = "relu",
                     gradients=("exact",), warmup: int = 2) -> list[dict]:
    """Rows {model, backend, parameters, cpu_seconds, ratio_to_dense} measured in this one call,
    the models' steps interleaved."""
    from galinear.nn import functional

    if backends is None:
        backends = functional.available_sandwich_backends(torch.device("cpu"), torch.float32)
    configs = {("dense", "-"): MLPConfig(hidden=hidden, depth=depth, activation=activation)}
    for backend in backends:
        for gradient in gradients:
            configs[(f"rotor ({gradient} gradient)", backend)] = MLPConfig(
                kind="rotor", hidden=hidden, depth=depth, activation=activation, backend=backend,
                rotor_init_std=1.0, chunk_size=chunk_size, rotor_gradient=gradient)
    seconds = _cpu_medians({key: _stepper(config, batch_size) for key, config in configs.items()}, steps, warmup)
    dense_seconds = seconds[("dense", "-")]
    return [{"model": model, "backend": backend, "parameters": count_parameters(build_mlp(config)),
             "cpu_seconds": seconds[(model, backend)], "ratio_to_dense": seconds[(model, backend)] / dense_seconds}
            for (model, backend), config in configs.items()]


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
    print(header(metadata(command_line(__file__, argv))))
    print(f"one training step, batch {args.batch_size}, MLP {args.hidden} x {args.depth}, "
          f"rotor chunk {args.chunk_size}, {args.activation}, "
          f"torch threads {args.threads}: median CPU seconds of {args.steps} interleaved steps")
    print(markdown_table(["model", "backend", "parameters", "CPU s / step", "ratio to dense MLP"],
                         ([row["model"], row["backend"], f"{row['parameters']:,}", f"{row['cpu_seconds']:.3f}",
                           ratio(row["ratio_to_dense"], 1, suffix="x")] for row in rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
